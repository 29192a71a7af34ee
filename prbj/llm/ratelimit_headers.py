"""The rate limits a provider states in the headers of its replies: OpenAI's `x-ratelimit-*` (also sent by
OpenAI-compatible servers and proxies) and Anthropic's `anthropic-ratelimit-*`. Gemini sends none.

Parsing only: what the limits are used for is prbj.llm.pacing. Headers come from elsewhere, so every value is
checked (a number, finite, not negative) and whatever does not parse is left out rather than guessed.

- OpenAI: `x-ratelimit-limit-requests|tokens` (per minute), `-remaining-requests|tokens`, and
  `-reset-requests|tokens` as a duration until the quota is whole again ("1s", "6m0s", "12ms").
- Anthropic: `anthropic-ratelimit-requests-*`, `-input-tokens-*`, `-output-tokens-*` with `-limit`, `-remaining`
  and `-reset` (an RFC 3339 time). Its `-tokens-*` headers repeat whichever of input and output is the stricter,
  so they are not read as a limit of their own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

# LiteLLM hands a reply's raw provider headers back with this prefix (response._hidden_params).
LITELLM_PREFIX = "llm_provider-"
# LiteLLM model prefixes of providers whose replies state no limits: Gemini, directly or through Vertex AI.
SILENT_FAMILIES = frozenset({"gemini", "vertex_ai"})
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Quota:
    """One stated limit: per minute, what is left of it, and the seconds until it is whole again."""

    limit: float | None = None
    remaining: float | None = None
    reset_s: float | None = None

    @property
    def exhausted(self) -> bool:
        return self.remaining is not None and self.remaining <= 0 and bool(self.reset_s)


@dataclass(frozen=True)
class StatedLimits:
    shape: str  # "openai" | "anthropic": whose header names they came in
    requests: Quota = Quota()
    # Input and output tokens together (OpenAI's TPM), and apart (Anthropic's ITPM and OTPM).
    tokens: Quota = Quota()
    input_tokens: Quota = Quota()
    output_tokens: Quota = Quota()

    def quotas(self) -> dict[str, Quota]:
        """By the name of the limit they state (ProviderSpec's field names)."""
        return {
            "rpm": self.requests,
            "tpm": self.tokens,
            "input_tpm": self.input_tokens,
            "output_tpm": self.output_tokens,
        }


def states_limits(family: str) -> bool:
    """Whether replies of a provider of this family (a LiteLLM model prefix) may state its rate limits."""
    return family not in SILENT_FAMILIES


def stated_limits(headers: Mapping[str, Any] | None, now: datetime | None = None) -> StatedLimits | None:
    """The limits stated in `headers` (raw, or as LiteLLM prefixes them; any case); None when none are."""
    if not headers:
        return None
    raw = _raw_headers(headers)
    if any(name.startswith("anthropic-ratelimit-") for name in raw):
        when = now or datetime.now(UTC)

        def anthropic(kind: str) -> Quota:
            prefix = f"anthropic-ratelimit-{kind}-"
            return Quota(
                _count(raw.get(prefix + "limit"), positive=True),
                _count(raw.get(prefix + "remaining")),
                _seconds_until(raw.get(prefix + "reset"), when),
            )

        return StatedLimits(
            "anthropic",
            requests=anthropic("requests"),
            input_tokens=anthropic("input-tokens"),
            output_tokens=anthropic("output-tokens"),
        )
    if any(name.startswith("x-ratelimit-") for name in raw):

        def openai(kind: str) -> Quota:
            return Quota(
                _count(raw.get(f"x-ratelimit-limit-{kind}"), positive=True),
                _count(raw.get(f"x-ratelimit-remaining-{kind}")),
                duration_seconds(raw.get(f"x-ratelimit-reset-{kind}")),
            )

        return StatedLimits("openai", requests=openai("requests"), tokens=openai("tokens"))
    return None


def reply_headers(response: Any) -> Mapping[str, Any] | None:
    """The provider's headers on a LiteLLM reply (kept in its hidden params, prefixed)."""
    hidden = getattr(response, "_hidden_params", None)
    headers = hidden.get("additional_headers") if isinstance(hidden, dict) else None
    return headers if isinstance(headers, Mapping) else None


def error_headers(error: BaseException) -> Mapping[str, Any] | None:
    """The provider's headers on a failed call, wherever LiteLLM or the SDK put them."""
    headers = getattr(error, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(error, "response", None), "headers", None)
    return headers if isinstance(headers, Mapping) or hasattr(headers, "items") else None


def duration_seconds(text: Any) -> float | None:
    """OpenAI's reset durations ("1s", "6m0s", "12ms", "1h2m3.5s", or bare seconds) in seconds."""
    if not isinstance(text, str) or not text.strip():
        return None
    text = text.strip()
    bare = _count(text)
    if bare is not None:
        return bare
    pieces = _DURATION.findall(text)
    if not pieces or "".join(number + unit for number, unit in pieces) != text:
        return None
    total = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in pieces)
    return total if math.isfinite(total) else None


def _raw_headers(headers: Mapping[str, Any]) -> dict[str, str]:
    """Lower-case names without LiteLLM's prefix; where both forms exist the raw provider's value wins."""
    raw: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            continue
        lowered = name.lower()
        if lowered.startswith(LITELLM_PREFIX):
            raw[lowered[len(LITELLM_PREFIX) :]] = value
        else:
            raw.setdefault(lowered, value)
    return raw


def _count(text: Any, *, positive: bool = False) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        return None
    return value


def _seconds_until(text: Any, now: datetime) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())
