"""Read run directories back: run.json, summary.json, judgments.parquet and optional downstream outcomes.

Runs written by other versions of prbj may carry more or fewer columns and fields; readers here take what
they know, fill what is missing with None, and only insist on what a report cannot do without.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import polars as pl

from prbj.errors import DataError
from prbj.analysis.stats import GroupStats

RUN_FILE = "run.json"
SUMMARY_FILE = "summary.json"
JUDGMENTS_FILE = "judgments.parquet"

# Downstream outcomes, when a run directory has them: the table of prbj.analysis.downstream.
DOWNSTREAM_FILE = "downstream.parquet"

_KEY_FIELDS = ("judge", "context", "subset")


@dataclass(frozen=True)
class RunData:
    run_dir: Path
    run_id: str
    run: dict[str, Any]
    summary: dict[str, Any]
    results: list[GroupStats]
    judgments: pl.DataFrame
    downstream: pl.DataFrame | None

    @property
    def dataset(self) -> dict[str, Any]:
        return self.summary.get("dataset") or self.run.get("dataset") or {}


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: not valid JSON: {err.msg}") from None


def result_rows(document: Any, source: Path) -> list[GroupStats]:
    """GroupStats from the `results` list of a summary.json-like document; fields unknown to this version are
    ignored and fields it expects but the file lacks become None."""
    rows = document.get("results") if isinstance(document, dict) else None
    if not isinstance(rows, list):
        raise DataError(f"{source}: field 'results': missing or not a list")
    names = [f.name for f in fields(GroupStats)]
    parsed = []
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DataError(f"{source}: field 'results[{index}]': not an object")
        for key in _KEY_FIELDS:
            if not isinstance(row.get(key), str):
                raise DataError(f"{source}: field 'results[{index}].{key}': missing or not a string")
        parsed.append(GroupStats(**{name: row.get(name) for name in names}))
    return parsed


def load_run(run_dir: Path) -> RunData:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise DataError(f"{run_dir}: not a run directory (no such folder)")
    summary_path = run_dir / SUMMARY_FILE
    if not summary_path.exists():
        raise DataError(f"{run_dir}: not a run directory ({SUMMARY_FILE} missing)")
    summary = read_json(summary_path)
    results = result_rows(summary, summary_path)
    run_path = run_dir / RUN_FILE
    run = read_json(run_path) if run_path.exists() else {}
    judgments_path = run_dir / JUDGMENTS_FILE
    if not judgments_path.exists():
        raise DataError(f"{run_dir}: {JUDGMENTS_FILE} missing")
    try:
        judgments = pl.read_parquet(judgments_path)
    except Exception as err:  # polars raises several error types for damaged files
        raise DataError(f"{judgments_path}: cannot read: {err}") from None
    missing = {"pair_id", "subset", "judge", "context", "status", "correct"} - set(judgments.columns)
    if missing:
        raise DataError(f"{judgments_path}: missing columns {', '.join(sorted(missing))}")
    return RunData(
        run_dir=run_dir,
        run_id=str(run.get("run_id") or run_dir.name),
        run=run,
        summary=summary,
        results=results,
        judgments=judgments,
        downstream=load_downstream(run_dir),
    )


def load_downstream(run_dir: Path) -> pl.DataFrame | None:
    """Downstream outcomes a run directory holds (a prbj BoN run writes them), in the table format of
    `prbj downstream` (docs/downstream.md): columns rm, source, subset, k, score, n, std, origin."""
    path = run_dir / DOWNSTREAM_FILE
    return read_downstream(path) if path.exists() else None


def read_downstream(path: Path) -> pl.DataFrame:
    """Any input `prbj downstream add` reads without --rm: a store folder, a downstream .parquet, or CSV/JSON
    records with rm, subset, score (source, k, n, std optional)."""
    from prbj.analysis.downstream import outcomes_frame, read_outcomes

    return outcomes_frame(read_outcomes(Path(path)))
