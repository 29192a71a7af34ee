"""`prbj providers` and `prbj cache`: what is configured and what is stored."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from prbj.cli.support import friendly_errors


@click.command("providers")
@click.option(
    "--providers-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="PRBJ_PROVIDERS_DIR",
    help="Folder of extra/overriding provider profiles [env: PRBJ_PROVIDERS_DIR].",
)
@friendly_errors
def providers_command(providers_dir: Path | None) -> None:
    """List provider profiles: model id, key variable (and whether it is set), limits and prices.

    Keys are never shown. Prices are USD per million tokens, from the profile or LiteLLM's price map.

    \b
    Example:
      prbj providers --providers-dir ~/my-providers
    """
    from prbj.llm.command import run_providers_command

    sys.exit(run_providers_command(providers_dir))


@click.group("cache")
def cache_group() -> None:
    """Inspect and trim the response cache (default ./cache, or $PRBJ_CACHE_DIR).

    \b
    Examples:
      prbj cache stats
      prbj cache prune --older-than 30d
      prbj cache clear --yes
    """


_cache_dir_option = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Cache folder [default: $PRBJ_CACHE_DIR or ./cache].",
)


@cache_group.command("stats")
@_cache_dir_option
@friendly_errors
def cache_stats(cache_dir: Path | None) -> None:
    """Entries by kind and size on disk."""
    from prbj.llm.command import run_cache_stats

    sys.exit(run_cache_stats(cache_dir))


@cache_group.command("clear")
@_cache_dir_option
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@friendly_errors
def cache_clear(cache_dir: Path | None, yes: bool) -> None:
    """Delete every entry (paid answers included: a rerun pays again)."""
    from prbj.llm.command import run_cache_clear

    def confirm(question: str) -> None:
        click.confirm(question, abort=True)

    sys.exit(run_cache_clear(cache_dir, confirm=None if yes else confirm))


@cache_group.command("prune")
@_cache_dir_option
@click.option("--older-than", required=True, metavar="AGE", help="Age such as 90s, 30m, 12h, 7d, 4w.")
@friendly_errors
def cache_prune(cache_dir: Path | None, older_than: str) -> None:
    """Delete entries stored longer ago than AGE."""
    from prbj.llm.command import parse_duration, run_cache_prune

    try:
        seconds = parse_duration(older_than)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None
    sys.exit(run_cache_prune(cache_dir, seconds, older_than=older_than))
