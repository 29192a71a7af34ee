"""`prbj providers` and `prbj cache` behind the CLI: what is configured and what is stored."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from prbj.display.width import output_console, print_whole
from prbj.llm import lifecycle
from prbj.llm.cache import ResponseCache
from prbj.llm.lifecycle import WARN_DAYS
from prbj.llm.litellm_setup import facts_from_map, price_from_map
from prbj.llm.providers import TAKE_LITELLM_PRICE, ProviderSpec, bundled_providers_dir, list_providers

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

# LiteLLM's price map as the installed package ships it (the map prbj uses: LITELLM_LOCAL_MODEL_COST_MAP).
_LITELLM_PRICE_FILE = "model_prices_and_context_window_backup.json"


def _litellm_price_map() -> dict[str, Any]:
    """LiteLLM's price map read from its JSON file, without importing LiteLLM (which takes seconds): listing
    profiles stays under a second. Empty when the file cannot be found."""
    found = importlib.util.find_spec("litellm")
    if found is None or found.origin is None:
        return {}
    try:
        return dict(json.loads((Path(found.origin).parent / _LITELLM_PRICE_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def _listed_price(provider: ProviderSpec, price_map: dict[str, Any]) -> str:
    if not provider.paid:
        return "free"
    if provider.input_price is not None and provider.output_price is not None:
        return f"{provider.input_price * 1e6:g} / {provider.output_price * 1e6:g}"
    if provider.price_source == TAKE_LITELLM_PRICE:
        found = price_from_map(price_map, provider.model)
        if found is None:
            return "litellm (not in the installed price map: refused when used)"
        # A profile may pin one side and take the other from LiteLLM.
        into = provider.input_price if provider.input_price is not None else found[0]
        out = provider.output_price if provider.output_price is not None else found[1]
        return f"{into * 1e6:g} / {out * 1e6:g} (LiteLLM price map)"
    return "[red]unknown"


def _limits(provider: ProviderSpec) -> str:
    from prbj.llm.pacing import DEFAULT_MAX_IN_FLIGHT

    parts = [
        f"{provider.rpm:g} rpm" if provider.rpm else "",
        f"{provider.tpm:,.0f} tpm" if provider.tpm else "",
        f"{provider.input_tpm:,.0f} input tpm" if provider.input_tpm else "",
        f"{provider.output_tpm:,.0f} output tpm" if provider.output_tpm else "",
    ]
    ceiling = provider.max_concurrency or DEFAULT_MAX_IN_FLIGHT
    return (
        ", ".join(p for p in parts if p)
        + f"; in flight: rate × latency, at most {ceiling}; timeout {provider.timeout:g} s"
    )


def _where(provider: ProviderSpec) -> str:
    path = Path(provider.source)
    return f"bundled ({path.name})" if path.parent == bundled_providers_dir() else str(path)


def _retires(provider: ProviderSpec, price_map: dict[str, Any], on: date) -> str:
    """The model's deprecation date from LiteLLM's map, and how it stands today."""
    retires = facts_from_map(price_map, provider.model).retires_on
    if retires is None:
        return "no date announced"
    if retires < on:
        return f"[red]{retires.isoformat()} (retired)[/red]"
    days = (retires - on).days
    soon = days <= WARN_DAYS
    return f"{'[yellow]' if soon else ''}{retires.isoformat()} (in {days} days){'[/yellow]' if soon else ''}"


def print_providers(providers: Sequence[ProviderSpec], console: Console, on: date | None = None) -> None:
    """One stacked block per profile: nothing is cut or wrapped mid-word at 80 columns or in a pipe."""
    price_map = _litellm_price_map()
    on = on or lifecycle.today()
    console.print("[bold]Provider profiles[/bold]", highlight=False)
    for p in providers:
        key = (
            "none needed"
            if not p.api_key_env
            else f"{p.api_key_env} {'[green]set[/green]' if p.key_is_set() else '[red]unset[/red]'}"
            + ("" if p.api_key_required else " (optional)")
        )
        console.print(f"\n[bold]{p.name}[/bold]", highlight=False)
        # Label and value side by side: a value wrapped at the console's width continues under itself.
        block = Table.grid(padding=(0, 0), pad_edge=False)
        block.add_column(no_wrap=True)
        block.add_column()
        for label, value in (
            ("model", p.model),
            ("from", _where(p)),
            ("key", key),
            ("limits", _limits(p)),
            ("price", _listed_price(p, price_map)),
            ("retires", _retires(p, price_map, on)),
        ):
            block.add_row(f"  {label:<8}", value)
        console.print(block, highlight=False)
    console.print(
        "\n[dim]prices: USD per million tokens in / out; retires: the model's deprecation date in LiteLLM's "
        "model map (a run warns within 30 days of it); keys are never shown; limits a provider states in its "
        "replies' headers replace these; --rpm, --tpm, --input-tpm, --output-tpm, --max-concurrency and "
        "--timeout override them for one run[/dim]",
        highlight=False,
    )


def run_providers_command(providers_dir: Path | None) -> int:
    """`prbj providers`: the profiles, where each was read from, their keys (set or not, never shown), limits
    and prices."""
    print_providers(list_providers(providers_dir, resolve_prices=False), output_console())
    return 0


# --- cache -----------------------------------------------------------------------------------------------


def run_cache_stats(cache_dir: Path | None) -> int:
    with ResponseCache(cache_dir) as cache:
        stats = cache.stats()
    kinds = ", ".join(f"{kind}: {count}" for kind, count in sorted(stats.by_kind.items())) or "empty"
    print_whole(
        output_console(),
        f"{stats.entries} entries ({kinds}), {stats.size_bytes / 1e6:.1f} MB in {stats.directory}",
    )
    return 0


def run_cache_clear(cache_dir: Path | None, *, confirm: Callable[[str], None] | None) -> int:
    """Delete every entry; `confirm` (None with --yes) is asked first and aborts by raising."""
    with ResponseCache(cache_dir) as cache:
        if confirm is not None:
            confirm(f"Delete all {cache.stats().entries} entries in {cache.directory}?")
        output_console().print(f"deleted {cache.clear()} entries")
    return 0


def run_cache_prune(cache_dir: Path | None, seconds: float, *, older_than: str) -> int:
    """Delete the entries stored more than `seconds` ago; `older_than` is the age as the user wrote it."""
    with ResponseCache(cache_dir) as cache:
        output_console().print(f"deleted {cache.prune(seconds)} entries older than {older_than}")
    return 0
