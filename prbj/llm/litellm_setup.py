"""Import LiteLLM once, lazily (it takes seconds), configured for prbj: local price map, quiet, no own retries.

What prbj reads from LiteLLM's model map (a model's prices, deprecation date and reasoning support, and how
LiteLLM maps a request's parameters for it) is remembered in a small JSON file keyed by the
installed LiteLLM version (`model_map_file()`), so that a command that sends nothing (a cached rerun,
`--cache-only`, `prbj providers`) never pays the import. The file is read as untrusted data: anything but the
expected shape is ignored and looked up again.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import date
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

# Where the remembered model-map facts live; a file path. Default: the user's cache folder.
MODEL_MAP_CACHE_ENV = "PRBJ_MODEL_MAP_CACHE"
_MODEL_MAP_FILE = "litellm-model-map.json"
# Prompts whose token count is remembered in memory (a retry or a repeated prompt is not counted twice).
_TOKEN_COUNTS_KEPT = 4096


@cache
def litellm() -> Any:
    """LiteLLM, imported and configured once. Every import of LiteLLM in prbj goes through here (or through
    `litellm_part`, which comes here first): importing any of its modules runs its package's start-up, which,
    without LITELLM_LOCAL_MODEL_COST_MAP=True, fetches the price map from GitHub (an outbound call under every
    --personal-data policy, seconds of stall offline, and prices that change under a run). The price map is the
    installed package's, whatever the environment says: prices are pinned with the LiteLLM version."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm as module

    module.suppress_debug_info = True
    module.telemetry = False
    module.num_retries = 0
    # Its own logging repeats what prbj reports (and parameter deprecation notes on every call).
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return module


def litellm_part(name: str) -> Any:
    """A module of LiteLLM (`litellm.utils`, ...), imported after `litellm()` has set it up."""
    if name.split(".", 1)[0] != "litellm":
        raise ValueError(f"not a LiteLLM module: {name}")
    litellm()
    return importlib.import_module(name)


def model_map_file() -> Path:
    override = os.environ.get(MODEL_MAP_CACHE_ENV)
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "prbj" / _MODEL_MAP_FILE


@cache
def _map_version() -> str | None:
    """The key remembered facts are valid under: the installed LiteLLM version, whose bundled price map prbj
    always reads (litellm()). None when LiteLLM is not installed: then nothing is kept."""
    # Here, not at the top: importlib.metadata costs ~10 ms at start-up, for a lookup few commands make.
    from importlib import metadata

    try:
        return metadata.version("litellm")
    except metadata.PackageNotFoundError:
        return None


@cache
def _remembered() -> dict[str, dict[str, Any]]:
    """Every section of the facts remembered for this LiteLLM version, each entry checked by its section's
    validator (an entry of the wrong shape is dropped and looked up again); {} when the file is missing,
    foreign or malformed."""
    version = _map_version()
    if version is None:
        return {}
    try:
        document = json.loads(model_map_file().read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    if not isinstance(document, dict) or document.get("litellm") != version:
        return {}
    kept: dict[str, dict[str, Any]] = {}
    for section, valid in _SECTIONS.items():
        entries = document.get(section)
        kept[section] = (
            {key: raw for key, raw in entries.items() if valid(raw)} if isinstance(entries, dict) else {}
        )
    return kept


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


def _is_facts(raw: Any) -> bool:
    """Remembered model facts: {"deprecation_date": "YYYY-MM-DD" | None, "supports_reasoning": bool,
    "default_reasoning_effort": str | None}."""
    if not isinstance(raw, dict) or set(raw) != set(ModelFacts.__dataclass_fields__):
        return False
    date, reasoning, effort = (
        raw["deprecation_date"],
        raw["supports_reasoning"],
        raw["default_reasoning_effort"],
    )
    return (
        (date is None or (isinstance(date, str) and _iso_date(date) is not None))
        and isinstance(reasoning, bool)
        and (effort is None or isinstance(effort, str))
    )


def _is_wire(raw: Any) -> bool:
    """A remembered mapping of parameters: a JSON object (what LiteLLM sends), or {"error": message}."""
    return isinstance(raw, dict) and all(isinstance(key, str) for key in raw)


_SECTIONS = {"prices": _is_price, "models": _is_facts, "wire": _is_wire}


def _remember(section: str, key: str, value: Any) -> None:
    version = _map_version()
    if version is None:
        return
    remembered = _remembered()
    remembered.setdefault(section, {})[key] = value
    document: dict[str, Any] = {"litellm": version}
    for name in _SECTIONS:
        document[name] = dict(sorted(remembered.get(name, {}).items()))
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
    prices = _remembered().get("prices", {})
    if model in prices:
        raw = prices[model]
        return None if raw is None else (float(raw[0]), float(raw[1]))
    price = price_from_map(litellm().model_cost, model)
    _remember("prices", model, None if price is None else list(price))
    return price


@dataclass(frozen=True)
class ModelFacts:
    """What LiteLLM's bundled model map says about a model besides its price."""

    # The provider's announced retirement date (ISO), after which the model answers 404; None when none is known.
    deprecation_date: str | None = None
    supports_reasoning: bool = False
    # The reasoning effort the model uses when a request names none (e.g. "none" for gpt-5.1).
    default_reasoning_effort: str | None = None

    @property
    def retires_on(self) -> date | None:
        return _iso_date(self.deprecation_date) if self.deprecation_date else None


def model_facts(model: str) -> ModelFacts:
    """The model map's facts about `model` (remembered like prices, so a replay imports nothing)."""
    remembered = _remembered().get("models", {})
    if model in remembered:
        return ModelFacts(**remembered[model])
    facts = facts_from_map(litellm().model_cost, model)
    _remember("models", model, asdict(facts))
    return facts


def facts_from_map(table: Mapping[str, Any], model: str) -> ModelFacts:
    """`model`'s facts in a LiteLLM-shaped model map (the exact id, then without its provider prefix); a model
    the map does not know has none."""
    entry = _map_entry(table, model) or {}
    date_text = entry.get("deprecation_date")
    effort = entry.get("default_reasoning_effort")
    return ModelFacts(
        deprecation_date=date_text if isinstance(date_text, str) and _iso_date(date_text) else None,
        supports_reasoning=entry.get("supports_reasoning") is True,
        default_reasoning_effort=effort if isinstance(effort, str) else None,
    )


def _map_entry(table: Mapping[str, Any], model: str) -> Mapping[str, Any] | None:
    candidates = [model, model.split("/", 1)[1]] if "/" in model else [model]
    for candidate in candidates:
        entry = table.get(candidate)
        if isinstance(entry, dict):
            return entry
    return None


def _iso_date(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def remembered_wire(key: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A mapping of request parameters by LiteLLM (see prbj.llm.wire_params), remembered under `key` like the
    model map's facts: it depends only on the installed LiteLLM, the model and the parameters."""
    remembered = _remembered().get("wire", {})
    if key in remembered:
        return dict(remembered[key])
    value = compute()
    _remember("wire", key, value)
    return value


def price_from_map(table: Mapping[str, Any], model: str) -> tuple[float, float] | None:
    """(input, output) USD per token for `model` in a LiteLLM-shaped price map: the exact id, then the id
    without its provider prefix."""
    candidates = [model, model.split("/", 1)[1]] if "/" in model else [model]
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
