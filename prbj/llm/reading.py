"""What a model's reply says, for every reader of one (judges, the planner, gold grading, pair building): the one
place that decides between `ok`, `truncated`, `refused` and `parse_error` from the reply's text and how it ended.

A cut-off reply whose visible text still holds what the reader looks for (a verdict, a score, a list of
aspects) is read as usual; one that does not is `truncated`, never a `parse_error` (the judge did not fail to
answer: its output cap ran out). A refusal is never read, whatever text came with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from prbj.data.status import Status
from prbj.llm.gateway import LLMResult

T = TypeVar("T")


@dataclass(frozen=True)
class Reading(Generic[T]):
    status: Status
    value: T | None = None
    error: str | None = None
    cause: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def read_reply(result: LLMResult, parse: Callable[[str], T | None], what: str = "verdict") -> Reading[T]:
    """`parse(text)` of a reply that has text to read; otherwise (or when it finds nothing) the status that
    says why, with the message and cause. `what` names what `parse` looks for, in the messages."""
    if not result.replied:
        return Reading(result.status, error=result.error, cause=result.cause)
    if result.status == "refused":
        return Reading("refused", error=result.error, cause=result.cause)
    value = parse(result.text or "")
    if value is not None:
        return Reading("ok", value)
    if result.status == "truncated":
        visible = (
            f"no {what} in its visible text {snippet(result.text)}"
            if (result.text or "").strip()
            else "no text"
        )
        error = f"{result.error}; {visible}"
        return Reading("truncated", error=error, cause=result.cause)
    return Reading("parse_error", error=f"no {what} in reply: {snippet(result.text)}")


def may_repair(reading: Reading[T], result: LLMResult) -> bool:
    """Whether asking once more for the final line alone can help: the reply was read and held nothing (cut off
    or not), and it has visible text to show the model again; an empty assistant turn is never sent."""
    return reading.status in ("parse_error", "truncated") and bool((result.text or "").strip())


def snippet(text: str | None, limit: int = 120) -> str:
    flat = " ".join((text or "").split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")
