"""Benchmark accuracies per reward model, the predictors that `prbj correlate` tests: this benchmark's accuracy
from prbj runs (loaded by runs.rundir; with per-item outcomes for the item bootstrap), and other benchmarks'
accuracies from a CSV (`rm, benchmark, accuracy`)."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from prbj.analysis.run_data import RunData
from prbj.analysis.stats import ALL_SUBSETS
from prbj.errors import ConfigError, DataError

PRBJ_BENCHMARK = "Personalized-RewardBench"


@dataclass(frozen=True)
class ItemOutcomes:
    """0/1 outcomes on the benchmark items every listed RM was judged on: (items × RMs) arrays."""

    items: tuple[str, ...]
    rms: tuple[str, ...]
    correct: np.ndarray
    judged: np.ndarray


@dataclass(frozen=True)
class BenchmarkColumn:
    name: str
    # The benchmark subset the accuracies come from; None for external benchmarks (one figure per RM).
    subset: str | None
    accuracy: Mapping[str, float]
    # rm, pair_id, correct, judged: one row per RM × item, when the run directories have judgments.parquet.
    per_item: pl.DataFrame | None = None
    per_item_rms: frozenset[str] = frozenset()

    def item_outcomes(self, rms: Sequence[str]) -> ItemOutcomes | None:
        """Per-item outcomes of `rms` on the items all of them were judged on; None when some RM has none."""
        if self.per_item is None or not set(rms) <= self.per_item_rms:
            return None
        mine = self.per_item.filter(pl.col("rm").is_in(list(rms)))
        shared: set[str] | None = None
        for rm in rms:
            ids = set(mine.filter(pl.col("rm") == rm)["pair_id"].to_list())
            shared = ids if shared is None else shared & ids
        items = tuple(sorted(shared or ()))
        if not items:
            return None
        position = {item: i for i, item in enumerate(items)}
        column = {rm: j for j, rm in enumerate(rms)}
        correct = np.zeros((len(items), len(rms)))
        judged = np.zeros((len(items), len(rms)))
        for rm, pair_id, is_correct, is_judged in mine.select(
            "rm", "pair_id", "correct", "judged"
        ).iter_rows():
            if pair_id in position:
                correct[position[pair_id], column[rm]] = float(is_correct)
                judged[position[pair_id], column[rm]] = float(is_judged)
        return ItemOutcomes(items, tuple(rms), correct, judged)


@dataclass(frozen=True)
class RunSelection:
    runs: Sequence[RunData]
    judges: Sequence[str] = ()
    context: str | None = None
    # "judge=rm" or "judge@context=rm" entries, already split.
    mapping: Mapping[str, str] | None = None


@dataclass(frozen=True)
class PrbjBenchmark:
    """This benchmark's accuracy per RM and subset, from one or more prbj run directories."""

    name: str
    accuracy: Mapping[str, Mapping[str, float]]  # subset -> rm -> accuracy
    per_item: pl.DataFrame | None
    per_item_rms: frozenset[str]

    @property
    def subsets(self) -> list[str]:
        return sorted(self.accuracy)

    def column(self, subset: str) -> BenchmarkColumn:
        per_item = self.per_item
        if per_item is not None and subset != ALL_SUBSETS:
            per_item = per_item.filter(pl.col("subset") == subset)
        return BenchmarkColumn(self.name, subset, self.accuracy.get(subset, {}), per_item, self.per_item_rms)


def parse_mapping(entries: Sequence[str]) -> dict[str, str]:
    """`--map judge=rm` / `--map judge@context=rm` into a dict; a malformed entry is a ConfigError."""
    mapping: dict[str, str] = {}
    for entry in entries:
        judge, sep, rm = entry.partition("=")
        if not sep or not judge.strip() or not rm.strip():
            raise ConfigError(f"--map {entry!r}: expected JUDGE=RM or JUDGE@CONTEXT=RM")
        mapping[judge.strip()] = rm.strip()
    return mapping


def load_prbj_runs(selection: RunSelection, *, name: str = PRBJ_BENCHMARK) -> PrbjBenchmark:
    mapping = dict(selection.mapping or {})
    used_keys: set[str] = set()
    owner: dict[str, tuple[str, str, Path]] = {}  # rm -> (judge, context, run) that supplies it
    accuracy: dict[str, dict[str, float]] = {}
    item_frames: list[pl.DataFrame] = []
    item_rms: set[str] = set()
    for run in selection.runs:
        picked = [
            r
            for r in run.results
            if (not selection.judges or r.judge in selection.judges)
            and (selection.context is None or r.context == selection.context)
        ]
        names = {}
        for judge, context in sorted({(r.judge, r.context) for r in picked}):
            key = f"{judge}@{context}"
            rm = mapping.get(key) or mapping.get(judge) or judge
            used_keys.update(k for k in (key, judge) if k in mapping)
            if rm in owner:
                prior_judge, prior_context, prior_run = owner[rm]
                raise DataError(
                    f"{run.run_dir}: RM {rm!r} would come from both {prior_judge}@{prior_context} ({prior_run}) and "
                    f"{judge}@{context}; pick one with --judge/--context or map them apart with "
                    f"--map {judge}@{context}=NAME"
                )
            owner[rm] = (judge, context, run.run_dir)
            names[(judge, context)] = rm
        for row in picked:
            if row.accuracy is None:
                continue  # no judgment succeeded: there is no accuracy to correlate
            rm = names[(row.judge, row.context)]
            accuracy.setdefault(row.subset, {})[rm] = float(row.accuracy)
        frame = _item_frame(run.judgments, names)
        if frame is not None:
            item_frames.append(frame)
            item_rms.update(names.values())
    unused = sorted(set(mapping) - used_keys)
    if unused:
        raise ConfigError(f"--map {unused[0]}=...: no such judge in the selected runs")
    per_item = pl.concat(item_frames) if item_frames else None
    return PrbjBenchmark(name, accuracy, per_item, frozenset(item_rms))


def _item_frame(judgments: pl.DataFrame, names: Mapping[tuple[str, str], str]) -> pl.DataFrame | None:
    if not names:
        return None
    frame = judgments.select("pair_id", "subset", "judge", "context", "status", "correct")
    lookup = pl.DataFrame(
        [(judge, context, rm) for (judge, context), rm in names.items()],
        schema={"judge": pl.String, "context": pl.String, "rm": pl.String},
        orient="row",
    )
    return frame.join(lookup, on=["judge", "context"], how="inner").select(
        "rm",
        "pair_id",
        "subset",
        pl.col("correct").fill_null(False),
        (pl.col("status") == "ok").alias("judged"),
    )


def load_benchmark_csv(path: Path) -> dict[str, dict[str, float]]:
    """Other benchmarks' accuracies: `rm, benchmark, accuracy` rows into {benchmark: {rm: accuracy}}.
    Any scale works (fractions or percentages): only orders and linear correlation are used."""
    if not path.exists():
        raise DataError(f"{path}: no such file")
    columns: dict[str, dict[str, float]] = {}
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header = [name.strip() for name in reader.fieldnames or []]
        for field in ("rm", "benchmark", "accuracy"):
            if field not in header:
                raise DataError(
                    f"{path}:1: field '{field}': missing column (expected rm, benchmark, accuracy)"
                )
        for record in reader:
            row = {k.strip(): (v or "").strip() for k, v in record.items() if k is not None}
            where = f"{path}:{reader.line_num}"
            for field in ("rm", "benchmark", "accuracy"):
                if not row.get(field):
                    raise DataError(f"{where}: field '{field}': missing")
            try:
                value = float(row["accuracy"])
            except ValueError:
                raise DataError(
                    f"{where}: field 'accuracy': expected a number, got {row['accuracy']!r}"
                ) from None
            if not math.isfinite(value):
                raise DataError(f"{where}: field 'accuracy': expected a finite number")
            column = columns.setdefault(row["benchmark"], {})
            if row["rm"] in column:
                raise DataError(
                    f"{where}: field 'rm': {row['rm']!r} already has a {row['benchmark']} accuracy"
                )
            column[row["rm"]] = value
    if not columns:
        raise DataError(f"{path}: no rows")
    return columns
