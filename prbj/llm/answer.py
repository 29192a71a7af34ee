"""The shape of a bought answer in the cache: one function, so a live call and a batch-bought answer write the
same value under the same key and either serves every later run."""

from __future__ import annotations

from typing import Any

from prbj.llm.finish import COMPLETE, ReplyEnd, end_fields


def answer_value(
    text: str,
    prompt_tokens: int,
    completion_tokens: int,
    cost_usd: float,
    model: str,
    purpose: str,
    end: ReplyEnd = COMPLETE,
) -> dict[str, Any]:
    """A cut-off or refused reply is stored with its status and end (it was paid for: a rerun replays it); an
    ordinary answer's value is what it always was."""
    return {
        "text": text,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "cost_usd": cost_usd,
        "model": model,
        "purpose": purpose,
        **end_fields(end),
    }
