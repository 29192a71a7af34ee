"""`prbj correlate` as a function: pair every downstream table with every benchmark column, compute each
metric with bootstrap intervals, and write correlation.json + correlation.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl

from prbj import __version__
from prbj.analysis.benchmark_scores import BenchmarkColumn, PrbjBenchmark
from prbj.analysis.correlate import (
    DEFAULT_RBO_P,
    METRICS,
    Interval,
    all_metrics,
    bootstrap_over_items,
    bootstrap_over_rms,
    metric_functions,
)
from prbj.analysis.stats import ALL_SUBSETS, BOOTSTRAP_RESAMPLES, CONFIDENCE
from prbj.data.files import json_text, write_text
from prbj.errors import DataError

MIN_RMS = 3
KChoice = int | Literal["max", "all"]
BenchmarkSubset = Literal["all", "same"]


@dataclass(frozen=True)
class DownstreamTable:
    source: str
    subset: str
    k: int | None
    scores: Mapping[str, float]
    # True for the "all" table averaged here from a source's per-subset rows.
    derived: bool = False

    @property
    def label(self) -> str:
        k = "" if self.k is None else f" k={self.k}"
        return f"{self.source} {self.subset}{k}"


@dataclass(frozen=True)
class MetricResult:
    value: float | None
    over_rms: Interval
    over_items: Interval | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "ci_over_rms": self.over_rms.as_dict(),
            "ci_over_items": self.over_items.as_dict() if self.over_items else None,
        }


@dataclass(frozen=True)
class Comparison:
    table: DownstreamTable
    benchmark: str
    benchmark_subset: str | None
    rms: tuple[str, ...]
    benchmark_scores: tuple[float, ...]
    downstream_scores: tuple[float, ...]
    missing_from_benchmark: tuple[str, ...]
    missing_from_downstream: tuple[str, ...]
    gain_shift: float
    items: int | None
    metrics: Mapping[str, MetricResult]

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.table.source,
            "subset": self.table.subset,
            "k": self.table.k,
            "derived_subset": self.table.derived,
            "benchmark": self.benchmark,
            "benchmark_subset": self.benchmark_subset,
            "n_rms": len(self.rms),
            "rms": [
                {"rm": rm, "benchmark": b, "downstream": d}
                for rm, b, d in zip(self.rms, self.benchmark_scores, self.downstream_scores, strict=True)
            ],
            "missing_from_benchmark": list(self.missing_from_benchmark),
            "missing_from_downstream": list(self.missing_from_downstream),
            "ndcg_gain_shift": self.gain_shift,
            "bootstrap_items": self.items,
            "metrics": {name: result.as_dict() for name, result in self.metrics.items()},
        }


@dataclass(frozen=True)
class Skipped:
    table: DownstreamTable | None
    benchmark: str | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        table = self.table
        return {
            "source": table.source if table else None,
            "subset": table.subset if table else None,
            "k": table.k if table else None,
            "benchmark": self.benchmark,
            "reason": self.reason,
        }


@dataclass
class CorrelateConfig:
    k: KChoice = "max"
    sources: Sequence[str] = ()
    benchmark_subset: BenchmarkSubset = "all"
    rbo_p: float = DEFAULT_RBO_P
    resamples: int = BOOTSTRAP_RESAMPLES
    confidence: float = CONFIDENCE
    seed: int = 42
    inputs: dict[str, Any] = field(default_factory=dict)


@dataclass
class CorrelationReport:
    config: CorrelateConfig
    comparisons: list[Comparison]
    skipped: list[Skipped]

    def document(self) -> dict[str, Any]:
        """The content of correlation.json: a pure function of inputs and seed."""
        return finite_json(
            {
                "prbj_version": __version__,
                "inputs": self.config.inputs,
                "k": self.config.k,
                "benchmark_subset": self.config.benchmark_subset,
                "rbo_p": self.config.rbo_p,
                "seed": self.config.seed,
                "bootstrap": {"resamples": self.config.resamples, "confidence": self.config.confidence},
                "metrics": list(METRICS),
                "comparisons": [c.as_dict() for c in self.comparisons],
                "skipped": [s.as_dict() for s in self.skipped],
            }
        )


def finite_json(value: Any) -> Any:
    """JSON has no NaN: undefined values (a metric, an interval) are written as null."""
    if isinstance(value, float):
        return value if np.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


def derive_overall(frame: pl.DataFrame) -> pl.DataFrame:
    """Per source × k, an "all" row for each RM that has every subset of that source (n-weighted mean of the
    subset scores when every n is known, plain mean otherwise). Sources that already have "all" rows, or
    only one subset, get none."""
    derived = []
    for (source,), part in frame.group_by(["source"], maintain_order=True):
        subsets = set(part["subset"].to_list())
        if ALL_SUBSETS in subsets or len(subsets) < 2:
            continue
        for (rm, k), rows in part.group_by(["rm", "k"], maintain_order=True):
            if set(rows["subset"].to_list()) != subsets:
                continue
            n = rows["n"]
            weights = n.cast(pl.Float64).to_numpy() if n.null_count() == 0 and n.sum() > 0 else None
            score = float(np.average(rows["score"].to_numpy(), weights=weights))
            derived.append(
                {
                    "rm": rm,
                    "source": source,
                    "subset": ALL_SUBSETS,
                    "k": k,
                    "score": score,
                    "n": int(n.sum()) if weights is not None else None,
                    "std": None,
                    "origin": "derived: mean over subsets",
                }
            )
    return pl.DataFrame(derived, schema=frame.schema) if derived else frame.clear()


def downstream_tables(
    frame: pl.DataFrame, config: CorrelateConfig
) -> tuple[list[DownstreamTable], list[Skipped]]:
    """One table per source × subset × chosen k. `max` keeps, per source × subset, the k that the most RMs
    report (the largest such k on a tie): for BoN, the best-of-k with the largest shared k."""
    if config.sources:
        frame = frame.filter(pl.col("source").is_in(list(config.sources)))
    derived_rows = derive_overall(frame)
    derived_keys = set(derived_rows.select("source", "subset").iter_rows())
    frame = pl.concat([frame, derived_rows])
    tables: list[DownstreamTable] = []
    skipped: list[Skipped] = []
    for source, subset in sorted(set(frame.select("source", "subset").iter_rows())):
        part = frame.filter(pl.col("source") == source, pl.col("subset") == subset)
        by_k: dict[int | None, dict[str, float]] = {}
        for rm, k, score in part.select("rm", "k", "score").iter_rows():
            by_k.setdefault(k, {})[rm] = score
        if config.k == "all":
            chosen = sorted(by_k, key=_k_order)
        elif config.k == "max":
            chosen = [max(by_k, key=lambda k: (len(by_k[k]), _k_order(k)))]
        elif config.k in by_k:
            chosen = [config.k]
        else:
            available = ", ".join("none" if k is None else str(k) for k in sorted(by_k, key=_k_order))
            skipped.append(
                Skipped(
                    DownstreamTable(source, subset, None, {}),
                    None,
                    f"no rows with k={config.k} ({available})",
                )
            )
            continue
        derived = (source, subset) in derived_keys
        tables.extend(DownstreamTable(source, subset, k, by_k[k], derived) for k in chosen)
    return tables, skipped


def _k_order(k: int | None) -> int:
    return -1 if k is None else k


def benchmark_columns(
    prbj: PrbjBenchmark | None, external: Mapping[str, Mapping[str, float]], table: DownstreamTable, mode: str
) -> list[BenchmarkColumn]:
    columns = []
    if prbj is not None:
        subset = table.subset if mode == "same" and table.subset in prbj.accuracy else ALL_SUBSETS
        columns.append(prbj.column(subset))
    columns.extend(BenchmarkColumn(name, None, scores) for name, scores in external.items())
    return columns


def compare(table: DownstreamTable, column: BenchmarkColumn, config: CorrelateConfig) -> Comparison | Skipped:
    overlap = tuple(sorted(set(table.scores) & set(column.accuracy)))
    if len(overlap) < MIN_RMS:
        return Skipped(
            table,
            column.name,
            f"only {len(overlap)} RM(s) in both ({', '.join(overlap) or 'none'}); at least {MIN_RMS} are needed",
        )
    x = np.array([column.accuracy[rm] for rm in overlap])
    y = np.array([table.scores[rm] for rm in overlap])
    # NDCG needs non-negative gains; shifting changes no other metric (all are invariant to it).
    shift = float(-y.min()) if y.min() < 0 else 0.0
    gains = y + shift
    functions = metric_functions(config.rbo_p)
    values = all_metrics(x, gains, rbo_p=config.rbo_p)
    over_rms = bootstrap_over_rms(
        x, gains, functions, seed=config.seed, resamples=config.resamples, confidence=config.confidence
    )
    outcomes = column.item_outcomes(overlap)
    over_items = (
        bootstrap_over_items(
            outcomes.correct,
            outcomes.judged,
            gains,
            functions,
            seed=config.seed,
            resamples=config.resamples,
            confidence=config.confidence,
        )
        if outcomes is not None
        else None
    )
    metrics = {
        name: MetricResult(
            value=values[name] if np.isfinite(values[name]) else None,
            over_rms=over_rms[name],
            over_items=over_items[name] if over_items else None,
        )
        for name in functions
    }
    return Comparison(
        table=table,
        benchmark=column.name,
        benchmark_subset=column.subset,
        rms=overlap,
        benchmark_scores=tuple(float(v) for v in x),
        downstream_scores=tuple(float(v) for v in y),
        missing_from_benchmark=tuple(sorted(set(table.scores) - set(column.accuracy))),
        missing_from_downstream=tuple(sorted(set(column.accuracy) - set(table.scores))),
        gain_shift=shift,
        items=len(outcomes.items) if outcomes is not None else None,
        metrics=metrics,
    )


def correlate(
    downstream: pl.DataFrame,
    prbj: PrbjBenchmark | None,
    external: Mapping[str, Mapping[str, float]],
    config: CorrelateConfig,
) -> CorrelationReport:
    if prbj is None and not external:
        raise DataError(
            "no benchmark to correlate: give prbj run directories (--run) and/or --benchmarks CSV"
        )
    tables, skipped = downstream_tables(downstream, config)
    if not tables:
        raise DataError("no downstream table left to correlate (check --source and --k)")
    comparisons: list[Comparison] = []
    for table in tables:
        for column in benchmark_columns(prbj, external, table, config.benchmark_subset):
            outcome = compare(table, column, config)
            if isinstance(outcome, Comparison):
                comparisons.append(outcome)
            else:
                skipped.append(outcome)
    if not comparisons:
        benchmark_rms = sorted(
            {rm for t in tables for c in benchmark_columns(prbj, external, t, "all") for rm in c.accuracy}
        )
        downstream_rms = sorted({rm for t in tables for rm in t.scores})
        raise DataError(
            f"fewer than {MIN_RMS} RMs overlap between any downstream table and any benchmark; "
            f"benchmark RMs: {', '.join(benchmark_rms) or 'none'}; downstream RMs: "
            f"{', '.join(downstream_rms) or 'none'} (map judge names to RM names with --map JUDGE=RM)"
        )
    return CorrelationReport(config, comparisons, skipped)


def write_report(report: CorrelationReport, out_dir: Path, markdown: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "correlation.json"
    md_path = out_dir / "correlation.md"
    write_text(json_path, json_text(report.document()))
    write_text(md_path, markdown)
    return json_path, md_path
