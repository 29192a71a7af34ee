"""Provider prompt caching: what a cached prefix costs, and where Anthropic's cache breakpoint goes.

All three providers bill input tokens read from their prompt cache below the input price (Anthropic 0.1×, OpenAI
GPT-5 0.1×, Gemini 0.1–0.25×) and Anthropic bills writing a prefix into the cache above it (1.25×). LiteLLM
reports both counts in its usage (`prompt_tokens_details.cached_tokens`, `cache_creation_input_tokens`) and
knows each model's rates; where it does not, the providers' published ratios are used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prbj.llm.litellm_setup import litellm
from prbj.llm.providers import ProviderSpec

# Cache read and write price as a fraction of the input price, when LiteLLM's price map has no rate.
_READ_RATIO = {"anthropic": 0.1, "openai": 0.1, "gemini": 0.25}
_WRITE_RATIO = {"anthropic": 1.25}
# Anthropic caches a prefix only from this many tokens on (Sonnet and Opus 1024; Haiku 2048).
ANTHROPIC_MIN_PREFIX_TOKENS = 1024
ANTHROPIC_HAIKU_MIN_PREFIX_TOKENS = 2048
# The shortest prefix any provider caches: OpenAI's automatic caching, Gemini's implicit caching on its smaller
# models, Anthropic's breakpoint on most models.
MIN_CACHED_PREFIX_TOKENS = 1024


def family(model: str) -> str:
    prefix = model.split("/", 1)[0] if "/" in model else ""
    return {"vertex_ai": "gemini"}.get(prefix, prefix)


def cache_rates(spec: ProviderSpec) -> tuple[float, float]:
    """USD per token read from, and written to, the provider's prompt cache."""
    price = spec.input_price or 0.0
    if not spec.paid or not price:
        return 0.0, 0.0
    info: dict[str, Any] = {}
    try:
        info = (
            litellm().model_cost.get(spec.model.split("/", 1)[-1])
            or litellm().model_cost.get(spec.model)
            or {}
        )
    except Exception:  # an unknown model: the published ratios below
        info = {}
    kind = family(spec.model)
    known_price = info.get("input_cost_per_token")
    # LiteLLM's rates hold for LiteLLM's input price; a profile with its own price keeps the same ratio.
    scale = price / known_price if known_price else None
    read = info.get("cache_read_input_token_cost")
    write = info.get("cache_creation_input_token_cost")
    read_rate = read * scale if read is not None and scale else price * _READ_RATIO.get(kind, 1.0)
    write_rate = write * scale if write is not None and scale else price * _WRITE_RATIO.get(kind, 1.0)
    return read_rate, write_rate


def cache_adjustment(spec: ProviderSpec, cached_tokens: int, cache_write_tokens: int) -> float:
    """What provider caching changed in a call's price (negative: saved), given that `ProviderSpec.cost`
    charged every prompt token at the input price."""
    if not cached_tokens and not cache_write_tokens:
        return 0.0
    read, write = cache_rates(spec)
    price = spec.input_price or 0.0 if spec.paid else 0.0
    return cached_tokens * (read - price) + cache_write_tokens * (write - price)


def marks_shared_prefix(spec: ProviderSpec) -> bool:
    """Whether requests to this provider carry a cache breakpoint after their shared prefix (Anthropic's
    explicit prompt caching); other providers cache prefixes on their own, and the prefix need not be found."""
    return family(spec.model) == "anthropic"


def carries_breakpoint(
    spec: ProviderSpec, messages: Sequence[Mapping[str, Any]], shared_prefix_chars: int
) -> bool:
    """Whether a request gets an Anthropic cache breakpoint: an Anthropic model, and a shared prefix (system text
    included) that reaches the model's minimum cacheable length."""
    if shared_prefix_chars <= 0 or not marks_shared_prefix(spec):
        return False
    system = sum(len(m.get("content") or "") for m in messages if m.get("role") == "system")
    # ~4 characters a token: a prefix below the minimum would be refused silently and bill the write premium.
    return (system + shared_prefix_chars) / 4 >= min_prefix_tokens(spec.model)


def cache_write_premium(
    spec: ProviderSpec, messages: Sequence[Mapping[str, Any]], shared_prefix_chars: int
) -> float:
    """USD per prompt token above the input price that a request may pay for writing its prefix into the
    provider's cache (Anthropic's 1.25×); 0 for a request that carries no breakpoint."""
    if not carries_breakpoint(spec, messages, shared_prefix_chars):
        return 0.0
    _, write = cache_rates(spec)
    return max(0.0, write - (spec.input_price or 0.0))


def min_prefix_tokens(model: str) -> int:
    return ANTHROPIC_HAIKU_MIN_PREFIX_TOKENS if "haiku" in model else ANTHROPIC_MIN_PREFIX_TOKENS


def with_cache_breakpoint(messages: list[dict[str, Any]], prefix_chars: int) -> list[dict[str, Any]]:
    """Anthropic: the last user message cut after its shared prefix (`prefix_chars` characters: what every call
    of a pair shares), the prefix marked `cache_control` so that the other calls read it from the cache. The
    text sent is unchanged; only its split into content blocks differs."""
    if prefix_chars <= 0:
        return messages
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last is None or not isinstance(messages[last].get("content"), str):
        return messages
    text = messages[last]["content"]
    if prefix_chars >= len(text):
        return messages
    blocks = [
        {"type": "text", "text": text[:prefix_chars], "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": text[prefix_chars:]},
    ]
    return [*messages[:last], {**messages[last], "content": blocks}, *messages[last + 1 :]]


def shared_prefix_chars(text: str, varying: Sequence[str]) -> int:
    """Characters of `text` before the first of the `varying` parts (the answers of a pair): the prefix every
    call of the pair shares when templates put what pairs share first. 0 when no part is found."""
    found = [text.find(part) for part in varying if part]
    found = [index for index in found if index > 0]
    return min(found) if found else 0
