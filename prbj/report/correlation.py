"""The comparison table of `prbj correlate`, for the terminal (Rich) and as Markdown."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from prbj.analysis.correlate import METRIC_LABELS, Interval
from prbj.analysis.correlate_run import Comparison, CorrelationReport, MetricResult
from prbj.report.fmt import SHORT_SUBSET


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _interval(interval: Interval | None) -> str:
    if interval is None or interval.low is None or interval.high is None:
        return ""
    return f"[{interval.low:.2f}, {interval.high:.2f}]"


def _benchmark_label(comparison: Comparison) -> str:
    subset = comparison.benchmark_subset
    return comparison.benchmark if subset is None else f"{comparison.benchmark} ({subset})"


def _downstream_label(comparison: Comparison) -> str:
    table = comparison.table
    return table.label + (" (derived)" if table.derived else "")


def _rich_cell(result: MetricResult) -> str:
    lines = [_number(result.value)]
    # Each interval says what it resamples: the reward models, or the benchmark's items.
    for label, interval in (("RMs", result.over_rms), ("items", result.over_items)):
        if interval is not None and interval.low is not None:
            lines.append(f"[dim]{label} {_interval(interval)}[/dim]")
    return "\n".join(lines)


def _rich_label(comparison: Comparison) -> str:
    table = comparison.table
    subset = SHORT_SUBSET.get(table.subset, table.subset)
    k = "" if table.k is None else f" k={table.k}"
    derived = " (derived)" if table.derived else ""
    benchmark = comparison.benchmark
    if comparison.benchmark_subset is not None:
        benchmark += f" ({SHORT_SUBSET.get(comparison.benchmark_subset, comparison.benchmark_subset)})"
    lines = [
        f"[bold]{table.source} {subset}{k}{derived}[/bold]",
        f"× {benchmark}",
        f"[dim]{len(comparison.rms)} RMs[/dim]",
    ]
    return "\n".join(lines)


def comparison_table(report: CorrelationReport, *, compact: bool = False) -> Table:
    """The Rich table: one row per downstream table × benchmark with a column per metric, or, `compact`
    (for terminals under ~120 columns), one row per metric."""
    confidence = round(100 * report.config.confidence)
    table = Table(
        title="Does benchmark accuracy predict downstream rank?",
        caption=f"{confidence}% bootstrap intervals resampling RMs and, for prbj runs, benchmark items. "
        f"RBO p={report.config.rbo_p}",
        show_lines=not compact,
    )
    names = list(report.comparisons[0].metrics) if report.comparisons else []
    if compact:
        table.add_column("downstream × benchmark")
        table.add_column("metric")
        table.add_column("value", justify="right")
        table.add_column("CI, RMs", justify="right", no_wrap=True)
        table.add_column("CI, items", justify="right", no_wrap=True)
        for comparison in report.comparisons:
            # The label's lines (downstream, × benchmark, RM count) run down beside the metric rows.
            label = _rich_label(comparison).split("\n")
            for index, name in enumerate(names):
                result = comparison.metrics[name]
                table.add_row(
                    label[index] if index < len(label) else "",
                    METRIC_LABELS.get(name, name),
                    _number(result.value),
                    _interval(result.over_rms),
                    _interval(result.over_items),
                    end_section=index == len(names) - 1,
                )
        return table
    table.add_column("downstream × benchmark", min_width=14)
    for name in names:
        table.add_column(METRIC_LABELS.get(name, name), justify="right", min_width=6)
    for comparison in report.comparisons:
        table.add_row(_rich_label(comparison), *(_rich_cell(comparison.metrics[name]) for name in names))
    return table


def notes(report: CorrelationReport) -> list[str]:
    """Lines about RMs left out, shifted gains and skipped pairings: shown under the table and in Markdown."""
    lines = []
    for c in report.comparisons:
        where = f"{_downstream_label(c)} × {_benchmark_label(c)}"
        if c.missing_from_benchmark:
            lines.append(f"{where}: no benchmark score, skipped: {', '.join(c.missing_from_benchmark)}")
        if c.missing_from_downstream:
            lines.append(f"{where}: no downstream score, skipped: {', '.join(c.missing_from_downstream)}")
        if c.gain_shift:
            lines.append(
                f"{where}: NDCG gains shifted by +{c.gain_shift:g} (a downstream score was negative)"
            )
    for s in report.skipped:
        what = s.table.label if s.table else "downstream"
        lines.append(f"{what}{f' × {s.benchmark}' if s.benchmark else ''}: not computed: {s.reason}")
    return lines


def markdown(report: CorrelationReport) -> str:
    names = list(report.comparisons[0].metrics) if report.comparisons else []
    confidence = round(100 * report.config.confidence)
    out = [
        "# Benchmark accuracy vs downstream outcome",
        "",
        f"Each cell: value, then the {confidence}% percentile bootstrap interval over RMs "
        f"({report.config.resamples} resamples, seed {report.config.seed}) and, for prbj runs, over "
        f"benchmark items. RBO p = {report.config.rbo_p}. Formulas: docs/correlation.md.",
        "",
    ]
    header = ["downstream", "benchmark", "RMs", *(METRIC_LABELS.get(n, n) for n in names)]
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "|".join(["---", "---", "---:"] + ["---:"] * len(names)) + "|")
    for c in report.comparisons:
        cells = [_downstream_label(c), _benchmark_label(c), str(len(c.rms))]
        for name in names:
            result = c.metrics[name]
            parts = [_number(result.value)]
            if result.over_rms.low is not None:
                parts.append(f"RMs {_interval(result.over_rms)}")
            if result.over_items is not None and result.over_items.low is not None:
                parts.append(f"items {_interval(result.over_items)}")
            cells.append("<br>".join(parts))
        out.append("| " + " | ".join(cells) + " |")
    out += ["", "## Scores used", ""]
    for c in report.comparisons:
        out.append(
            f"- {_downstream_label(c)} × {_benchmark_label(c)}: "
            + _pairs(c.rms, c.benchmark_scores, c.downstream_scores)
        )
    extra = notes(report)
    if extra:
        out += ["", "## Notes", "", *(f"- {line}" for line in extra)]
    return "\n".join(out) + "\n"


def _pairs(rms: Sequence[str], benchmark: Sequence[float], downstream: Sequence[float]) -> str:
    return "; ".join(f"{rm} ({b:.4g} → {d:.4g})" for rm, b, d in zip(rms, benchmark, downstream, strict=True))
