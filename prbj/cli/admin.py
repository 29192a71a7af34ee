"""`prbj providers` and `prbj cache`: what is configured and what is stored."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from prbj.cli.support import friendly_errors


def _parse_duration(value: str) -> float:
    """'90s', '30m', '12h', '7d' or plain seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    text = value.strip().lower()
    try:
        if text and text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except ValueError:
        raise click.BadParameter(f"{value!r}: use a number with s, m, h, d or w (e.g. 7d)") from None


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
    from prbj.llm.providers import list_providers
    from prbj.report.terminal import providers_table

    Console().print(providers_table(list_providers(providers_dir)))


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
    from prbj.llm.cache import ResponseCache

    with ResponseCache(cache_dir) as cache:
        stats = cache.stats()
    kinds = ", ".join(f"{kind}: {count}" for kind, count in sorted(stats.by_kind.items())) or "empty"
    Console().print(
        f"{stats.directory}: {stats.entries} entries ({kinds}), {stats.size_bytes / 1e6:.1f} MB",
        soft_wrap=True,
    )


@cache_group.command("clear")
@_cache_dir_option
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@friendly_errors
def cache_clear(cache_dir: Path | None, yes: bool) -> None:
    """Delete every entry (paid answers included: a rerun pays again)."""
    from prbj.llm.cache import ResponseCache

    with ResponseCache(cache_dir) as cache:
        if not yes:
            click.confirm(f"Delete all {cache.stats().entries} entries in {cache.directory}?", abort=True)
        Console().print(f"deleted {cache.clear()} entries")


@cache_group.command("prune")
@_cache_dir_option
@click.option("--older-than", required=True, metavar="AGE", help="Age such as 90s, 30m, 12h, 7d, 4w.")
@friendly_errors
def cache_prune(cache_dir: Path | None, older_than: str) -> None:
    """Delete entries stored longer ago than AGE."""
    from prbj.llm.cache import ResponseCache

    seconds = _parse_duration(older_than)
    with ResponseCache(cache_dir) as cache:
        Console().print(f"deleted {cache.prune(seconds)} entries older than {older_than}")
