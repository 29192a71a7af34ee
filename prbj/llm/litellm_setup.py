"""Import LiteLLM once, lazily (it takes seconds), configured for prbj: local price map, quiet, no own retries.

What prbj reads from LiteLLM's model map (a model's prices) is remembered in a small JSON file keyed by the
installed LiteLLM version (`model_map_file()`), so that a command that sends nothing (a cached rerun,
`--cache-only`, `prbj providers`) never pays the import. The file is read as untrusted data: anything but the
expected shape is ignored and looked up again.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from functools import cache, lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

# Where the remembered model-map facts live; a file path. Default: the user's cache folder.
MODEL_MAP_CACHE_ENV = "PRBJ_MODEL_MAP_CACHE"
_MODEL_MAP_FILE = "litellm-model-map.json"
# Prompts whose token count is remembered in memory (a retry or a repeated prompt is not counted twice).
_TOKEN_COUNTS_KEPT = 4096


@cache
def litellm() -> Any:
    # The price map must come from the installed package: fetching it at import time reaches for the network.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm as module

    module.suppress_debug_info = True
    module.telemetry = False
    module.num_retries = 0
    # Its own logging repeats what prbj reports (and parameter deprecation notes on every call).
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return module


def model_map_file() -> Path:
    override = os.environ.get(MODEL_MAP_CACHE_ENV)
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "prbj" / _MODEL_MAP_FILE


@cache
def _map_version() -> str | None:
    """The key remembered facts are valid under: the installed LiteLLM version with its local price map.
    None when the map may come from the network (LITELLM_LOCAL_MODEL_COST_MAP off): then nothing is kept."""
    if os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "True").strip().lower() != "true":
        return None
    try:
        return metadata.version("litellm")
    except metadata.PackageNotFoundError:
        return None


@cache
def _remembered_prices() -> dict[str, tuple[float, float] | None]:
    """Prices remembered for this LiteLLM version; {} when the file is missing, foreign or malformed."""
    version = _map_version()
    if version is None:
        return {}
    try:
        document = json.loads(model_map_file().read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    if not isinstance(document, dict) or document.get("litellm") != version:
        return {}
    prices = document.get("prices")
    if not isinstance(prices, dict):
        return {}
    return {model: _as_price(raw) for model, raw in prices.items() if _is_price(raw)}


def _is_price(raw: Any) -> bool:
    """A remembered price: None ("LiteLLM has none") or [input, output], finite and not negative."""
    return raw is None or (
        isinstance(raw, list)
        and len(raw) == 2
        and all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
            for v in raw
        )
    )


def _as_price(raw: list[float] | None) -> tuple[float, float] | None:
    return None if raw is None else (float(raw[0]), float(raw[1]))


def _remember_price(model: str, price: tuple[float, float] | None) -> None:
    version = _map_version()
    if version is None:
        return
    prices = _remembered_prices()
    prices[model] = price
    document = {
        "litellm": version,
        "prices": {name: None if p is None else list(p) for name, p in sorted(prices.items())},
    }
    path = model_map_file()
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed: a concurrent reader sees the old file or the new one, never half of one.
        temporary.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only home only costs the next command the import
    finally:
        temporary.unlink(missing_ok=True)


def litellm_price(model: str) -> tuple[float, float] | None:
    """(input, output) USD per token from LiteLLM's price map for this exact id, or None when unknown."""
    remembered = _remembered_prices()
    if model in remembered:
        return remembered[model]
    price = price_from_map(litellm().model_cost, model)
    _remember_price(model, price)
    return price


def price_from_map(table: dict[str, Any], model: str) -> tuple[float, float] | None:
    """(input, output) USD per token for `model` in a LiteLLM-shaped price map: the exact id, then the id
    without its provider prefix."""
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
    for candidate in candidates:
        entry = table.get(candidate)
        if (
            entry
            and entry.get("input_cost_per_token") is not None
            and entry.get("output_cost_per_token") is not None
        ):
            return float(entry["input_cost_per_token"]), float(entry["output_cost_per_token"])
    return None


def count_prompt_tokens(model: str, messages: Sequence[Mapping[str, Any]]) -> int:
    """LiteLLM's token count of a prompt, counted once per prompt and remembered (a small LRU in memory).
    Safe to call from a worker thread."""
    return _count_tokens(model, tuple(tuple(sorted(m.items())) for m in messages))


@lru_cache(maxsize=_TOKEN_COUNTS_KEPT)
def _count_tokens(model: str, messages: tuple[tuple[tuple[str, Any], ...], ...]) -> int:
    # The messages come frozen (hashable) to be the cache's key; LiteLLM takes them as dicts.
    return int(litellm().token_counter(model=model, messages=[dict(m) for m in messages]))
