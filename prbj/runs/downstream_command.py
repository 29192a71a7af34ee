"""`prbj correlate` and `prbj downstream add/show` behind the CLI: --run directories are loaded through
runs.rundir; the downstream store and the correlation are analysis's; the tables are report's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from prbj.analysis.benchmark_scores import RunSelection, load_benchmark_csv, load_prbj_runs, parse_mapping
from prbj.analysis.correlate_run import CorrelateConfig, KChoice, write_report
from prbj.analysis.correlate_run import correlate as correlate_tables
from prbj.analysis.downstream import add_outcomes, conversions, read_outcomes, read_store
from prbj.errors import DataError
from prbj.report import fmt
from prbj.report.correlation import comparison_table, markdown, notes
from prbj.runs import rundir

STORE_COLUMNS = ("rm", "source", "subset", "k", "score", "n", "std")
_NUMERIC_STORE_COLUMNS = {"k", "score", "n", "std"}


def parse_k(value: str) -> KChoice:
    """`--k`: 'max', 'all' or a whole number of at least 1."""
    if value == "max":
        return "max"
    if value == "all":
        return "all"
    try:
        k = int(value)
    except ValueError:
        raise DataError(f"--k {value!r}: expected 'max', 'all' or a whole number such as 16") from None
    if k < 1:
        raise DataError(f"--k {value!r}: k must be at least 1")
    return k


def run_correlate_command(
    *,
    runs: Sequence[Path],
    judges: Sequence[str],
    context: str | None,
    mappings: Sequence[str],
    benchmarks: Path | None,
    benchmark_name: str,
    benchmark_subset: str,
    store: Path,
    sources: Sequence[str],
    k_choice: str,
    rbo_p: float,
    resamples: int,
    seed: int,
    out: Path,
) -> None:
    k = parse_k(k_choice)
    mapping = parse_mapping(mappings)
    if mapping and not runs:
        raise DataError("--map renames judges of --run directories; give at least one --run")
    prbj_benchmark = (
        load_prbj_runs(
            RunSelection([rundir.load_run(run) for run in runs], judges, context, mapping),
            name=benchmark_name,
        )
        if runs
        else None
    )
    external = load_benchmark_csv(benchmarks) if benchmarks else {}
    config = CorrelateConfig(
        k=k,
        sources=sources,
        benchmark_subset=benchmark_subset,  # type: ignore[arg-type]  # click.Choice(["all", "same"])
        rbo_p=rbo_p,
        resamples=resamples,
        seed=seed,
        inputs={
            "runs": [str(r) for r in runs],
            "judges": list(judges),
            "context": context,
            "map": mapping,
            "benchmarks": str(benchmarks) if benchmarks else None,
            "store": str(store),
            "sources": list(sources),
        },
    )
    report = correlate_tables(read_store(store), prbj_benchmark, external, config)
    console = Console()
    console.print(comparison_table(report, compact=console.width < 120))
    for line in notes(report):
        console.print(f"[dim]{line}[/dim]", soft_wrap=True)
    json_path, md_path = write_report(report, out, markdown(report))
    console.print(f"wrote {json_path} and {md_path}")


def run_downstream_add(paths: Sequence[Path], *, rm: str | None, source: str | None, store: Path) -> None:
    outcomes = [o for path in paths for o in read_outcomes(path, rm=rm, source=source)]
    result = add_outcomes(store, outcomes)
    rms = sorted({o.rm for o in outcomes})
    for note in conversions(outcomes):
        Console().print(f"[dim]note: {note}[/dim]", soft_wrap=True)
    Console().print(
        f"{result.added} row(s) added, {result.replaced} replaced for {len(rms)} RM(s) "
        f"({', '.join(rms)}); {result.total} in {result.path}",
        soft_wrap=True,
    )


def run_downstream_show(store: Path) -> None:
    frame = read_store(store)
    table = Table(title=f"downstream outcomes ({frame.height} rows)")
    for column in STORE_COLUMNS:
        table.add_column(column, justify="right" if column in _NUMERIC_STORE_COLUMNS else "left")
    for row in frame.iter_rows(named=True):
        table.add_row(*(fmt.cell(row[c]) for c in STORE_COLUMNS))
    Console().print(table)
