"""`prbj power`: how many pairs it takes to tell two judges apart."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from prbj.cli.support import friendly_errors


@click.command()
@click.option(
    "--baseline",
    required=True,
    type=click.Path(path_type=Path),
    metavar="RUN",
    help="Run directory whose judges' paired verdicts give the discordance.",
)
@click.option(
    "--delta",
    type=click.FloatRange(min=0, min_open=True, max=1),
    default=0.02,
    show_default=True,
    help="Accuracy difference to detect, as a fraction (0.02 = 2 points).",
)
@click.option(
    "--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@friendly_errors
def power(baseline: Path, delta: float, output_format: str) -> None:
    """Pairs needed to detect a --delta accuracy difference between two judges (α = 0.05, 80% power), from
    how often the run's judges disagree; and the minimum detectable difference with the run's pairs.

    \b
    Examples:
      prbj power --baseline reports/<run-id>
      prbj power --baseline reports/<run-id> --delta 0.05 --format json
    """
    from prbj.runs.power_command import run_power_command

    sys.exit(run_power_command(baseline, delta=delta, output_format=output_format))
