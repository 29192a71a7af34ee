"""`prbj report` and `prbj check`: reports to read and a regression gate for CI."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from prbj.cli.support import friendly_errors, stderr_console
from prbj.errors import DataError


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for report.md, report.html and plots/. Default: the run directory for one run; "
    "<parent of the first run>/leaderboard for several.",
)
@click.option("--title", default=None, metavar="TEXT", help="Title of the report (default: the run id).")
@click.option(
    "--downstream",
    "downstream",
    multiple=True,
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Downstream outcomes to draw against the runs' judges (repeatable): a `prbj downstream` store "
    "such as reports/downstream, a downstream .parquet, or CSV/JSON records with rm, subset, score.",
)
@click.option("--quiet", is_flag=True, help="Write the files but print no tables on the terminal.")
@friendly_errors
def report(
    run_dirs: tuple[Path, ...], out: Path | None, title: str | None, downstream: tuple[Path, ...], quiet: bool
) -> None:
    """Render run directories as a terminal report, report.md and a self-contained report.html.

    The HTML file opens offline (inline charts, no scripts): accuracy per judge × subset × context
    with 95% intervals, position bias, raw vs length-controlled accuracy, cost per 100 judgments,
    and best-of-k curves with a benchmark-vs-downstream scatter when there are downstream outcomes
    (a downstream.parquet in a run directory, or --downstream). Several runs make one leaderboard.

    \b
    Examples:
      prbj report reports/20250101-120000-abc123
      prbj report reports/*/ --out reports/leaderboard --title "RMs on the full benchmark"
      prbj report reports/<run-id> --downstream reports/downstream
    """
    from prbj.report.writer import write_reports

    # Not a terminal (CI logs, pipes): Rich would squeeze the tables into 80 columns.
    console = Console() if Console().is_terminal else Console(width=140)
    runs = _run_dirs_for_report(run_dirs)
    target = out if out is not None else (None if len(runs) == 1 else runs[0].parent / "leaderboard")
    files = write_reports(
        runs, target, console=None if quiet else console, title=title, downstream=downstream
    )
    console.print(f"report: {files.markdown} and {files.html}", highlight=False, soft_wrap=True)


def _run_dirs_for_report(paths: tuple[Path, ...]) -> list[Path]:
    """Every path must exist; with several (a shell glob over reports/*), folders that are not runs, such as
    reports/baselines or an earlier leaderboard, are skipped with a note instead of stopping the report."""
    from prbj.runs.rundir import SUMMARY_FILE

    for path in paths:
        if not path.exists():
            raise DataError(f"{path}: no such run directory")
    if len(paths) == 1:
        return list(paths)
    runs = []
    for path in paths:
        if path.is_dir() and (path / SUMMARY_FILE).exists():
            runs.append(path)
        else:
            stderr_console().print(f"note: skipped {path}: not a run directory ({SUMMARY_FILE} missing)")
    if not runs:
        raise DataError(f"none of the {len(paths)} paths is a run directory ({SUMMARY_FILE} missing)")
    return runs


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--baseline",
    "baseline_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Baseline file to compare with (e.g. reports/baselines/sample-offline.json).",
)
@click.option(
    "--update-baseline",
    is_flag=True,
    help="Write the run's results to --baseline instead of checking (overwrites the file).",
)
@click.option(
    "--tolerance",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="Accuracy may drop by this many percentage points before the drop is tested.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=0.05,
    show_default=True,
    help="Significance level of McNemar's paired test (exact binomial below 25 discordant items).",
)
@click.option(
    "--max-error-rate",
    type=click.FloatRange(min=0, max=1),
    default=0.05,
    show_default=True,
    help="Fail when a larger share of a group's judgments failed (parse/API error, budget skip); 1 disables.",
)
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0),
    default=None,
    metavar="USD",
    help="Fail when the run spent more (cost_usd of judgments not served from the cache).",
)
@click.option("--judge", "judges", multiple=True, metavar="NAME", help="Check only this judge (repeatable).")
@click.option(
    "--subset",
    "subsets",
    multiple=True,
    metavar="NAME",
    help="Check only this subset (repeatable; 'all' is the overall row; prefixes such as 'art' work).",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="A Rich table for people, or JSON on stdout for machines.",
)
@friendly_errors
def check(
    run_dir: Path,
    baseline_path: Path,
    update_baseline: bool,
    tolerance: float,
    alpha: float,
    max_error_rate: float,
    max_cost: float | None,
    judges: tuple[str, ...],
    subsets: tuple[str, ...],
    output_format: str,
) -> None:
    """Gate a run against a baseline: exit 1 on a significant accuracy drop, too many failed
    judgments or too much spend; exit 0 otherwise (a drop that is not significant only warns).

    Per judge × context × subset, a drop counts when accuracy fell by more than --tolerance points
    AND McNemar's test on the items both runs judged gives p < --alpha. Exit 2 when the baseline or
    run cannot be read, was made on other data, or a baseline judge or subset is missing from the run.

    \b
    Examples:
      prbj check reports/<run-id> --baseline reports/baselines/sample-offline.json
      prbj check reports/<run-id> --baseline base.json --tolerance 1 --alpha 0.01 --format json
      prbj check reports/<run-id> --baseline base.json --update-baseline   # accept the new figures
    """
    from prbj.analysis.baseline import baseline_from_run, read_baseline, write_baseline
    from prbj.analysis.check import CheckSettings, check_run
    from prbj.report.check_view import check_json, print_check
    from prbj.runs.rundir import load_run

    # CI logs are not terminals; Rich would squeeze the table into 80 columns there.
    console = Console() if Console().is_terminal else Console(width=120)
    run = load_run(run_dir)
    if update_baseline:
        baseline = baseline_from_run(run)
        write_baseline(baseline, baseline_path)
        console.print(
            f"baseline written: {baseline_path} ({len(baseline.results)} result rows, "
            f"{len(baseline.items)} items, from run {baseline.source_run})",
            highlight=False,
            soft_wrap=True,
        )
        return
    settings = CheckSettings(
        tolerance_points=tolerance,
        alpha=alpha,
        max_error_rate=max_error_rate,
        max_cost_usd=max_cost,
        judges=judges,
        subsets=subsets,
    )
    result = check_run(run, read_baseline(baseline_path), settings, baseline_path=str(baseline_path))
    if output_format == "json":
        click.echo(check_json(result))
    else:
        print_check(result, console)
    sys.exit(result.exit_code)
