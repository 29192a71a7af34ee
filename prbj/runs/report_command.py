"""`prbj report` and `prbj check` behind the CLI: load run directories through runs.rundir, hand the runs to
analysis and report, and write what comes back through rundir again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from prbj.analysis.across import across_benchmarks, columns_of
from prbj.analysis.baseline import baseline_from_run, read_baseline, write_baseline
from prbj.analysis.check import CheckSettings, check_run
from prbj.analysis.run_data import RunData
from prbj.analysis.selection import dataset_key, group_by_dataset, group_key, is_official, latest_per_judge
from prbj.display.fit import FittingTable
from prbj.display.width import output_console, print_whole
from prbj.report.across import across_text_table, render_across
from prbj.report.check_view import check_json, print_check
from prbj.report.console import print_report, rich_table
from prbj.report.layout import Section
from prbj.report.writer import render_report
from prbj.runs import rundir
from prbj.runs.beyond import expand_slices

# Where several runs' shared report goes by default, beside the runs.
LEADERBOARD_FOLDER = "leaderboard"


def write_reports(
    run_dirs: Sequence[Path],
    out_dir: Path | None = None,
    *,
    console: Console | None = None,
    title: str | None = None,
    downstream: Sequence[Path] = (),
    slices: Sequence[str] = (),
) -> rundir.ReportFiles:
    """write_loaded_reports for run directories: loads them, then renders them into `out_dir`."""
    runs = [rundir.load_run(Path(d)) for d in run_dirs]
    return write_loaded_reports(
        runs, out_dir, console=console, title=title, downstream=downstream, slices=slices
    )


def write_loaded_reports(
    runs: Sequence[RunData],
    out_dir: Path | None = None,
    *,
    console: Console | None = None,
    title: str | None = None,
    downstream: Sequence[Path] = (),
    slices: Sequence[str] = (),
    leading: Sequence[Section] = (),
) -> rundir.ReportFiles:
    """Render the runs into `out_dir` (the first run's directory when there is none, as for a lone run);
    print the terminal report to `console` when given. `leading` sections come first (prbj run's claims)."""
    if not runs:
        raise ValueError("write_reports needs at least one run directory")
    target = Path(out_dir) if out_dir is not None else runs[0].run_dir
    rendered = render_report(
        runs,
        plots_dir=rundir.PLOTS_DIR,
        title=title,
        extra_downstream=[rundir.read_downstream(Path(path)) for path in downstream],
        slices=slices,
        leading=leading,
    )
    files = rundir.write_report(target, rendered)
    if console is not None:
        print_report(rendered.content, console, rendered.analyses)
    return files


def run_report_command(
    run_dirs: Sequence[Path],
    *,
    out: Path | None,
    title: str | None,
    downstream: Sequence[Path],
    quiet: bool,
    slices: Sequence[str] = (),
    latest: bool = False,
    mix_datasets: bool = False,
) -> None:
    """One report per dataset (runs on different pairs are never ranked together unless --mix-datasets), of
    the latest run of each judge × context with --latest."""
    console = output_console()
    notes = output_console(stderr=True, highlight=False)
    paths = rundir.select_run_dirs(run_dirs, note=lambda message: print_whole(notes, f"note: {message}"))
    loaded = [rundir.load_run(Path(path)) for path in paths]
    groups = [loaded] if mix_datasets else group_by_dataset(loaded)
    if len(groups) > 1:
        datasets = len({dataset_key(run) for run in loaded})
        official = (
            "; runs under --protocol official have a leaderboard of their own"
            if any(is_official(run) for run in loaded)
            else ""
        )
        notes.print(
            f"note: these {len(loaded)} runs were made on {datasets} different datasets: one leaderboard per "
            f"dataset (--mix-datasets ranks them together){official}"
            if datasets > 1
            else f"note: runs under --protocol official have a leaderboard of their own ({len(groups)} leaderboards)"
        )
    for group in groups:
        runs = latest_per_judge(group) if latest else group
        if latest and len(runs) < len(group):
            notes.print(f"note: --latest: {len(group) - len(runs)} older run(s) left out")
        target = _target(out, runs, several_groups=len(groups) > 1)
        if len(groups) > 1 and not quiet:
            first = runs[0].dataset
            console.rule(
                f"dataset {first.get('source', '?')} · fingerprint {dataset_key(runs[0])} · "
                f"{first.get('n_pairs', '?')} pairs · {len(runs)} run(s)"
                + (" · --protocol official" if is_official(runs[0]) else "")
            )
        files = write_loaded_reports(
            runs,
            target,
            console=None if quiet else console,
            title=title,
            downstream=downstream,
            slices=expand_slices(slices),
        )
        print_whole(console, f"report: {files.markdown} and {files.html}", highlight=False)
    if len(columns_of(loaded)) > 1:
        write_across_benchmarks(loaded, out, console=console, quiet=quiet)


def write_across_benchmarks(
    runs: Sequence[RunData], out: Path | None, *, console: Console, quiet: bool
) -> None:
    """Runs on several benchmarks: one table of judges × benchmarks (user accuracy, mean rank), beside the
    per-dataset reports (in --out, else in the leaderboard folder beside the runs); printed unless quiet."""
    table = across_benchmarks(runs)
    rendered = render_across(table)
    target = out if out is not None else runs[0].run_dir.parent / LEADERBOARD_FOLDER
    markdown, html, _ = rundir.write_across(target, rendered.markdown, rendered.html, table.as_dict())
    if not quiet:
        console.rule("judges across benchmarks")
        console.print(FittingTable(rich_table(across_text_table(table)), key_columns=3))
    print_whole(console, f"benchmarks: {markdown} and {html}", highlight=False)


def _target(out: Path | None, runs: Sequence[RunData], *, several_groups: bool) -> Path | None:
    """Where a group's report goes: --out (one folder per dataset when there are several), else the run
    directory for a lone run, else a leaderboard folder beside the runs."""
    per_dataset = Path(f"dataset-{group_key(runs[0])}") if several_groups else Path()
    if out is not None:
        return out / per_dataset
    if len(runs) == 1:
        # An Every Eval Ever file read as a run: its report goes beside it, not into it.
        first = runs[0].run_dir
        return first.with_name(f"{first.stem}-report") if first.is_file() else None
    return runs[0].run_dir.parent / LEADERBOARD_FOLDER / per_dataset


def run_check_command(
    run_dir: Path,
    *,
    baseline_path: Path,
    update_baseline: bool,
    settings: CheckSettings,
    output_format: str,
) -> int:
    """Check the run against the baseline (or write the baseline); the exit code of the check."""
    console = output_console()
    run = rundir.load_run(run_dir)
    if update_baseline:
        baseline = baseline_from_run(run)
        write_baseline(baseline, baseline_path)
        console.print(
            f"baseline written: {baseline_path} ({len(baseline.results)} result rows, "
            f"{len(baseline.items)} items, from run {baseline.source_run})",
            highlight=False,
        )
        return 0
    result = check_run(run, read_baseline(baseline_path), settings, baseline_path=str(baseline_path))
    if output_format == "json":
        print(check_json(result))  # machines read stdout: no Rich markup, no wrapping
    else:
        print_check(result, console)
    return result.exit_code
