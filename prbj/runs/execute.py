"""`prbj judge` as a function: judge every pair with every judge and write the run directory."""

from __future__ import annotations

import asyncio
import hashlib
import json
import platform
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

from prbj import __version__
from prbj.data.loaders import Dataset
from prbj.runs.engine import run_jobs
from prbj.judges.base import Judge, Judgment, PairTask
from prbj.llm.gateway import Gateway
from prbj.context.planner import Planner
from prbj.analysis.stats import BOOTSTRAP_RESAMPLES, CONFIDENCE, GroupStats, summarize

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
        judge_dataset(dataset, judges, concurrency=config.concurrency, show_progress=config.show_progress)
    )
    frame = judgments_frame(judgments)
    summary = summarize(frame, seed=config.seed)
    finished = datetime.now(UTC)
    usage = [s.as_dict() for s in gateway.stats()] if gateway is not None else []
    if gateway is not None and gateway.mode == "dry_run":
        return RunResult(None, frame, summary, started, finished, {"usage": usage})
    run_dir = _new_run_dir(config.out_dir, started, _config_hash(dataset, judges, config))
    extra: dict[str, Any] = {"usage": usage}
    if gateway is not None:
        extra["mode"] = gateway.mode
        extra["max_cost"] = gateway.budget.max_cost
    if planner is not None:
        extra["planner"] = planner.describe()
        _write_planner_outputs(run_dir / "planner.jsonl", planner)
    write_run(run_dir, dataset, judges, config, frame, summary, started, finished, extra)
    _write_reports(run_dir)
    return RunResult(run_dir, frame, summary, started, finished, extra)


def _write_planner_outputs(path: Path, planner: Planner) -> None:
    lines = [
        json.dumps(
            {
                "pair_id": out.pair_id,
                "status": out.result.status,
                "aspects": out.aspects,
                "cached": out.result.cached,
            },
            ensure_ascii=False,
        )
        for out in sorted(planner.outputs(), key=lambda o: o.pair_id)
    ]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _write_reports(run_dir: Path) -> None:
    # Imported here: the report modules are only needed once the run's data is on disk.
    from prbj.report.writer import write_reports

    write_reports([run_dir])


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


def _new_run_dir(out_dir: Path, started: datetime, config_hash: str) -> Path:
    stem = f"{started:%Y%m%d-%H%M%S}-{config_hash}"
    candidate = out_dir / stem
    suffix = 1
    while candidate.exists():
        suffix += 1
        candidate = out_dir / f"{stem}-{suffix}"
    candidate.mkdir(parents=True)
    return candidate


def package_versions() -> dict[str, str]:
    versions = {"prbj": __version__, "python": platform.python_version()}
    for package in ("polars", "numpy", "litellm", "wordllama", "torch", "transformers"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions


def summary_document(dataset: Dataset, config: RunConfig, summary: Sequence[GroupStats]) -> dict[str, Any]:
    """The content of summary.json: a pure function of data, judges and seed (no times, no paths), so that
    two runs with the same inputs produce identical files."""
    return {
        "prbj_version": __version__,
        "dataset": {
            "source": dataset.source,
            "fingerprint": dataset.fingerprint(),
            "n_pairs": len(dataset.pairs),
            "subsets": dataset.subsets,
        },
        "seed": config.seed,
        "bootstrap": {"resamples": BOOTSTRAP_RESAMPLES, "confidence": CONFIDENCE},
        "results": [row.as_dict() for row in summary],
    }


def write_run(
    run_dir: Path,
    dataset: Dataset,
    judges: Sequence[Judge],
    config: RunConfig,
    frame: pl.DataFrame,
    summary: Sequence[GroupStats],
    started: datetime,
    finished: datetime,
    extra: dict[str, Any] | None = None,
) -> None:
    run = {
        "run_id": run_dir.name,
        "command": "judge",
        "started": started.isoformat(timespec="seconds"),
        "finished": finished.isoformat(timespec="seconds"),
        "config": {
            "dataset": config.dataset,
            "subsets": list(config.subsets),
            "limit": config.limit,
            "seed": config.seed,
            "concurrency": config.concurrency,
        },
        "judges": [j.describe() for j in judges],
        "dataset": {
            "source": dataset.source,
            "fingerprint": dataset.fingerprint(),
            "n_pairs": len(dataset.pairs),
            "subsets": dataset.subsets,
        },
        "versions": package_versions(),
        **(extra or {}),
    }
    _write_json(run_dir / "run.json", run)
    frame.write_parquet(run_dir / "judgments.parquet")
    _write_json(run_dir / "summary.json", summary_document(dataset, config, summary))


def _write_json(path: Path, document: dict[str, Any]) -> None:
    # Write then rename, so an interrupted run never leaves half a file that a later command trusts.
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(
        json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8"
    )
    tmp.replace(path)
