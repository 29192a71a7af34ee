"""A run held in memory: what analyses and reports compute from, whether `prbj judge` just produced it or
runs.rundir read it back from a run directory. Also the one parser of a summary document's `results`.

Runs written by other versions of prbj may carry more or fewer fields; the parser takes what it knows, fills
what is missing with None, and only insists on what an analysis cannot do without.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import polars as pl

from prbj.analysis.stats import GroupStats
from prbj.errors import DataError

_KEY_FIELDS = ("judge", "context", "subset")
# Figures a report formats as numbers: a file from elsewhere must hold numbers (or null) there.
_FIGURE_FIELDS = (
    "accuracy",
    "user_accuracy",
    "user_ci_low",
    "user_ci_high",
    "headline",
    "headline_ci_low",
    "headline_ci_high",
)


@dataclass(frozen=True)
class RunData:
    run_dir: Path
    run_id: str
    run: dict[str, Any]
    summary: dict[str, Any]
    results: list[GroupStats]
    judgments: pl.DataFrame
    # Downstream outcomes the run directory holds (a prbj BoN run writes them), in the table of
    # prbj.analysis.downstream; None when it has none.
    downstream: pl.DataFrame | None

    @property
    def dataset(self) -> dict[str, Any]:
        return self.summary.get("dataset") or self.run.get("dataset") or {}

    @property
    def policy(self) -> str:
        """The run's --personal-data (runs made before it existed sent text as it is: `any`)."""
        privacy = self.run.get("privacy")
        stated = privacy.get("personal_data") if isinstance(privacy, dict) else None
        return str(stated) if stated else "any"


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
        for name in _FIGURE_FIELDS:
            value = row.get(name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            ):
                raise DataError(f"{source}: field 'results[{index}].{name}': expected a number or null")
        values: dict[str, Any] = {name: row.get(name) for name in names}
        parsed.append(GroupStats(**values))
    return parsed
