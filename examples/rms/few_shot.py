"""A few-shot judge: an LLM shown the user's earlier choices as examples, asked which of two answers this user
prefers (`prefer`) or how well one answer fits them (`score`). It calls its provider through LiteLLM:

    FEW_SHOT_MODEL=openai/gpt-4o-mini OPENAI_API_KEY=... \\
        prbj judge -p py:examples/rms/few_shot.py:FewShot --dataset examples/rms/tastes.jsonl

FEW_SHOT_MODEL is any LiteLLM model id, FEW_SHOT_API_BASE an OpenAI-compatible server (vLLM, SGLang), the key is
read by LiteLLM from the provider's usual variable. A 429 is waited out (its Retry-After, else a growing delay, at
most FEW_SHOT_RETRIES times); a reply without a readable answer (empty, no verdict) or a failed call gives NaN for that
item, which prbj counts as failed for that pair alone, never caches, and asks again on the next run. prbj caches every
answer it gets, so a rerun costs nothing.
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prbj import HistoryItem, PairItem, ScoreItem

# LiteLLM's price map from the installed package, not from the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SYSTEM = (
    "You predict the preferences of one particular person. You are shown choices they made before, then a new "
    "question with answers. Judge by what this person has preferred, not by what most people would."
)
EXAMPLES = 4  # earlier choices shown, the most recent first
# "Answer: A", or "Result: A" as the official judge prompts ask for it.
VERDICT = re.compile(r"(?:answer|result):\s*([AB])\b", re.IGNORECASE)
RATING = re.compile(r"score:\s*(10|[1-9])\b", re.IGNORECASE)


def they(choice: HistoryItem) -> str:
    return f"They preferred: {choice.chosen}\nOver: {choice.rejected}"


def earlier_choices(history: list[HistoryItem] | tuple[HistoryItem, ...]) -> str:
    shown = list(history)[-EXAMPLES:][::-1]
    examples = "\n\n".join(f"Question: {h.prompt}\n{they(h)}" for h in shown)
    return examples or "(no earlier choices)"


class FewShot:
    name = "few-shot"
    version = "1"

    def __init__(self) -> None:
        import litellm

        litellm.suppress_debug_info = True
        self.litellm = litellm
        self.model = os.environ.get("FEW_SHOT_MODEL", "openai/gpt-4o-mini")
        self.api_base = os.environ.get("FEW_SHOT_API_BASE") or None
        self.retries = int(os.environ.get("FEW_SHOT_RETRIES", "4"))
        self.first_delay = float(os.environ.get("FEW_SHOT_RETRY_SECONDS", "2"))
        workers = int(os.environ.get("FEW_SHOT_CONCURRENCY", "8"))
        self.pool = ThreadPoolExecutor(max_workers=workers)

    def ask(self, prompt: str) -> str:
        for attempt in range(self.retries + 1):
            try:
                reply = self.litellm.completion(
                    model=self.model,
                    api_base=self.api_base,
                    messages=[
                        {"role": "system", "content": SYSTEM},
                        {"role": "user", "content": prompt},
                    ],
                    temperature=0,
                    max_tokens=16,
                    num_retries=0,
                    max_retries=0,
                )
                return reply.choices[0].message.content or ""
            except self.litellm.RateLimitError as error:
                if attempt == self.retries:
                    raise
                time.sleep(retry_after(error) or self.first_delay * 2**attempt)
        raise AssertionError("unreachable")

    def answer(self, prompt: str, read: Any) -> float:
        """What `read` makes of the reply, or NaN when there is none to read: prbj then fails this item alone
        (an exception would fail the whole batch, and prbj would ask the answered items again to find it)."""
        try:
            reply = self.ask(prompt)
        except Exception as error:
            print(
                f"few-shot: {type(error).__name__}: {' '.join(str(error).split())[:200]}",
                file=sys.stderr,
            )
            return math.nan
        return read(reply)

    def prefer(self, items: list[PairItem]) -> list[float]:
        def one(item: PairItem) -> float:
            return self.answer(
                f"{about(item)}\n\nNew question: {item.prompt}\n\nAnswer A: {item.first}\n\nAnswer B: {item.second}"
                "\n\nWhich answer does this person prefer? Reply with 'Answer: A' or 'Answer: B'.",
                verdict,
            )

        return list(self.pool.map(one, items))

    def score(self, items: list[ScoreItem]) -> list[float]:
        def one(item: ScoreItem) -> float:
            return self.answer(
                f"{about(item)}\n\nNew question: {item.prompt}\n\nAnswer: {item.response}\n\nHow well does this "
                "answer fit this person, from 1 (not at all) to 10 (exactly)? Reply with 'Score: N'.",
                rating,
            )

        return list(self.pool.map(one, items))


def verdict(reply: str) -> float:
    """P(the first answer is preferred): 1 for A, 0 for B, NaN for no verdict."""
    found = VERDICT.findall(reply)
    return math.nan if not found else 1.0 if found[-1].upper() == "A" else 0.0


def rating(reply: str) -> float:
    found = RATING.findall(reply)
    return float(found[-1]) if found else math.nan


def about(item: ScoreItem | PairItem) -> str:
    persona = f"About this person: {item.persona}\n\n" if item.persona else ""
    return f"{persona}Their earlier choices:\n\n{earlier_choices(item.history)}"


def retry_after(error: Any) -> float | None:
    """The provider's Retry-After in seconds, when its 429 says one."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None) or {}
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
