"""The one status vocabulary: what became of a model call, and so of the judgment, grade or build step that
needed it. Every layer reads these names from here; judgments.parquet and summary.json store them as text."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, TypeVar, get_args

# What a call to a model ended in. `ok` is a complete answer; `truncated` (the output cap was reached, often by
# hidden reasoning) and `refused` (a content filter, a safety block, a refusal, a blocked prompt) are paid
# replies that may carry partial text but are never an answer by themselves: the reader of the reply decides
# (a cut-off reply whose visible text still holds a verdict is read as usual; a refusal never is).
CallStatus = Literal["ok", "truncated", "refused", "api_error", "skipped_budget", "skipped_cache", "dry_run"]
# What a judgment ended in: a call's status, or an answer that said nothing usable (`parse_error` from the
# judge, `planner_error` from the planner of the `planner` context, `persona_error` from the synthesizer of the
# `synthesized` context: the pair was never judged on that reply),
# or `abstained`: the judge answered, but less surely than a --selective threshold asks, so its verdict is
# withheld (counted apart: never a verdict, never a failure).
Status = Literal[
    "ok",
    "parse_error",
    "planner_error",
    "persona_error",
    "truncated",
    "refused",
    "api_error",
    "skipped_budget",
    "skipped_cache",
    "dry_run",
    "abstained",
]

STATUSES: tuple[Status, ...] = get_args(Status)
CALL_STATUSES: tuple[CallStatus, ...] = get_args(CallStatus)
# A verdict withheld for being unsure (`--selective`), and the judgments that answered, withheld or not: the
# ones with a probability, and the ones a judge is not "without any answer" for.
ABSTAINED: Status = "abstained"
ANSWERED_STATUSES: tuple[Status, ...] = ("ok", ABSTAINED)
# Judgments that count as failed in a run's figures: all but the answered ones (a dry run is a plan, not a
# failure).
FAILED_STATUSES: tuple[Status, ...] = tuple(s for s in STATUSES if s not in (*ANSWERED_STATUSES, "dry_run"))
# Calls the provider answered and billed: a complete answer, or a reply cut at its output cap or refused. Each is
# cached, so a rerun replays it rather than buying it again.
REPLIED_STATUSES: tuple[CallStatus, ...] = ("ok", "truncated", "refused")
# A reply came back but gave its reader nothing to use: unreadable, cut off before the answer, or refused.
UNUSABLE_REPLY_STATUSES: tuple[Status, ...] = ("parse_error", "truncated", "refused")
# Calls that produced no answer at all: a rerun (or a higher cap, or leaving --cache-only) may still get one.
# (A truncated or refused reply was paid for and is cached: a plain rerun replays it.)
UNANSWERED_STATUSES: tuple[CallStatus, ...] = ("api_error", "skipped_budget", "skipped_cache", "dry_run")

# The error of a call that was never sent starts with this (the provider's circuit breaker had opened, Ctrl-C).
NOT_SENT_PREFIX = "not sent"
# Statuses of calls never sent by their nature (--max-cost reached, --cache-only, --dry-run).
_NEVER_SENT: tuple[str, ...] = ("skipped_budget", "skipped_cache", "dry_run")


def was_not_sent(status: str, error: str | None) -> bool:
    """Whether a failed call (or the judgment, grade or step that needed it) never reached the provider, so
    that the calls table, the failure causes and the progress line count it as "not sent", not as failed."""
    return status in _NEVER_SENT or (status == "api_error" and (error or "").startswith(NOT_SENT_PREFIX))


# What each status means to the user, in the words reports and error lines use.
STATUS_MEANING: dict[Status, str] = {
    "ok": "answered",
    "parse_error": "the reply held no readable verdict or score",
    "planner_error": "the planner's reply named no aspect of the user",
    "persona_error": "the synthesizer's reply held no persona of the user",
    "truncated": "the reply reached its output cap before an answer (raise the cap or lower the reasoning effort)",
    "refused": "the provider refused to answer (content filter, safety block or refusal)",
    "api_error": "a call failed (rerun to retry)",
    "skipped_budget": "--max-cost reached (rerun with a higher cap)",
    "skipped_cache": "not in the cache (--cache-only)",
    "dry_run": "not sent (--dry-run)",
    "abstained": "answered below the --selective confidence threshold (verdict withheld)",
}
# Failures a fresh sample of the same prompt can heal (--retry-failed): an unreadable, cut-off or refused reply,
# a provider error. A budget or cache skip cannot be healed by asking again.
HEALABLE_STATUSES: tuple[Status, ...] = ("parse_error", "truncated", "refused", "api_error")

# When one result needs several calls (both answer orders, one grade per rubric aspect), the result takes the
# status that explains the most: a call never sent outranks one that failed, which outranks a reply the provider
# refused or cut off, which outranks a reply that was unreadable. The three "not sent" statuses come from
# exclusive modes, so their order among themselves is moot.
_SEVERITY: dict[str, float] = {
    "dry_run": 9,
    "skipped_budget": 8,
    "skipped_cache": 7,
    "api_error": 6,
    "refused": 5,
    "truncated": 4,
    # Below a failed call (which explains more), above an unreadable verdict (the judge never saw a plan).
    "planner_error": 3,
    "persona_error": 3,
    "parse_error": 2,
    # An answer whose verdict was withheld still explains more than a plain ok, and less than any failure.
    "abstained": 1.5,
    "ok": 1,
}


def severity(status: str) -> float:
    """Higher = explains more; a name outside the vocabulary ranks lowest."""
    return _SEVERITY.get(status, 0)


S = TypeVar("S", bound=str)


def most_severe(statuses: Iterable[S]) -> S:
    """The status that explains a combined result best; `ok` only when every part was ok."""
    ranked = sorted(statuses, key=severity, reverse=True)
    if not ranked:
        raise ValueError("most_severe needs at least one status")
    return ranked[0]
