"""Token log-probabilities of a reply, kept where a choice letter stands (`--confidence logprobs`).

Providers return, per generated token, its log-probability and the top-k alternatives at that position:
OpenAI-compatible servers as `choices[0].logprobs.content[i] = {token, logprob, top_logprobs[]}`, Gemini as
`candidates[0].logprobsResult.{chosenCandidates[i], topCandidates[i].candidates[]}` with `logProbability`
(LiteLLM maps Gemini's into OpenAI's shape). A judge reads one position only, the verdict letter, so only the
positions where a single letter was generated or offered are kept: a few entries per reply instead of
hundreds, small enough for the cache. Each kept position carries where its token starts in the reply's text,
so the judge can find the token under the verdict its parser read.

Cached values are untrusted input (a cache folder from elsewhere): `from_stored` accepts only the exact shape
`to_stored` writes, and anything else reads as "no log-probabilities".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# How many alternatives per position to ask for: enough to hold both verdict letters at a verdict position.
DEFAULT_TOP_LOGPROBS = 5
# A token that cannot be found at the expected place of the reply is looked for this far ahead (a provider's
# byte-level token such as a split emoji is not text, and the next token resumes after it).
_RESYNC_CHARS = 16


@dataclass(frozen=True, slots=True)
class TokenChoice:
    """One generated position: where the token starts in the reply, the token, its log-probability, and the
    alternatives the provider listed there (the token itself usually among them)."""

    offset: int
    token: str
    logprob: float
    alternatives: tuple[tuple[str, float], ...]

    @property
    def end(self) -> int:
        return self.offset + len(self.token)


# The request parameters that ask for them (OpenAI's names).
LOGPROB_PARAMS = ("logprobs", "top_logprobs")


def request_params(top: int = DEFAULT_TOP_LOGPROBS) -> dict[str, Any]:
    """The OpenAI-style parameters that ask for them (LiteLLM maps them to Gemini's responseLogprobs/logprobs);
    part of the request, so part of the cache key of exactly the runs that ask."""
    return {"logprobs": True, "top_logprobs": top}


def asked(params: Mapping[str, Any]) -> int:
    """How many alternatives a request asks for per position; 0 when it asks for no log-probabilities."""
    if not params.get("logprobs"):
        return 0
    top = params.get("top_logprobs")
    return int(top) if isinstance(top, int) and not isinstance(top, bool) and top > 0 else 1


def is_letter(token: str) -> bool:
    stripped = token.strip()
    return len(stripped) == 1 and stripped.isascii() and stripped.isalpha()


def kept_positions(
    text: str, positions: Iterable[tuple[str, float, Sequence[tuple[str, float]]]]
) -> list[TokenChoice]:
    """The positions worth keeping (a single letter generated or offered), each placed in `text`.

    `positions` are (token, logprob, alternatives) in generation order. The tokens are aligned to the text as
    they come; a token that is not where the text says (a byte-level fragment) is skipped without moving on."""
    kept: list[TokenChoice] = []
    at = 0
    for token, logprob, alternatives in positions:
        if not token:
            continue
        if text.startswith(token, at):
            offset = at
        else:
            found = text.find(token, at, at + _RESYNC_CHARS + len(token))
            if found < 0:
                continue
            offset = found
        at = offset + len(token)
        if is_letter(token) or any(is_letter(t) for t, _ in alternatives):
            kept.append(
                TokenChoice(
                    offset, token, _clamped(logprob), tuple((t, _clamped(p)) for t, p in alternatives)
                )
            )
    return kept


def from_response(choice_logprobs: Any, text: str) -> list[TokenChoice] | None:
    """The kept positions of a LiteLLM response choice's `logprobs` (OpenAI's shape, also for Gemini), or None
    when the provider returned none."""
    content = _field(choice_logprobs, "content")
    if not content:
        return None
    positions = []
    for entry in content:
        token, logprob = _field(entry, "token"), _field(entry, "logprob")
        if not isinstance(token, str) or not _finite(logprob):
            continue
        alternatives = [
            (alt_token, float(alt_logprob))
            for alt in _field(entry, "top_logprobs") or ()
            if isinstance(alt_token := _field(alt, "token"), str)
            and _finite(alt_logprob := _field(alt, "logprob"))
        ]
        positions.append((token, float(logprob), alternatives))
    return kept_positions(text, positions)


def from_gemini(result: Mapping[str, Any] | None, text: str) -> list[TokenChoice] | None:
    """The kept positions of a raw Gemini `logprobsResult` (batch results arrive without LiteLLM)."""
    if not isinstance(result, Mapping):
        return None
    chosen = result.get("chosenCandidates") or []
    tops = result.get("topCandidates") or []
    positions = []
    for index, candidate in enumerate(chosen):
        if not isinstance(candidate, Mapping):
            continue
        top = tops[index].get("candidates") if index < len(tops) and isinstance(tops[index], Mapping) else []
        alternatives = [
            (alt["token"], float(alt["logProbability"]))
            for alt in top or ()
            if isinstance(alt, Mapping)
            and isinstance(alt.get("token"), str)
            and _finite(alt.get("logProbability"))
        ]
        token, logprob = candidate.get("token"), candidate.get("logProbability")
        if isinstance(token, str) and isinstance(logprob, int | float) and _finite(logprob):
            positions.append((token, float(logprob), alternatives))
    return kept_positions(text, positions) if positions else None


def to_stored(choices: Sequence[TokenChoice]) -> list[list[Any]]:
    """The cache's JSON form: [offset, token, logprob, [[alternative, logprob], ...]] per position."""
    return [[c.offset, c.token, c.logprob, [[t, p] for t, p in c.alternatives]] for c in choices]


def from_stored(raw: Any) -> list[TokenChoice] | None:
    """What `to_stored` wrote; None for anything else (an older value without them, or a tampered one)."""
    if not isinstance(raw, list):
        return None
    choices = []
    for entry in raw:
        if not (isinstance(entry, list) and len(entry) == 4):
            return None
        offset, token, logprob, alternatives = entry
        if not (
            isinstance(offset, int)
            and not isinstance(offset, bool)
            and offset >= 0
            and isinstance(token, str)
            and _finite(logprob)
            and isinstance(alternatives, list)
            and all(
                isinstance(a, list) and len(a) == 2 and isinstance(a[0], str) and _finite(a[1])
                for a in alternatives
            )
        ):
            return None
        choices.append(
            TokenChoice(offset, token, _clamped(logprob), tuple((t, _clamped(p)) for t, p in alternatives))
        )
    return choices


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


def _finite(value: Any) -> bool:
    """A log-probability: a finite number, at most 0 (a provider's rounding may leave a hair above it)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value <= 1e-6
    )


def _clamped(value: float) -> float:
    return min(float(value), 0.0)
