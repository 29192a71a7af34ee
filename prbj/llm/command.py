"""`prbj providers` and `prbj cache` behind the CLI: what is configured and what is stored."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from prbj.llm.cache import ResponseCache
from prbj.llm.providers import ProviderSpec, list_providers

_SECONDS_PER_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(value: str) -> float:
    """'90s', '30m', '12h', '7d', '4w' or plain seconds."""
    text = value.strip().lower()
    try:
        if text and text[-1] in _SECONDS_PER_UNIT:
            return float(text[:-1]) * _SECONDS_PER_UNIT[text[-1]]
        return float(text)
    except ValueError:
        raise ValueError(f"{value!r}: use a number with s, m, h, d or w (e.g. 7d)") from None


# --- providers -------------------------------------------------------------------------------------------


def _price(provider: ProviderSpec) -> str:
    if not provider.paid:
        return "free"
    if provider.input_price is None or provider.output_price is None:
        return "[red]unknown"
    return f"{provider.input_price * 1e6:g} / {provider.output_price * 1e6:g}"


def _limits(provider: ProviderSpec) -> str:
    parts = [
        f"{provider.rpm:g} rpm" if provider.rpm else "",
        f"{provider.tpm:,.0f} tpm" if provider.tpm else "",
    ]
    return ", ".join(p for p in parts if p) + f"; {provider.max_concurrency} at once"


def providers_table(providers: Sequence[ProviderSpec]) -> Table:
    table = Table(
        title="Provider profiles",
        caption="prices: USD per million tokens in / out; keys are never shown",
        box=box.SIMPLE_HEAD,
        show_edge=False,
    )
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("model", overflow="fold")
    table.add_column("key", overflow="fold")
    table.add_column("limits", overflow="fold")
    table.add_column("price", no_wrap=True)
    for p in providers:
        key = (
            "—"
            if not p.api_key_env
            else f"{p.api_key_env} {'[green]set' if p.key_is_set() else '[red]unset'}"
        )
        table.add_row(p.name, p.model, key, _limits(p), _price(p))
    return table


def run_providers_command(providers_dir: Path | None) -> int:
    """`prbj providers`: the profiles, their keys (set or not, never shown), limits and prices."""
    Console().print(providers_table(list_providers(providers_dir)))
    return 0


# --- cache -----------------------------------------------------------------------------------------------


def run_cache_stats(cache_dir: Path | None) -> int:
    with ResponseCache(cache_dir) as cache:
        stats = cache.stats()
    kinds = ", ".join(f"{kind}: {count}" for kind, count in sorted(stats.by_kind.items())) or "empty"
    Console().print(
        f"{stats.directory}: {stats.entries} entries ({kinds}), {stats.size_bytes / 1e6:.1f} MB",
        soft_wrap=True,
    )
    return 0


def run_cache_clear(cache_dir: Path | None, *, confirm: Callable[[str], None] | None) -> int:
    """Delete every entry; `confirm` (None with --yes) is asked first and aborts by raising."""
    with ResponseCache(cache_dir) as cache:
        if confirm is not None:
            confirm(f"Delete all {cache.stats().entries} entries in {cache.directory}?")
        Console().print(f"deleted {cache.clear()} entries")
    return 0


def run_cache_prune(cache_dir: Path | None, seconds: float, *, older_than: str) -> int:
    """Delete the entries stored more than `seconds` ago; `older_than` is the age as the user wrote it."""
    with ResponseCache(cache_dir) as cache:
        Console().print(f"deleted {cache.prune(seconds)} entries older than {older_than}")
    return 0
