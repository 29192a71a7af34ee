"""`prbj report` and `prbj check`: reports to read and a regression gate for CI."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from prbj.cli.beyond_options import slice_option
from prbj.cli.support import friendly_errors


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
@slice_option
@click.option(
    "--latest", is_flag=True, help="Keep only the latest run of each judge × context (older reruns left out)."
)
@click.option(
    "--mix-datasets",
    is_flag=True,
    help="Rank runs made on different datasets in one leaderboard (default: one leaderboard per dataset).",
)
@friendly_errors
def report(
    run_dirs: tuple[Path, ...],
    out: Path | None,
    title: str | None,
    downstream: tuple[Path, ...],
    quiet: bool,
    latest: bool,
    mix_datasets: bool,
    slices: tuple[str, ...] = (),
) -> None:
    """Render run directories as a terminal report, report.md and a self-contained report.html.

    The HTML file opens offline (inline charts, no scripts): accuracy per judge × subset × context
    with 95% intervals, position bias, raw vs length-controlled accuracy, cost per 100 judgments,
    and best-of-k curves with a benchmark-vs-downstream scatter when there are downstream outcomes
    (a downstream.parquet in a run directory, or --downstream). Several runs make one leaderboard per
    dataset (by fingerprint; --mix-datasets for one across datasets, --latest for the newest run of each
    judge × context).

    \b
    Examples:
      prbj report reports/<run-id>
      prbj report reports/*/ --out leaderboard --title "RMs on the full benchmark"
      prbj report reports/<run-id> --downstream reports/downstream
      prbj report reports/<run-id> --slice profile-posts --slice length-diff
    """
    from prbj.runs.report_command import run_report_command

    run_report_command(
        run_dirs,
        out=out,
        title=title,
        downstream=downstream,
        quiet=quiet,
        latest=latest,
        mix_datasets=mix_datasets,
        slices=slices,
    )


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
    help="The headline may drop by this many percentage points before the drop is tested.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=0.05,
    show_default=True,
    help="Significance level of the paired test (McNemar; over users where users repeat).",
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
    """Gate a run against a baseline: exit 1 on a significant drop of its headline, too many failed
    judgments or too much spend; exit 0 otherwise (a drop that is not significant only warns).

    Per judge × context × subset, a drop counts when the benchmark's headline (accuracy over pairs on
    PRB, user accuracy on per-user data, a card's own unit) fell by more than --tolerance points AND
    the paired test on the items both runs judged gives p < --alpha: McNemar's, over users where users
    repeat (the exact sign-flip test under 50 users; docs/ci.md). Exit 2 when the baseline or run
    cannot be read, was made on other data, or a baseline judge or subset is missing from the run.

    \b
    Examples:
      prbj check reports/<run-id> --baseline reports/baselines/sample-offline.json
      prbj check reports/<run-id> --baseline base.json --update-baseline   # write (or accept) the baseline
      prbj check reports/<run-id> --baseline base.json --tolerance 1 --alpha 0.01 --format json
    """
    from prbj.analysis.check import CheckSettings
    from prbj.runs.report_command import run_check_command

    settings = CheckSettings(
        tolerance_points=tolerance,
        alpha=alpha,
        max_error_rate=max_error_rate,
        max_cost_usd=max_cost,
        judges=judges,
        subsets=subsets,
    )
    sys.exit(
        run_check_command(
            run_dir,
            baseline_path=baseline_path,
            update_baseline=update_baseline,
            settings=settings,
            output_format=output_format,
        )
    )
