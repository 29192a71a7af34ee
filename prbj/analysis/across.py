"""Judges across benchmarks: one table, judge × benchmark, of user accuracy with its interval, and each judge's
mean rank (its rank within each benchmark, averaged over the benchmarks it ran on). Pure: works on runs already
loaded.

A benchmark is what run.json names (`config.benchmark`: its name and version; `prb` for a run that does not say),
on one dataset fingerprint: two runs on different pairs of one benchmark (a subset, a --limit) are two columns, never
ranked together. Within a column each judge × context counts once, from its latest run.

The figure is each benchmark's headline (prbj.analysis.headline: the unit its card's [protocol] names, scored by
the rules the run used), as on its own leaderboard; without a card protocol it is user accuracy (the mean over
users of each user's accuracy, prbj.analysis.users), which is pair accuracy where every user has one pair (PRB).
Ranks are within a column,
best first, ties sharing the mean of their places; an oracle context (the judge saw the scoring standard) is
shown but never ranked, as on every leaderboard.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from prbj.analysis.chance import chance_of
from prbj.analysis.headline import headline_of
from prbj.analysis.run_data import RunData
from prbj.analysis.selection import dataset_key, is_official
from prbj.analysis.stats import ALL_SUBSETS, GroupStats

ORACLE_CONTEXT = "oracle"
DEFAULT_BENCHMARK = "prb"
_OFFICIAL = " (official)"


@dataclass(frozen=True)
class BenchmarkColumn:
    key: str
    name: str
    version: str | None
    fingerprint: str
    label: str
    # What a judge picking at random reaches on its items (1/k each; None: every item is a pair, 50%).
    chance: float | None = None


@dataclass(frozen=True)
class Cell:
    accuracy: float | None
    ci_low: float | None
    ci_high: float | None
    # True when the figure is user accuracy that differs from pair accuracy (users repeat in that run).
    per_user: bool
    run_id: str
    rank: float | None = None
    # Which figure it is: the run's headline (`users`, `pairs`, `judgments`, or `official`).
    headline: str = "users"


@dataclass(frozen=True)
class AcrossRow:
    judge: str
    context: str
    cells: dict[str, Cell] = field(default_factory=dict)

    @property
    def is_upper_bound(self) -> bool:
        return self.context == ORACLE_CONTEXT

    @property
    def mean_rank(self) -> float | None:
        ranks = [cell.rank for cell in self.cells.values() if cell.rank is not None]
        return sum(ranks) / len(ranks) if ranks else None

    @property
    def ranked_on(self) -> int:
        return sum(1 for cell in self.cells.values() if cell.rank is not None)


@dataclass(frozen=True)
class AcrossTable:
    columns: list[BenchmarkColumn]
    rows: list[AcrossRow]

    def as_dict(self) -> dict[str, Any]:
        """The table as JSON: benchmarks, then one row per judge × context with its cells by benchmark key."""
        return {
            "benchmarks": [asdict(column) for column in self.columns],
            "rows": [
                {
                    "judge": row.judge,
                    "context": row.context,
                    "mean_rank": row.mean_rank,
                    "ranked_on": row.ranked_on,
                    "cells": {key: asdict(cell) for key, cell in row.cells.items()},
                }
                for row in self.rows
            ],
        }


def benchmark_name(run: RunData) -> tuple[str, str | None]:
    """The benchmark's name and version as run.json's config records them; Personalized RewardBench for a run
    that does not say (runs from before benchmarks were recorded judged nothing else)."""
    config = run.run.get("config")
    recorded = config.get("benchmark") if isinstance(config, dict) else None
    if isinstance(recorded, dict) and isinstance(recorded.get("name"), str) and recorded["name"]:
        version = recorded.get("version")
        return recorded["name"], None if version is None else str(version)
    return DEFAULT_BENCHMARK, None


def _column_key(run: RunData) -> tuple[str, str]:
    """A benchmark on one dataset; its authors' protocol (--protocol official on a card's [protocol]) is a column
    of its own, never ranked together with prbj's figures."""
    name = benchmark_name(run)[0]
    return (f"{name}{_OFFICIAL}" if is_official(run) else name), dataset_key(run)


def columns_of(runs: Sequence[RunData]) -> list[BenchmarkColumn]:
    """One column per benchmark × dataset fingerprint, in the order the runs came; labelled by name and the
    version a run records (a run that records none joins the column of its data), with the fingerprint where
    two columns would otherwise share a label."""
    versions: dict[tuple[str, str], str | None] = {}
    chances: dict[tuple[str, str], float] = {}
    for run in runs:
        key = _column_key(run)
        if versions.get(key) is None:
            versions[key] = benchmark_name(run)[1]
        if key not in chances and (chance := chance_of(run.judgments)) is not None:
            chances[key] = chance.level
    labels = [_label(name, version) for (name, _), version in versions.items()]
    columns = []
    for ((name, fingerprint), version), label in zip(versions.items(), labels, strict=True):
        shown = f"{label} ({fingerprint[:8]})" if labels.count(label) > 1 else label
        columns.append(
            BenchmarkColumn(
                f"{name}@{fingerprint}", name, version, fingerprint, shown, chances.get((name, fingerprint))
            )
        )
    return columns


def _label(name: str, version: str | None) -> str:
    # `prism v2`, not `prism 2`: a bare number beside a name reads like a count.
    base, official, _ = name.partition(_OFFICIAL)
    return (base if version is None else f"{base} v{version}") + official


def _cell(row: GroupStats, run: RunData) -> Cell:
    headline = headline_of(run.summary)
    low, high = headline.interval(row)
    return Cell(headline.value(row), low, high, headline.is_users(row), run.run_id, headline=headline.short)


def _started(run: RunData) -> str:
    return str(run.run.get("started") or run.run_id)


def _ranks(values: dict[tuple[str, str], float]) -> dict[tuple[str, str], float]:
    """Rank 1 for the highest value; tied values share the mean of the places they take."""
    ordered = sorted(values.items(), key=lambda item: -item[1])
    ranks: dict[tuple[str, str], float] = {}
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1][1] == ordered[start][1]:
            end += 1
        for index in range(start, end + 1):
            ranks[ordered[index][0]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def across_benchmarks(runs: Sequence[RunData]) -> AcrossTable:
    columns = columns_of(runs)
    by_key = {(c.name, c.fingerprint): c for c in columns}
    cells: dict[tuple[str, str], dict[str, Cell]] = {}
    # Later runs overwrite earlier ones: each judge × context counts once per column, from its latest run.
    for run in sorted(runs, key=_started):
        column = by_key[_column_key(run)]
        for row in run.results:
            if row.subset == ALL_SUBSETS:
                cells.setdefault((row.judge, row.context), {})[column.key] = _cell(row, run)
    for column in columns:
        fair = {
            entry: mine[column.key].accuracy
            for entry, mine in cells.items()
            if column.key in mine and mine[column.key].accuracy is not None and entry[1] != ORACLE_CONTEXT
        }
        for entry, rank in _ranks({k: v for k, v in fair.items() if v is not None}).items():
            cell = cells[entry][column.key]
            cells[entry][column.key] = replace(cell, rank=rank)
    rows = [AcrossRow(judge, context, mine) for (judge, context), mine in cells.items()]
    # Judges ranked on more benchmarks first, then by mean rank; oracle rows last (an upper bound).
    rows.sort(
        key=lambda r: (
            r.is_upper_bound,
            -r.ranked_on,
            r.mean_rank if r.mean_rank is not None else float("inf"),
            r.judge,
            r.context,
        )
    )
    return AcrossTable(columns, rows)
