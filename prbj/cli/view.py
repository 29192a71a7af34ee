"""`prbj view`: browse runs, read any judgment and label pairs in a browser."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from prbj.cli.options import allow_host_option, host_option
from prbj.cli.support import friendly_errors


@click.command()
@click.argument("run_dirs", nargs=-1, type=click.Path(path_type=Path))
@host_option("every page needs the token the printed URL carries")
@allow_host_option("a reverse proxy's, a DNS alias")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port (0: any free one)."
)
@click.option("--open", "open_browser", is_flag=True, help="Open the viewer in a browser.")
@click.option(
    "--reviewer",
    metavar="NAME",
    default=None,
    help="Name recorded with each label [default: your user name].",
)
@click.option(
    "--bundle",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Write the pages as a static, read-only site into DIR instead of serving them.",
)
@click.option(
    "--dataset",
    default=None,
    metavar="SOURCE",
    help="Where to read questions and answers [default: the dataset named in each run.json].",
)
@click.option(
    "--reveal",
    is_flag=True,
    help="Show the pairs of a --personal-data pseudonymized run in clear, from its pseudonym table in the "
    "private store (only on this machine: never with --bundle or another --host) [default: as the judges saw "
    "them].",
)
@friendly_errors
def view(
    run_dirs: tuple[Path, ...],
    host: str,
    allow_hosts: tuple[str, ...],
    port: int,
    open_browser: bool,
    reviewer: str | None,
    bundle: Path | None,
    dataset: str | None,
    reveal: bool,
) -> None:
    """Browse runs in a browser: leaderboards, each run's figures, its judgments (filters, search,
    paging) and every pair as the judges saw it; label pairs and fill annotation sheets.

    RUN_DIRS are run directories, folders of them, or `prbj build` folders with annotation sheets
    [default: every run under reports/]. Serves on 127.0.0.1; labels go to each run's labels.jsonl.
    Requests must be addressed to this machine (or a name given with --allow-host); served beyond
    loopback, every page needs the token in the URL it prints. Security: docs/viewer.md.

    \b
    Examples:
      prbj view
      prbj view reports/<run-id> --reviewer alice --open
      prbj view reports/ --bundle site/
      prbj view reports/<run-id> --reveal
    """
    from prbj.view.command import run_view_command

    sys.exit(
        run_view_command(
            run_dirs,
            host=host,
            allow_hosts=allow_hosts,
            port=port,
            open_browser=open_browser,
            reviewer=reviewer,
            bundle=bundle,
            dataset=dataset,
            reveal=reveal,
        )
    )
