"""`prbj judge` as a function: judge every pair with every judge, then write the run directory (through
runs.rundir) with its report rendered from the judgments still in memory."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from prbj.analysis.headline import DEFAULT_HEADLINE, Headline, with_headlines
from prbj.analysis.run_data import RunData
from prbj.analysis.slices import pair_features
from prbj.analysis.stats import GroupStats, summarize
from prbj.analysis.users import users_section
from prbj.context.planner import Planner
from prbj.context.swap import swapped_profiles
from prbj.context.synthesizer import Personas, Synthesizer
from prbj.data.loaders import Dataset
from prbj.data.schema import SWAPPED_PROFILE, SYNTHESIZED, Pair
from prbj.data.status import FAILED_STATUSES, was_not_sent
from prbj.data.user_columns import user_columns
from prbj.errors import ConfigError
from prbj.judges.base import Judge, Judgment, PairTask
from prbj.llm.gateway import Gateway
from prbj.llm.routing import Routing
from prbj.privacy.guard import Guard
from prbj.report.writer import render_report
from prbj.runs import rundir
from prbj.runs.beyond import BeyondOptions
from prbj.runs.confidence import (
    ConfidenceOptions,
    cascade_plans,
    escalations,
    finish,
    prepare,
)
from prbj.runs.engine import run_jobs
from prbj.runs.progress import Meter

if TYPE_CHECKING:
    from prbj.analysis.cascade import CascadePlan

JUDGMENT_SCHEMA: dict[str, Any] = {
    "pair_id": pl.String,
    "subset": pl.String,
    "judge": pl.String,
    "context": pl.String,
    "status": pl.String,
    "verdict": pl.String,
    "correct": pl.Boolean,
    "tie": pl.Boolean,
    "score_chosen": pl.Float64,
    "score_rejected": pl.Float64,
    "margin": pl.Float64,
    "chosen_position": pl.String,
    "verdict_chosen_a": pl.String,
    "verdict_chosen_b": pl.String,
    "chosen_words": pl.Int64,
    "rejected_words": pl.Int64,
    "cost_usd": pl.Float64,
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "cached": pl.Boolean,
    "error": pl.String,
    # Why a judgment failed, in the short words the report counts failures by ("429 Too Many Requests", "quota
    # exhausted", "truncated", "refused (SAFETY)"); null when it did not fail or its status says it all.
    "cause": pl.String,
    "truncated": pl.Boolean,
    # The sample index of an LLM judge's call (above 0 when --retry-failed re-asked it); None for other judges.
    "sample_index": pl.Int64,
    # LLM judges only (null for the others): the full reply (calls joined by judges.verdict.REPLY_SEPARATOR),
    # the prompt hash of each call, the context block shown, what the answers cost when first bought (what an
    # uncached run would cost), and the seconds spent on calls really sent.
    "reply": pl.String,
    "prompt_hash": pl.String,
    "context_block": pl.String,
    "original_cost_usd": pl.Float64,
    "latency_s": pl.Float64,
}


# Personalized RewardBench, the benchmark a run reads unless told otherwise (--benchmark).
DEFAULT_BENCHMARK = {"name": "prb", "version": "1"}


@dataclass
class RunConfig:
    dataset: str
    subsets: Sequence[str]
    limit: int | None
    seed: int
    out_dir: Path
    concurrency: int = 16
    show_progress: bool = True
    # Which protocol ran (`--protocol`): "prbj", or "official" with the official repository it read.
    protocol: str = "prbj"
    official_repo: str | None = None
    beyond: BeyondOptions = field(default_factory=BeyondOptions)
    confidence: ConfidenceOptions = field(default_factory=ConfidenceOptions)
    # Which benchmark the data is (run.json's config.benchmark): its card's name and version.
    benchmark: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_BENCHMARK))
    # The figure the run ranks by (a card's [protocol] unit, and its rules under --protocol official).
    headline: Headline = DEFAULT_HEADLINE


@dataclass(frozen=True)
class Escalation:
    """--escalate-to: the strong judge's name, and one judge of it per context it must answer in that it did
    not already run in (where it did, its own judgments serve the cascade)."""

    name: str
    judges: dict[str, Judge]
    ran_alone: frozenset[str]


@dataclass
class RunResult:
    run_dir: Path | None  # None for a dry run, which writes nothing
    judgments: pl.DataFrame
    summary: list[GroupStats]
    started: datetime
    finished: datetime
    extra: dict[str, Any] = field(default_factory=dict)


# Columns only some runs have (--samples, --confidence); added when any judgment carries them.
OPTIONAL_COLUMNS: dict[str, Any] = {
    "sample_verdicts": pl.String,
    "p_chosen": pl.Float64,
    "confidence": pl.Float64,
    "confidence_source": pl.String,
}


def judgments_frame(judgments: Sequence[Judgment]) -> pl.DataFrame:
    rows = [j.row() for j in judgments]
    present = {name for row in rows for name in OPTIONAL_COLUMNS if row.get(name) is not None}
    schema = {**JUDGMENT_SCHEMA, **{n: t for n, t in OPTIONAL_COLUMNS.items() if n in present}}
    return pl.DataFrame(
        [{name: row.get(name) for name in schema} for row in rows], schema=schema, orient="row"
    )


async def judge_dataset(
    dataset: Dataset,
    judges: Sequence[Judge],
    *,
    concurrency: int,
    show_progress: bool,
    seed: int = 42,
    gateway: Gateway | None = None,
    synthesizer: Synthesizer | None = None,
) -> list[Judgment]:
    swapped = (
        swapped_profiles(dataset.pairs, seed) if any(j.context == SWAPPED_PROFILE for j in judges) else {}
    )
    personas = _personas(judges, synthesizer)
    pairs = dataset.pairs
    # Started pair by pair, each pair's judges side by side, so that every judge's provider has work from the
    # start (judge by judge, a second provider would wait for the first's last pairs); returned judge by judge.
    jobs = [_job(pair, judge, swapped, personas) for pair in pairs for judge in judges]
    # A judge that scores in batches (a Python reward model) needs that many pairs at once to fill them.
    wanted = max((getattr(judge, "pairs_in_flight", 0) for judge in judges), default=0)
    done = await run_jobs(
        jobs,
        concurrency=max(concurrency, wanted),
        show_progress=show_progress,
        meter=judging_meter(gateway),
        admitted=gateway.in_flight_allowed if gateway is not None else None,
    )
    return [done[p * len(judges) + j] for j in range(len(judges)) for p in range(len(pairs))]


def judging_meter(gateway: Gateway | None) -> Meter:
    """Progress figures of a judging run: failed judgments, and the gateway's spend and requests."""

    def failed(judgment: Judgment) -> bool:
        return judgment.status in FAILED_STATUSES

    def not_sent(judgment: Judgment) -> bool:
        return was_not_sent(judgment.status, judgment.error)

    if gateway is None:
        return Meter(failed=failed)
    return Meter(
        spent=lambda: gateway.budget.spent,
        cap=gateway.budget.max_cost,
        calls=lambda: sum(s.requests_sent for s in gateway.stats()),
        failed=failed,
        not_sent=not_sent,
    )


def _task(pair: Any, judge: Judge, swapped: dict[str, Any]) -> PairTask:
    if judge.context == SWAPPED_PROFILE:
        return PairTask(pair, judge.context, swapped_profile=swapped[pair.id])
    return PairTask(pair, judge.context)


def _personas(judges: Sequence[Judge], synthesizer: Synthesizer | None) -> Personas | None:
    """This round's personas, when a judge runs in the `synthesized` context."""
    if not any(j.context == SYNTHESIZED for j in judges):
        return None
    if synthesizer is None:
        raise ConfigError("--context synthesized needs --synthesizer <provider>")
    return synthesizer.round()


def _job(
    pair: Pair, judge: Judge, swapped: dict[str, Any], personas: Personas | None
) -> Callable[[], Awaitable[Judgment]]:
    if judge.context == SYNTHESIZED:
        assert personas is not None
        return partial(_judge_with_persona, judge, pair, personas)
    return partial(judge.judge, _task(pair, judge, swapped))


async def _judge_with_persona(judge: Judge, pair: Pair, personas: Personas) -> Judgment:
    """The pair judged with its user's persona; when the synthesizer gave none (a failed call, a refusal, a
    reply cut off or holding no persona), failed with the synthesizer's status and cause, the judge not asked."""
    persona = await personas.of(pair)
    task = PairTask(pair, SYNTHESIZED, persona=persona.shown)
    if persona.failed:
        cause = f"synthesizer: {persona.cause}" if persona.cause else None
        return judge.failed(task, persona.status, f"synthesizer: {persona.error}", cause)
    return await judge.judge(task)


@dataclass
class Stages:
    """The judgments of a run: every judge on every pair, then the strong judge of a cascade on the pairs the
    others were unsure of (its judge name marked as escalated-only), and the cascades that read them."""

    first: list[Judgment]
    plans: list[CascadePlan] = field(default_factory=list)
    second: list[Judgment] = field(default_factory=list)


async def judge_stages(
    dataset: Dataset,
    judges: Sequence[Judge],
    config: RunConfig,
    *,
    gateway: Gateway | None,
    escalation: Escalation | None,
    synthesizer: Synthesizer | None = None,
) -> Stages:
    judging = partial(
        judge_dataset,
        concurrency=config.concurrency,
        show_progress=config.show_progress,
        seed=config.seed,
        gateway=gateway,
        synthesizer=synthesizer,
    )
    first = await judging(dataset, judges)
    if escalation is None:
        return Stages(first)
    from prbj.analysis.cascade import escalated_label

    prepared = prepare(_with_features(judgments_frame(first), dataset), config.confidence)
    plans = cascade_plans(prepared.frame, config.confidence, escalation.name, set(escalation.ran_alone))
    second: list[Judgment] = []
    for context, pair_ids in escalations(prepared.frame, plans).items():
        wanted = set(pair_ids)
        narrowed = dataset.keep([p for p in dataset.pairs if p.id in wanted])
        for judgment in await judging(narrowed, [escalation.judges[context]]):
            judgment.judge = escalated_label(escalation.name)
            second.append(judgment)
    return Stages(first, plans, second)


def _with_features(frame: pl.DataFrame, dataset: Dataset) -> pl.DataFrame:
    """The per-pair columns (profile size, rubric-aspect count, the user and their groups) joined on once per
    frame, never per judgment."""
    per_pair = pair_features(dataset.pairs).join(user_columns(dataset.pairs), on="pair_id", how="left")
    return frame.join(per_pair, on="pair_id", how="left")


async def _judge_in_rounds(
    work: Callable[[], Awaitable[Stages]], gateway: Gateway | None, progress: bool
) -> Stages:
    """Judge everything; under --batch the misses of each round are bought in batch jobs and the round is run
    again (a planner's aspects must come back before the judge calls that show them can be asked, a first
    stage's answers before its unsure pairs are escalated), until a round queues nothing: its judgments are
    the run's, as a live run would have made them."""
    if gateway is None:
        return await work()
    if gateway.batch is not None:
        gateway.batch.show_progress = progress
    return await gateway.in_rounds(work)


def execute(
    dataset: Dataset,
    judges: Sequence[Judge],
    config: RunConfig,
    *,
    gateway: Gateway | None = None,
    planner: Planner | None = None,
    escalation: Escalation | None = None,
    guard: Guard | None = None,
    synthesizer: Synthesizer | None = None,
) -> RunResult:
    started = datetime.now(UTC)
    for judge in [*judges, *(escalation.judges.values() if escalation is not None else ())]:
        judge.prepare(dataset.pairs)
    work = partial(
        judge_stages, dataset, judges, config, gateway=gateway, escalation=escalation, synthesizer=synthesizer
    )
    stages = asyncio.run(_judge_in_rounds(work, gateway, config.show_progress))
    guard = guard or Guard(Routing())
    # Per-pair features (profile size, rubric-aspect count) ride along for slices; juries are added from
    # their members' judgments, costing no call. Groups are recorded as the policy allows.
    frame = guard.recorded_groups(_with_features(judgments_frame(stages.first), dataset))
    frame, juries = config.beyond.juried(frame)
    # Probabilities per judgment, withheld verdicts and cascades, when asked (and position fairness when a
    # judge ran both orders).
    surety = finish(
        prepare(frame, config.confidence),
        config.confidence,
        seed=config.seed,
        plans=stages.plans,
        second_stage=(
            guard.recorded_groups(_with_features(judgments_frame(stages.second), dataset))
            if stages.second
            else None
        ),
    )
    frame = surety.frame
    summary = with_headlines(summarize(frame, seed=config.seed), frame, config.headline, seed=config.seed)
    finished = datetime.now(UTC)
    usage = [s.as_dict() for s in gateway.stats()] if gateway is not None else []
    if gateway is not None and gateway.mode == "dry_run":
        return RunResult(None, frame, summary, started, finished, {"usage": usage})
    run_dir = rundir.new_run_dir(config.out_dir, started, _config_hash(dataset, judges, config))
    extra: dict[str, Any] = {"usage": usage, **({"selective_notes": surety.notes} if surety.notes else {})}
    if gateway is not None:
        extra["mode"] = gateway.mode
        extra["max_cost"] = gateway.budget.max_cost
    extra["privacy"] = guard.record()
    # What the run directory holds: under a policy other than `any`, no text about a user (private store).
    kept, planner_records = guard.keep_private(
        run_dir.name, frame, _planner_records(planner) if planner is not None else []
    )
    if planner is not None:
        extra["planner"] = planner.describe()
        rundir.write_planner_outputs(run_dir, planner_records)
    if synthesizer is not None:
        extra["synthesizer"] = synthesizer.describe()
        records = [output.record() for output in synthesizer.outputs()]
        rundir.write_personas(run_dir, guard.keep_private_personas(run_dir.name, records))
    run = RunData(
        run_dir=run_dir,
        run_id=run_dir.name,
        run=rundir.run_document(
            run_dir,
            started=started,
            finished=finished,
            config=_config_record(config),
            judges=[j.describe() for j in judges],
            dataset=dataset,
            extra=extra,
        ),
        summary=rundir.summary_document(
            dataset,
            config.seed,
            summary,
            extra={
                **({"headline": config.headline.as_dict()} if config.headline != DEFAULT_HEADLINE else {}),
                **_users_extra(frame, seed=config.seed),
                **config.beyond.figures(frame, juries, seed=config.seed),
                **surety.figures,
            },
        ),
        results=summary,
        judgments=kept,
        downstream=None,
    )
    rundir.write_run(run)
    # The report is rendered from the run just held in memory, not read back from the files above.
    rundir.write_report(run_dir, render_report([run], plots_dir=rundir.PLOTS_DIR))
    return RunResult(run_dir, frame, summary, started, finished, extra)


def _users_extra(frame: pl.DataFrame, *, seed: int) -> dict[str, Any]:
    """summary.json's `users` section (prbj.analysis.users), when users repeat or the data has groups."""
    section = users_section(frame, seed=seed)
    return {"users": section} if section is not None else {}


def _config_record(config: RunConfig) -> dict[str, Any]:
    return {
        "dataset": config.dataset,
        "subsets": list(config.subsets),
        "limit": config.limit,
        "seed": config.seed,
        "concurrency": config.concurrency,
        "protocol": config.protocol,
        "official_repo": config.official_repo,
        "benchmark": dict(config.benchmark),
    }


def _planner_records(planner: Planner) -> list[dict[str, Any]]:
    return [
        {
            "pair_id": out.pair_id,
            "status": out.status,
            "aspects": out.aspects,
            "cached": out.result.cached,
        }
        for out in sorted(planner.outputs(), key=lambda o: o.pair_id)
    ]


def _config_hash(dataset: Dataset, judges: Sequence[Judge], config: RunConfig) -> str:
    blob = json.dumps(
        {
            "dataset": dataset.fingerprint(),
            "judges": [j.describe() for j in judges],
            "seed": config.seed,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:6]
