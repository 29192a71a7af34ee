"""The shape of a bought answer in the cache: one function, so a live call and a batch-bought answer write the
same value under the same key and either serves every later run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prbj.llm.finish import COMPLETE, ReplyEnd, end_fields
from prbj.llm.logprobs import TokenChoice, from_stored, to_stored

# The key of the verdict-letter log-probabilities (prbj.llm.logprobs), present only in answers to requests that
# asked for them: every other answer is stored exactly as before.
LOGPROBS_KEY = "logprobs"


def answer_value(
    text: str,
    prompt_tokens: int,
    completion_tokens: int,
    cost_usd: float,
    model: str,
    purpose: str,
    *,
    logprobs: Sequence[TokenChoice] | None = None,
    end: ReplyEnd = COMPLETE,
) -> dict[str, Any]:
    """A cut-off or refused reply is stored with its status and end (it was paid for: a rerun replays it); an
    ordinary answer's value is what it always was."""
    value: dict[str, Any] = {
        "text": text,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "cost_usd": cost_usd,
        "model": model,
        "purpose": purpose,
        **end_fields(end),
    }
    if logprobs is not None:
        value[LOGPROBS_KEY] = to_stored(logprobs)
    return value


def stored_logprobs(value: Mapping[str, Any]) -> tuple[TokenChoice, ...] | None:
    """The log-probabilities of a cached answer; None for answers stored without them (or malformed ones)."""
    found = from_stored(value.get(LOGPROBS_KEY))
    return None if found is None else tuple(found)
