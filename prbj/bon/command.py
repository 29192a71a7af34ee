"""`prbj bon sample | score | evaluate` behind the CLI: options in, run directory out, an exit code back."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl
from rich import box
from rich.console import Console
from rich.table import Table

from prbj import __version__
from prbj.analysis.downstream import STORE_FILE
from prbj.analysis.stats import ALL_SUBSETS
from prbj.bon.demo import DEMO, DemoGoldJudge
from prbj.bon.evaluate import (
    BOOTSTRAP_RESAMPLES,
    CONFIDENCE,
    CurvePoint,
    curves,
    downstream_frame,
    evaluations,
    grade_picks,
    official_summary,
    picked_samples,
)
from prbj.bon.gold import GoldJudge, GoldMode, gold_judge, gold_params
from prbj.bon.rundir import (
    EVALUATIONS_FILE,
    FAILED_GOLD_FILE,
    GOLD_FILE,
    OFFICIAL_SUMMARY_FILE,
    PICKS_FILE,
    RMS_FOLDER,
    SAMPLES_FILE,
    SCORES_FILE,
    SUMMARY_FILE,
    BonRun,
    load_questions,
    now,
    slug,
    write_json,
)
from prbj.bon.sample import DemoPolicy, Policy, SamplingSettings, sample_answers
from prbj.bon.score import TIE_BREAK, best_of_k, reward_models, score_samples, upsert
from prbj.data.loaders import Dataset, is_public
from prbj.data.schema import Pair
from prbj.display.fit import FittingTable
from prbj.display.width import output_console, print_error, print_whole
from prbj.judges.official import Protocol, require_repo
from prbj.judges.registry import build_judges
from prbj.judges.setup import JudgeOptions, resolve_provider
from prbj.llm.gateway import Gateway
from prbj.llm.providers import missing_keys
from prbj.llm.routing import POLICIES
from prbj.llm.setup import GatewayOptions
from prbj.local.ray_executor import RayOptions
from prbj.privacy.guard import PrivacyOptions, guard_dataset, note_line
from prbj.privacy.ner import NO_NER
from prbj.report.fmt import SHORT_SUBSET
from prbj.report.terminal import print_failure_causes, print_missing_keys, usage_table
from prbj.runs.rundir import package_versions


def _usage(gateway: Gateway) -> list[dict[str, Any]]:
    return [s.as_dict() for s in gateway.stats()]


def _finish(gateway: Gateway, console: Console) -> list[dict[str, Any]]:
    usage = _usage(gateway)
    if usage:
        console.print(usage_table(usage, dry_run=gateway.mode == "dry_run"))
    if gateway.mode == "dry_run":
        print_missing_keys(missing_keys(gateway.providers()), console)
    return usage


def _counts(frame: pl.DataFrame, column: str = "status") -> dict[str, int]:
    return {str(k): int(v) for k, v in sorted(frame.group_by(column).len().iter_rows())}


# --- sample ---------------------------------------------------------------------------------------------


def run_sample_command(
    *,
    policy: str,
    n: int,
    k_profile: int,
    temperature: float | None,
    top_p: float | None,
    max_tokens: int | None,
    seed: int | None,
    dataset: str,
    subsets: tuple[str, ...],
    limit: int | None,
    out: Path,
    concurrency: int,
    progress: bool,
    **gateway_options: Any,
) -> int:
    shared = GatewayOptions.pop_from(gateway_options).for_data(dataset, public=is_public(dataset))
    privacy = PrivacyOptions.pop_from(gateway_options)
    shared = privacy.cache_for(shared)
    on_ray = RayOptions.pop_from(gateway_options)
    console = output_console()
    with shared.open() as gateway, on_ray.attach(gateway, progress=progress):
        settings = sampling_settings(
            n, k_profile, seed, temperature=temperature, top_p=top_p, max_tokens=max_tokens
        )
        sampler = (
            DemoPolicy(settings)
            if policy == DEMO
            else Policy(resolve_provider(policy, shared, gateway, settings.asked()), settings)
        )
        questions = load_questions(dataset, subsets, limit)
        shown, guard = guard_dataset(questions, shared.routed, privacy, note=note_line)
        started = now()
        try:
            frame = asyncio.run(
                gateway.in_rounds(
                    partial(
                        sample_answers,
                        sampler,
                        gateway,
                        shown.pairs,
                        concurrency=concurrency,
                        show_progress=progress,
                    )
                )
            )
        finally:
            usage = _finish(gateway, console)
    if gateway.mode == "dry_run":
        return 0
    recorded = {
        "spec": dataset,
        "source": questions.source,
        "subsets": list(subsets),
        "limit": limit,
        "fingerprint": questions.fingerprint(),
        "n_questions": len(questions.pairs),
        "questions_by_subset": _counts(frame.filter(pl.col("sample_index") == 0), "subset"),
    }
    run = BonRun.create(
        out,
        {"dataset": recorded["fingerprint"], "policy": sampler.describe()},
        {"created": started, "dataset": recorded, "versions": package_versions()},
    )
    run.write(SAMPLES_FILE, frame)
    counts = _counts(frame)
    run.meta["sample"] = {**sampler.describe(), "counts": counts}
    # Later steps show their models the questions as sampling did: same policy, same pseudonyms.
    run.meta["privacy"] = guard.record()
    run.log("sample", {"started": started, "finished": now(), "mode": gateway.mode, "usage": usage})
    run.save()
    ok = counts.get("ok", 0)
    console.print(
        f"{ok}/{frame.height} samples written for {len(questions.pairs)} questions "
        f"(N = {n}, policy {sampler.provider.name})",
    )
    _report_failures(frame, console, what="samples")
    print_whole(console, f"run directory: {run.path}")
    console.print(f"[dim]Next: prbj bon score {run.path} -p bm25-profile -p length[/dim]")
    if not ok:
        print_error(console, f"no sample came back from {sampler.provider.name}")
        return 1
    return 0


def sampling_settings(
    n: int,
    k_profile: int,
    seed: int | None,
    *,
    temperature: float | None,
    top_p: float | None,
    max_tokens: int | None,
) -> SamplingSettings:
    """The sampling settings: the options given, the official defaults for the rest (and which is which)."""
    given = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}
    default = SamplingSettings()
    return SamplingSettings(
        n=n,
        k_profile=k_profile,
        temperature=default.temperature if temperature is None else temperature,
        top_p=default.top_p if top_p is None else top_p,
        max_tokens=default.max_tokens if max_tokens is None else max_tokens,
        seed=seed,
        typed=frozenset(name for name, value in given.items() if value is not None),
    )


def _report_failures(frame: pl.DataFrame, console: Console, *, what: str) -> None:
    failed = frame.filter(pl.col("status") != "ok")
    if failed.height:
        kinds = ", ".join(f"{status}: {count}" for status, count in _counts(failed).items())
        console.print(f"[yellow]{failed.height} {what} failed ({kinds})[/yellow]")
        cause = pl.col("cause") if "cause" in failed.columns else pl.lit(None, pl.String)
        print_failure_causes(failed.select("status", cause, "error").iter_rows(), console)
    if (frame["status"] == "skipped_cache").any():
        console.print("[yellow]some answers were not in the cache (--cache-only): rerun without it.[/yellow]")


def _guarded_questions(
    run: BonRun, dataset: str | None, options: dict[str, Any]
) -> tuple[GatewayOptions, dict[str, Pair]]:
    """The shared options (their routing that of the run's data) and the run's questions as its models may see
    them: a step after sampling keeps the policy and the pseudonym settings sampling recorded, unless given."""
    recorded = run.meta.get("privacy") or {}
    shared = GatewayOptions.pop_from(options)
    privacy = PrivacyOptions.pop_from(options)
    if shared.personal_data is None and recorded.get("personal_data") in POLICIES:
        shared = replace(shared, personal_data=recorded["personal_data"])
    if privacy.pseudonymize_answers is None and privacy.ner_model is None and "ner" in recorded:
        ner = recorded.get("ner")
        privacy = replace(
            privacy,
            pseudonymize_answers=recorded.get("questions_and_answers") is True,
            # A table made without a model was asked for (--ner-model none): so is this step's.
            ner_model=ner if isinstance(ner, str) else NO_NER,
        )
    spec = str(run.meta["dataset"]["spec"])
    shared = shared.for_data(spec, public=is_public(spec))
    shared = privacy.cache_for(shared)
    questions = run.questions(dataset)
    data = Dataset(spec, tuple(questions.values()), str(run.meta["dataset"]["fingerprint"]))
    shown, _ = guard_dataset(data, shared.routed, privacy, note=note_line)
    return shared, {pair.id: pair for pair in shown.pairs}


# --- score ----------------------------------------------------------------------------------------------


def run_score_command(
    *,
    run_dir: Path,
    providers: tuple[str, ...],
    dataset: str | None,
    concurrency: int,
    progress: bool,
    **options: Any,
) -> int:
    """The body of `prbj bon score`: the remaining keyword arguments are the judge options (JudgeOptions;
    --mode is pointwise, the only mode a best-of-N ranking can use) and the shared model options."""
    on_ray = RayOptions.pop_from(options)
    judging = JudgeOptions.pop_from(options)
    console = output_console()
    run = BonRun.open(run_dir)
    samples = run.read(SAMPLES_FILE)
    shared, questions = _guarded_questions(run, dataset, options)
    with shared.open() as gateway, on_ray.attach(gateway, progress=progress):
        judges, _ = build_judges(providers, judging, shared, gateway)
        rms = reward_models(judges)
        started = now()
        try:
            scores = asyncio.run(
                gateway.in_rounds(
                    partial(
                        score_samples,
                        rms,
                        questions,
                        samples,
                        concurrency=concurrency,
                        show_progress=progress,
                        admitted=gateway.in_flight_allowed,
                    )
                )
            )
        finally:
            usage = _finish(gateway, console)
    if gateway.mode == "dry_run":
        return 0
    picks = best_of_k(scores, samples, run.ks)
    names = [rm.name for rm in rms]
    run.write(SCORES_FILE, upsert(run.read(SCORES_FILE) if run.has(SCORES_FILE) else None, scores, names))
    run.write(PICKS_FILE, upsert(run.read(PICKS_FILE) if run.has(PICKS_FILE) else None, picks, names))
    section = run.meta.setdefault("score", {"k": run.ks, "tie_break": TIE_BREAK, "rms": {}})
    for rm in rms:
        mine = scores.filter(pl.col("rm") == rm.name)
        section["rms"][rm.name] = {**rm.describe(), "counts": _counts(mine) if mine.height else {}}
    run.log(
        "score", {"started": started, "finished": now(), "rms": names, "mode": gateway.mode, "usage": usage}
    )
    run.save()
    console.print(FittingTable(_score_table(scores, picks, names, max(run.ks))))
    _report_failures(scores, console, what="scores")
    print_whole(console, f"wrote {run.path / SCORES_FILE} and {run.path / PICKS_FILE}")
    console.print(f"[dim]Next: prbj bon evaluate {run.path} --gold <provider>[/dim]")
    empty = [
        name for name in names if scores.filter(pl.col("rm") == name, pl.col("status") == "ok").is_empty()
    ]
    if empty:
        print_error(console, f"no sample got a score from {', '.join(empty)}")
        return 1
    return 0


def _score_table(scores: pl.DataFrame, picks: pl.DataFrame, names: Sequence[str], n: int) -> Table:
    table = Table(title="Reward model scores", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("rm", style="bold", overflow="fold")
    for column in ("scored", "failed", f"no pick (k={n})"):
        table.add_column(column, justify="right", no_wrap=True)
    for name in names:
        mine = scores.filter(pl.col("rm") == name)
        ok = int((mine["status"] == "ok").sum())
        no_pick = picks.filter(
            pl.col("rm") == name, pl.col("k") == n, pl.col("sample_index").is_null()
        ).height
        table.add_row(name, str(ok), str(mine.height - ok), str(no_pick))
    return table


# --- evaluate -------------------------------------------------------------------------------------------


def run_evaluate_command(
    *,
    run_dir: Path,
    gold: str,
    gold_mode: GoldMode,
    dataset: str | None,
    seed: int,
    concurrency: int,
    progress: bool,
    protocol: Protocol = "prbj",
    official_repo: Path | None = None,
    scalar_input: str | None = None,
    **gateway_options: Any,
) -> int:
    del scalar_input  # grading calls no reward model; the option is shared with `bon score`
    repo = require_repo(official_repo, protocol)  # before any call: a missing file stops the run first
    console = output_console()
    run = BonRun.open(run_dir)
    picks = run.read(PICKS_FILE)
    samples = run.read(SAMPLES_FILE)
    shared, questions = _guarded_questions(run, dataset, gateway_options)
    with shared.open() as gateway:
        judge = (
            DemoGoldJudge(gateway)
            if gold == DEMO
            else gold_judge(
                resolve_provider(gold, shared, gateway, gold_params(repo)), gateway, gold_mode, repo
            )
        )
        started = now()
        try:
            graded = asyncio.run(
                gateway.in_rounds(
                    partial(
                        grade_picks,
                        judge,
                        questions,
                        samples,
                        picks,
                        concurrency=concurrency,
                        show_progress=progress,
                        admitted=gateway.in_flight_allowed,
                    )
                )
            )
        finally:
            usage = _finish(gateway, console)
    if gateway.mode == "dry_run":
        return 0
    if graded.height and not (graded["status"] == "ok").any() and (run.path / SUMMARY_FILE).exists():
        # Every gold call failed: replacing a good summary.json and downstream.parquet with empty curves would
        # lose them. The failed grades go to their own file; the previous outputs stay as they were.
        run.write(FAILED_GOLD_FILE, graded)
        run.log("evaluate", {"started": started, "finished": now(), "mode": gateway.mode, "usage": usage,
                             "failed": True})  # fmt: skip
        run.save()
        _report_failures(graded, console, what="gold grades")
        console.print(
            f"[red]every gold call failed: kept the previous {SUMMARY_FILE} and {STORE_FILE} in {run.path}; "
            f"the failed grades are in {FAILED_GOLD_FILE}. Fix the cause and rerun.[/red]",
        )
        return 1
    evaluated = evaluations(picks, graded)
    points = curves(evaluated, seed=seed)
    run.write(GOLD_FILE, graded)
    run.write(EVALUATIONS_FILE, evaluated)
    write_json(run.path / SUMMARY_FILE, _summary_document(run, judge, points, seed))
    official = _write_official_summaries(run, points)
    run.write(STORE_FILE, downstream_frame(points, origin=f"prbj bon run {run.meta['run_id']}"))
    run.meta["evaluate"] = {
        "gold": judge.describe(),
        "graded_picks": graded.height,
        "counts": _counts(graded) if graded.height else {},
        "official_summaries": official,
    }
    run.log("evaluate", {"started": started, "finished": now(), "mode": gateway.mode, "usage": usage})
    run.save()
    console.print(FittingTable(curve_table(points)))
    _report_failures(graded, console, what="gold grades")
    console.print(
        f"{picked_samples(picks).height} distinct picks graded for {len(official)} RM(s); wrote "
        f"{SUMMARY_FILE}, {STORE_FILE} and {RMS_FOLDER}/<rm>/{OFFICIAL_SUMMARY_FILE} in {run.path}",
    )
    console.print(f"[dim]Next: prbj downstream add {run.path}[/dim]")
    if not (graded["status"] == "ok").any():
        print_error(console, f"no pick got a gold grade from {judge.describe()['provider']}")
        return 1
    return 0


def _summary_document(
    run: BonRun, judge: GoldJudge, points: Sequence[CurvePoint], seed: int
) -> dict[str, Any]:
    """summary.json: a pure function of the run's files, the gold judge and the seed (no times), so that
    evaluating the same run twice writes the same file."""
    sample = run.meta["sample"]
    return {
        "prbj_version": __version__,
        "run_id": run.meta["run_id"],
        "dataset": {k: run.meta["dataset"][k] for k in ("source", "fingerprint", "n_questions")},
        "policy": {k: sample[k] for k in ("provider", "model", "n", "k_profile", "temperature", "top_p")},
        "gold": judge.describe(),
        "tie_break": TIE_BREAK,
        "score_scale": "per question: sum of aspect scores (0/1/2) / (2 * aspects), in [0, 1]",
        "seed": seed,
        "bootstrap": {"resamples": BOOTSTRAP_RESAMPLES, "confidence": CONFIDENCE, "over": "questions"},
        "results": [p.as_dict() for p in points],
    }


def _write_official_summaries(run: BonRun, points: Sequence[CurvePoint]) -> dict[str, str]:
    written = {}
    for rm in dict.fromkeys(p.rm for p in points):
        folder = run.path / RMS_FOLDER / slug(rm)
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / OFFICIAL_SUMMARY_FILE, official_summary(points, rm))
        written[rm] = str((folder / OFFICIAL_SUMMARY_FILE).relative_to(run.path))
    return written


def _cell(point: CurvePoint | None) -> str:
    return "—" if point is None or point.mean is None else f"{point.mean:.3f}"


def curve_table(points: Sequence[CurvePoint]) -> Table:
    """Best-of-k curves over all questions: one row per RM, one column per k, then each subset at the largest k."""
    overall = [p for p in points if p.subset == ALL_SUBSETS]
    ks = sorted({p.k for p in overall})
    subsets = sorted({p.subset for p in points if p.subset != ALL_SUBSETS})
    by_key = {(p.rm, p.subset, p.k): p for p in points}
    top = ks[-1] if ks else 0
    table = Table(
        title="Best-of-k: mean gold score of the picks (0-1)",
        caption=f"subset columns at k={top}; CI: 95% bootstrap over questions at k={top}",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("rm", style="bold", overflow="fold")
    for k in ks:
        table.add_column(f"k={k}", justify="right", no_wrap=True)
    table.add_column("95% CI", justify="right", style="dim", no_wrap=True)
    for subset in subsets:
        table.add_column(SHORT_SUBSET.get(subset, subset), justify="right", no_wrap=True)
    table.add_column("failed", justify="right", no_wrap=True)
    for rm in dict.fromkeys(p.rm for p in overall):
        last = by_key.get((rm, ALL_SUBSETS, top))
        interval = (
            f"{last.ci_low:.3f}-{last.ci_high:.3f}"
            if last is not None and last.ci_low is not None and last.ci_high is not None
            else "—"
        )
        failed = f"{last.no_pick + last.gold_failed}/{last.n}" if last is not None else "—"
        table.add_row(
            rm,
            *(_cell(by_key.get((rm, ALL_SUBSETS, k))) for k in ks),
            interval,
            *(_cell(by_key.get((rm, subset, top))) for subset in subsets),
            failed,
        )
    return table
