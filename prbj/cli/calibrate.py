"""`prbj calibrate`: the confidence threshold that keeps a judge's error under a target, with a guarantee."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from prbj.cli.support import friendly_errors


@click.command()
@click.argument("run_dir", metavar="RUN", type=click.Path(path_type=Path))
@click.option(
    "--target-error",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.10,
    show_default=True,
    help="The error allowed among the verdicts kept (0.10: at most 10% wrong).",
)
@click.option(
    "--delta",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="The probability with which the guarantee may fail (0.05: it holds with probability 95%).",
)
@click.option(
    "--judge", "judges", multiple=True, metavar="NAME", help="Calibrate only this judge (repeatable)."
)
@click.option(
    "--split",
    type=click.FloatRange(0, 1, min_open=True),
    default=1.0,
    show_default=True,
    metavar="SHARE",
    help="Calibrate on this share of the pairs (drawn per pair from --seed) and check the target on the rest.",
)
@click.option("--seed", type=int, default=42, show_default=True, help="Seed of the --split draw.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Where selective.json goes [default: RUN/selective.json].",
)
@friendly_errors
def calibrate(
    run_dir: Path,
    target_error: float,
    delta: float,
    judges: tuple[str, ...],
    split: float,
    seed: int,
    out: Path | None,
) -> None:
    """Pick, per judge, the lowest confidence threshold whose error among the verdicts it keeps is at most
    --target-error with probability 1 − --delta (Learn-then-Test with a binomial bound), print it with its
    coverage and bound, and write selective.json for `prbj judge --selective`. Exit 1 when no judge has one.

    \b
    Examples:
      prbj calibrate reports/<run-id> --target-error 0.10 --delta 0.05
      prbj calibrate reports/<run-id> --split 0.5 --judge embed-profile
    """
    from prbj.runs.calibrate_command import run_calibrate_command

    sys.exit(
        run_calibrate_command(
            run_dir, target_error=target_error, delta=delta, judges=judges, split=split, seed=seed, out=out
        )
    )
