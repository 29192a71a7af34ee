"""The `prbj` command line. Each command parses options, calls one function, and maps errors to exit codes:
0 success, 1 failure of the run itself, 2 bad input or configuration, 130 interrupted.

The commands live in prbj/cli/, one click-only module per command family; their bodies live in the family's
package (runs/command.py for judge, bon/, build/, serve/, llm/ for providers and cache). This module assembles
them."""

from __future__ import annotations

import click

from prbj import __version__
from prbj.cli.admin import cache_group, providers_command
from prbj.cli.batch import batch_group
from prbj.cli.bon import bon
from prbj.cli.build import build
from prbj.cli.calibrate import calibrate
from prbj.cli.downstream import correlate, downstream
from prbj.cli.export import export
from prbj.cli.inspect import diff, show
from prbj.cli.judge import judge
from prbj.cli.power import power
from prbj.cli.report import check, report
from prbj.cli.run import run
from prbj.cli.serve import serve
from prbj.cli.support import EXIT_INTERRUPTED, PrbjGroup, friendly_errors
from prbj.cli.view import view

__all__ = ["EXIT_INTERRUPTED", "friendly_errors", "main"]


@click.group(
    cls=PrbjGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(__version__, prog_name="prbj")
def main() -> None:
    """prbj runs Personalized RewardBench: does a reward model prefer the answer that fits one
    particular user, when both answers are of equally high general quality?

    \b
    Quick start (no key, no download; bundled demo sample, offline baseline judges):
      prbj judge
    A real model:
      prbj judge --provider gemini-3-flash
    """


for command in (
    judge,
    providers_command,
    cache_group,
    batch_group,
    report,
    check,
    power,
    calibrate,
    show,
    diff,
    correlate,
    downstream,
    serve,
    bon,
    build,
    run,
    view,
    export,
):
    main.add_command(command)


if __name__ == "__main__":
    main()
