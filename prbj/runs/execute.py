"""`prbj judge` as a function: judge every pair with every judge, then write the run directory (through
runs.rundir) with its report rendered from the judgments still in memory."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl

from prbj.analysis.run_data import RunData
from prbj.analysis.stats import GroupStats, summarize
from prbj.context.planner import Planner
from prbj.data.loaders import Dataset
from prbj.judges.base import Judge, Judgment, PairTask
from prbj.llm.gateway import Gateway
from prbj.report.writer import render_report
from prbj.runs import rundir
from prbj.runs.engine import run_jobs

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
    "truncated": pl.Boolean,
    # The sample index of an LLM judge's call (above 0 when --retry-failed re-asked it); None for other judges.
    "sample_index": pl.Int64,
}


@dataclass
class RunConfig:
    dataset: str
    subsets: Sequence[str]
    limit: int | None
    seed: int
    out_dir: Path
    concurrency: int = 16
    show_progress: bool = True


@dataclass
class RunResult:
    run_dir: Path | None  # None for a dry run, which writes nothing
    judgments: pl.DataFrame
    summary: list[GroupStats]
    started: datetime
    finished: datetime
    extra: dict[str, Any] = field(default_factory=dict)


def judgments_frame(judgments: Sequence[Judgment]) -> pl.DataFrame:
    return pl.DataFrame([j.row() for j in judgments], schema=JUDGMENT_SCHEMA, orient="row")


async def judge_dataset(
    dataset: Dataset, judges: Sequence[Judge], *, concurrency: int, show_progress: bool
) -> list[Judgment]:
    jobs = [partial(judge.judge, PairTask(pair, judge.context)) for judge in judges for pair in dataset.pairs]
    return await run_jobs(jobs, concurrency=concurrency, show_progress=show_progress)


async def _judge_in_rounds(
    dataset: Dataset, judges: Sequence[Judge], *, concurrency: int, show_progress: bool, gateway: Gateway | None
) -> list[Judgment]:
    """Judge everything; under --batch the misses of each round are bought in batch jobs and the round is run
    again (a planner's aspects must come back before the judge calls that show them can be asked), until a
    round queues nothing: its judgments are the run's, as a live run would have made them."""
    work = partial(judge_dataset, dataset, judges, concurrency=concurrency, show_progress=show_progress)
    if gateway is None:
        return await work()
    if gateway.batch is not None:
        gateway.batch.show_progress = show_progress
    return await gateway.in_rounds(work)


def execute(
    dataset: Dataset,
    judges: Sequence[Judge],
    config: RunConfig,
    *,
    gateway: Gateway | None = None,
    planner: Planner | None = None,
) -> RunResult:
    started = datetime.now(UTC)
    for judge in judges:
        judge.prepare(dataset.pairs)
    judgments = asyncio.run(
        _judge_in_rounds(
            dataset, judges, concurrency=config.concurrency, show_progress=config.show_progress, gateway=gateway
        )
    )
    frame = judgments_frame(judgments)
    summary = summarize(frame, seed=config.seed)
    finished = datetime.now(UTC)
    usage = [s.as_dict() for s in gateway.stats()] if gateway is not None else []
    if gateway is not None and gateway.mode == "dry_run":
        return RunResult(None, frame, summary, started, finished, {"usage": usage})
    run_dir = rundir.new_run_dir(config.out_dir, started, _config_hash(dataset, judges, config))
    extra: dict[str, Any] = {"usage": usage}
    if gateway is not None:
        extra["mode"] = gateway.mode
        extra["max_cost"] = gateway.budget.max_cost
    if planner is not None:
        extra["planner"] = planner.describe()
        rundir.write_planner_outputs(run_dir, _planner_records(planner))
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
        summary=rundir.summary_document(dataset, config.seed, summary),
        results=summary,
        judgments=frame,
        downstream=None,
    )
    rundir.write_run(run)
    # The report is rendered from the run just held in memory, not read back from the files above.
    rundir.write_report(run_dir, render_report([run], plots_dir=rundir.PLOTS_DIR))
    return RunResult(run_dir, frame, summary, started, finished, extra)


def _config_record(config: RunConfig) -> dict[str, Any]:
    return {
        "dataset": config.dataset,
        "subsets": list(config.subsets),
        "limit": config.limit,
        "seed": config.seed,
        "concurrency": config.concurrency,
    }


def _planner_records(planner: Planner) -> list[dict[str, Any]]:
    return [
        {
            "pair_id": out.pair_id,
            "status": out.result.status,
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
