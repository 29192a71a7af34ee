"""`prbj correlate` and `prbj downstream add/show` behind the CLI: --run directories are loaded through
runs.rundir; the downstream store and the correlation are analysis's; the tables are report's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl
from rich.table import Table

from prbj.analysis.benchmark_scores import RunSelection, load_benchmark_csv, load_prbj_runs, parse_mapping
from prbj.analysis.correlate_run import CorrelateConfig, KChoice, write_report
from prbj.analysis.correlate_run import correlate as correlate_tables
from prbj.analysis.downstream import add_outcomes, conversions, read_outcomes, read_store
from prbj.data.names import did_you_mean
from prbj.display.fit import FittingTable
from prbj.display.width import output_console, print_whole
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
    console = output_console()
    console.print(FittingTable(comparison_table(report, compact=console.width < 120)))
    for line in notes(report):
        console.print(f"[dim]{line}[/dim]")
    json_path, md_path = write_report(report, out, markdown(report))
    print_whole(console, f"wrote {json_path} and {md_path}")


def run_downstream_add(paths: Sequence[Path], *, rm: str | None, source: str | None, store: Path) -> None:
    outcomes = [o for path in paths for o in read_outcomes(path, rm=rm, source=source)]
    result = add_outcomes(store, outcomes)
    rms = sorted({o.rm for o in outcomes})
    console = output_console()
    for note in conversions(outcomes):
        console.print(f"[dim]note: {note}[/dim]")
    console.print(
        f"{result.added} row(s) added, {result.replaced} replaced for {len(rms)} RM(s) "
        f"({', '.join(rms)}); {result.total} in {result.path}"
    )


def run_downstream_show(
    store: Path,
    *,
    rms: Sequence[str] = (),
    sources: Sequence[str] = (),
    subsets: Sequence[str] = (),
    ks: Sequence[int] = (),
    pivot: bool = False,
) -> None:
    """The store, narrowed by --rm, --source, --subset and --k; with --pivot, one column per k (score)."""
    frame = read_store(store)
    for option, column, wanted in (
        ("--rm", "rm", rms),
        ("--source", "source", sources),
        ("--subset", "subset", subsets),
    ):
        if wanted:
            known = sorted({str(v) for v in frame[column].to_list() if v is not None})
            for name in wanted:
                if name not in known:
                    raise DataError(
                        f"{option} {name!r}: not in {store};{did_you_mean(name, known)} known: {', '.join(known)}"
                    )
            frame = frame.filter(pl.col(column).is_in(list(wanted)))
    if ks:
        frame = frame.filter(pl.col("k").is_in(list(ks)))
    console = output_console()
    if pivot:
        console.print(FittingTable(_pivot_table(frame), key_columns=3))
        return
    table = Table(title=f"downstream outcomes ({frame.height} rows)")
    for column in STORE_COLUMNS:
        table.add_column(column, justify="right" if column in _NUMERIC_STORE_COLUMNS else "left")
    for row in frame.iter_rows(named=True):
        table.add_row(*(fmt.cell(row[c]) for c in STORE_COLUMNS))
    console.print(FittingTable(table, key_columns=3))


def _pivot_table(frame: pl.DataFrame) -> Table:
    """One row per RM × source × subset, one column per k: the best-of-k curve read across."""
    ks = sorted({int(k) for k in frame["k"].drop_nulls().to_list()})
    table = Table(title=f"downstream score by k ({frame.height} rows)")
    for column in ("rm", "source", "subset"):
        table.add_column(column, no_wrap=True)
    for k in ks:
        table.add_column(f"k={k}", justify="right", no_wrap=True)
    cells: dict[tuple[str, str, str], dict[int, float]] = {}
    for row in frame.iter_rows(named=True):
        key = (str(row["rm"]), str(row["source"]), str(row["subset"]))
        if row["k"] is not None:
            cells.setdefault(key, {})[int(row["k"])] = row["score"]
    for key in sorted(cells):
        table.add_row(*key, *(fmt.cell(cells[key].get(k)) for k in ks))
    return table
