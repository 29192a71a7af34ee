"""`prbj run FILE --dry-run`: per stage and in total, the calls needed, those already cached, tokens, cost at
live and at batch price, and a time estimate from each profile's rate limits; nothing is sent.

Each stage runs its own command with --dry-run, in order, so the counts are the commands' own. A request an
earlier stage plans (the planner's, for the judges that show its aspects) is counted once. Two kinds of counts
cannot be exact before earlier stages have really run, and are marked as upper bounds ("≤"): best-of-N scores
of samples not written yet, and gold grades of picks not made yet (a pick shared by several RMs or k is graded
once). Scalar reward models (`hf:`) are not run by a dry run: their answers are counted, scored in-process for
free.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prbj.bon.demo import DEMO
from prbj.bon.rundir import SAMPLES_FILE, best_of_ks, load_questions
from prbj.data import load_dataset
from prbj.errors import ConfigError, PrbjError
from prbj.experiments.planner_stage import run_planner
from prbj.experiments.stages import BON_EVALUATE_STAGE, BON_SAMPLE_STAGE, BON_SCORE_STAGE, PLANNER, Stage
from prbj.experiments.usage import ProviderPlan, StageUsage, estimate_seconds, stage_usage
from prbj.judges.baselines import BASELINES
from prbj.llm import providers
from prbj.llm.gateway import planned_keys
from prbj.llm.setup import watched_gateways

if TYPE_CHECKING:
    from prbj.experiments.runner import Runner


def _contexts(options: dict[str, Any], default: int = 1) -> int:
    value = options.get("context")
    if value is None:
        return default
    return len([value] if isinstance(value, str) else value)


def _spec(runner: Runner, name: str) -> providers.ProviderSpec | None:
    defaults = runner.experiment.defaults
    try:
        return providers.resolve_provider(name, defaults.get("providers_dir"), defaults.get("api_base"))
    except ConfigError:
        return None


def _calls_free(name: str) -> bool:
    return name in BASELINES or name.startswith("hf:") or name == DEMO


def _bound(runner: Runner, provider: str, calls: int) -> ProviderPlan:
    return ProviderPlan(
        provider, calls=calls, seconds=estimate_seconds(_spec(runner, provider), calls, 0), bound=True
    )


def _score_bound(runner: Runner) -> StageUsage:
    bon = runner.experiment.bon
    assert bon is not None
    e = runner.experiment
    questions = len(load_questions(e.dataset, e.subsets, e.limit).pairs)
    per_sample = _contexts(bon.score.options)
    plans = [_bound(runner, rm, questions * bon.n * per_sample) for rm in bon.rms if not _calls_free(rm)]
    return StageUsage(providers=plans, note="at most: the samples are not written yet (tokens and cost then)")


def _evaluate_bound(runner: Runner) -> StageUsage:
    bon = runner.experiment.bon
    assert bon is not None
    if bon.gold == DEMO:
        return StageUsage(note="demo gold judge: no calls")
    e = runner.experiment
    pairs = load_questions(e.dataset, e.subsets, e.limit).pairs
    rms = len(bon.rms) * _contexts(bon.score.options)
    picks = min(bon.n, rms * len(best_of_ks(bon.n)))
    per_aspect = bon.evaluate.options.get("gold_mode") == "per-aspect"
    calls = sum(picks * (len(p.view("oracle").rubric_aspects) if per_aspect else 1) for p in pairs)
    return StageUsage(providers=[_bound(runner, bon.gold, calls)], note="at most: the picks are not made yet")


def _local_scores(runner: Runner, stage: Stage) -> StageUsage:
    e = runner.experiment
    assert stage.judge is not None
    entry = stage.benchmark or e.main
    pairs = len(load_dataset(entry.dataset, entry.benchmark).select(e.subsets, e.limit).pairs)
    answers = pairs * 2 * _contexts(stage.judge.settings.options)
    return StageUsage(
        note="scored in-process (free; a dry run does not load the model)", local_answers=answers
    )


def _bon_ready(runner: Runner, stage_name: str) -> Path | None:
    """The BoN run directory when the stage before `stage_name` is done and its outputs are there."""
    before = {BON_SCORE_STAGE: BON_SAMPLE_STAGE, BON_EVALUATE_STAGE: BON_SCORE_STAGE}[stage_name]
    record = runner.manifest.stages.get(before)
    sample = runner.manifest.stages.get(BON_SAMPLE_STAGE)
    if record is None or record.state != "done" or sample is None or not sample.run_dirs:
        return None
    folder = runner.manifest.folders(BON_SAMPLE_STAGE)[0]
    needed = SAMPLES_FILE if stage_name == BON_SCORE_STAGE else "picks.parquet"
    return folder if (folder / needed).exists() else None


def plan_stage(runner: Runner, stage: Stage) -> StageUsage:
    build = runner.commands
    with watched_gateways() as seen:
        if stage.kind == PLANNER:
            run_planner(
                runner.experiment,
                build.folder(stage),
                max_cost=None,
                dry_run=True,
                progress=False,
                benchmark=stage.benchmark,
            )
        elif stage.kind == "judge":
            assert stage.judge is not None
            if stage.judge.provider.startswith("hf:"):
                return _local_scores(runner, stage)
            _checked(runner, build.judge(stage, max_cost=None, dry_run=True))
        elif stage.kind == BON_SAMPLE_STAGE:
            _checked(runner, build.bon_sample(stage, max_cost=None, dry_run=True))
        elif stage.kind == BON_SCORE_STAGE:
            folder = _bon_ready(runner, stage.kind)
            if folder is None:
                return _score_bound(runner)
            _checked(runner, build.bon_score(folder, max_cost=None, dry_run=True))
        elif stage.kind == BON_EVALUATE_STAGE:
            folder = _bon_ready(runner, stage.kind)
            if folder is None:
                return _evaluate_bound(runner)
            _checked(runner, build.bon_evaluate(folder, max_cost=None, dry_run=True))
    return stage_usage(seen)


def _checked(runner: Runner, invocation: Any) -> None:
    code = runner._invoke(invocation)
    if code != 0:
        raise ConfigError(f"dry run of '{invocation.shell()}' failed (exit {code}); see above")


def scaled(usage: StageUsage, factor: float) -> StageUsage:
    plans = [
        replace(
            p,
            calls=round(p.calls * factor),
            cached=round(p.cached * factor),
            prompt_tokens=round(p.prompt_tokens * factor),
            completion_tokens=round(p.completion_tokens * factor),
            cost_usd=p.cost_usd * factor,
            batch_cost_usd=p.batch_cost_usd * factor,
            seconds=p.seconds * factor,
        )
        for p in usage.providers
    ]
    return replace(usage, providers=plans, local_answers=round(usage.local_answers * factor))


def stand_in(runner: Runner) -> tuple[Runner, float, str]:
    """The runner to plan with, and the factor its counts are scaled by: the experiment itself (1.0), or, when its
    dataset is not on this machine and the file states `expected_pairs`, the same experiment on the bundled
    sample, scaled to that many pairs."""
    from prbj.experiments.runner import Runner

    e = runner.experiment
    for entry in e.studied:
        try:
            load_dataset(entry.dataset, entry.benchmark)
        except PrbjError as err:
            if e.expected_pairs is None or len(e.studied) > 1:
                raise ConfigError(
                    f"{e.path}: dataset {entry.dataset} cannot be read here ({err}); set [experiment] "
                    "expected_pairs to plan on the bundled sample scaled to the dataset's size (one benchmark)"
                ) from None
            break
    else:
        return runner, 1.0, ""
    sample = replace(e, dataset="sample", subsets=(), limit=None)
    pairs = len(load_dataset("sample").pairs)
    note = (
        f"estimated: {e.dataset} is not on this machine; planned on the bundled sample ({pairs} pairs) scaled "
        f"to {e.expected_pairs:,}"
    )
    planner = Runner(
        sample,
        runner.cli,
        runner.directory / "dry-run-sample",
        console=runner.console,
        options=runner.options,
    )
    return planner, e.expected_pairs / pairs, note


def plan_stages(runner: Runner) -> tuple[list[tuple[Stage, StageUsage]], list[str], str]:
    """Every stage's plan, in order, the API keys a real run would still need, and how the plan was made when
    it is an estimate."""
    planning, factor, note = stand_in(runner)
    token = planned_keys.set(set())
    plans = []
    try:
        with watched_gateways() as everything:
            for stage in planning.stages:
                runner.console.rule(f"plan: {stage.name}")
                usage = plan_stage(planning, stage)
                plans.append((stage, scaled(usage, factor) if factor != 1.0 else usage))
    finally:
        planned_keys.reset(token)
    return plans, providers.missing_keys(spec for g in everything for spec in g.providers()), note
