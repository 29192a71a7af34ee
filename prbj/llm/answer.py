"""The shape of a bought answer in the cache: one function, so a live call and a batch-bought answer write the
same value under the same key and either serves every later run."""

from __future__ import annotations

from typing import Any


def answer_value(
    text: str, prompt_tokens: int, completion_tokens: int, cost_usd: float, model: str, purpose: str
) -> dict[str, Any]:
    return {
        "text": text,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "cost_usd": cost_usd,
        "model": model,
        "purpose": purpose,
    }
