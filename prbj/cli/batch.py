"""`prbj batch status|cancel|collect`: the provider batch jobs recorded in a cache folder's ledger."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from prbj.cli.support import friendly_errors

_cache_dir_option = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Response cache folder whose ledger to read [default: $PRBJ_CACHE_DIR or ./cache].",
)
_run_option = click.option(
    "--run", metavar="RUN", default=None, help="Only the jobs of this run (see status)."
)


@click.group("batch")
def batch_group() -> None:
    """Provider batch jobs submitted with --batch: list, cancel, collect.

    \b
    Examples:
      prbj judge -p gpt-5.1 --batch --no-wait
      prbj batch status
      prbj batch collect --wait && prbj judge -p gpt-5.1 --cache-only
    """


@batch_group.command("status")
@_cache_dir_option
@_run_option
@friendly_errors
def status(cache_dir: Path | None, run: str | None) -> None:
    """Per job: run, provider, state, done/failed/total, age (open jobs are asked afresh)."""
    from prbj.llm.batch.command import run_batch_status

    sys.exit(run_batch_status(cache_dir, run))


@batch_group.command("cancel")
@_cache_dir_option
@_run_option
@friendly_errors
def cancel(cache_dir: Path | None, run: str | None) -> None:
    """Ask the provider to cancel the open jobs (answers made so far are still billed; collect them)."""
    from prbj.llm.batch.command import run_batch_cancel

    sys.exit(run_batch_cancel(cache_dir, run))


@batch_group.command("collect")
@_cache_dir_option
@_run_option
@click.option("--wait/--no-wait", default=False, show_default=True, help="Poll open jobs until they end.")
@click.option("--progress/--no-progress", default=True, help="Show the polling display.")
@friendly_errors
def collect(cache_dir: Path | None, run: str | None, wait: bool, progress: bool) -> None:
    """Store the answers of ended jobs in the cache; a rerun of the command (or --cache-only) then uses them."""
    from prbj.llm.batch.command import run_batch_collect

    sys.exit(run_batch_collect(cache_dir, run, wait, progress))
