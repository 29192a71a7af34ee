"""How a provider ended a reply, and what that makes of the call: `ok`, `truncated` or `refused`.

LiteLLM 1.110 maps every provider's own finish reason onto OpenAI's words (verified against the loopback server,
which speaks each provider's documented shapes):

- OpenAI: `stop | length | content_filter` as sent; `usage.completion_tokens_details.reasoning_tokens` counts the
  hidden reasoning inside `completion_tokens` and inside `max_completion_tokens` (all of it spent: no content).
- Anthropic: `end_turn`/`stop_sequence` → stop; `max_tokens`/`pause_turn` → length; `refusal` → content_filter
  (the raw `stop_reason` stays in the message's provider_specific_fields); thinking blocks are counted as
  reasoning tokens.
- Gemini: `STOP` → stop; `MAX_TOKENS` → length (a candidate with `content` but no `parts` arrives as no text);
  `SAFETY`, `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII` and a blocked prompt (no candidates,
  `promptFeedback.blockReason`) → content_filter with the text and Gemini's own reason dropped, so the transport
  reads that reason from the raw body; `OTHER`, `LANGUAGE` → content_filter (the native reason kept);
  `usageMetadata.thoughtsTokenCount` → reasoning tokens, added to the output tokens.

A `truncated` or `refused` reply was paid for: it is cached with its end, so a rerun replays it and never buys
it again; `--retry-failed` re-asks it with a fresh sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prbj.data.status import CallStatus
from prbj.llm.param_rules import OUTPUT_BOUNDS

# OpenAI's words, which LiteLLM maps every provider's onto.
STOP = "stop"
LENGTH = "length"
CONTENT_FILTER = "content_filter"


@dataclass(frozen=True)
class ReplyEnd:
    """How one reply ended: OpenAI's finish reason (as LiteLLM maps it), the provider's own word for it where
    known (`MAX_TOKENS`, `SAFETY`, `refusal`, `blockReason: SAFETY`) and the hidden reasoning tokens it spent."""

    finish_reason: str = STOP
    native: str | None = None
    reasoning_tokens: int = 0

    @property
    def status(self) -> CallStatus:
        """`ok`, `truncated` (the output cap was reached) or `refused` (a filter, safety block or refusal)."""
        if self.finish_reason == LENGTH:
            return "truncated"
        if self.finish_reason == CONTENT_FILTER:
            return "refused"
        return "ok"

    @property
    def plain(self) -> bool:
        """Nothing worth recording: a normal end with no hidden reasoning (old cache entries read as this)."""
        return self.finish_reason == STOP and self.native is None and not self.reasoning_tokens


COMPLETE = ReplyEnd()


def ended(finish_reason: str, native: str | None = None, reasoning_tokens: int = 0) -> ReplyEnd:
    """A reply's end as prbj keeps it, whichever path read it (live, a batch result): the provider's own word is
    kept for a refusal only, where the cause names it (a cut-off reply needs no second name), so a live and a
    batch-bought reply store the same end."""
    keep = native if finish_reason == CONTENT_FILTER and native not in (None, CONTENT_FILTER) else None
    return ReplyEnd(finish_reason, keep, max(0, reasoning_tokens))


def end_cause(end: ReplyEnd) -> str | None:
    """The short name failures are counted by: `truncated`, or `refused (<the provider's reason>)`."""
    if end.status == "truncated":
        return "truncated"
    if end.status == "refused":
        return f"refused ({end.native or end.finish_reason})"
    return None


def end_message(end: ReplyEnd, completion_tokens: int, params: Mapping[str, Any]) -> str | None:
    """What the user reads about a cut-off or refused reply: the cap and the reasoning it spent and the fix, or
    the provider's reason."""
    if end.status == "truncated":
        spent = (
            f"; {end.reasoning_tokens} of its {max(completion_tokens, end.reasoning_tokens)} output tokens went to "
            "hidden reasoning"
            if end.reasoning_tokens
            else ""
        )
        return (
            f"the reply reached its output cap ({cap_text(params)}) before an answer{spent}: raise the cap "
            "(max_tokens in the profile's [params]) or lower the model's reasoning effort"
        )
    if end.status == "refused":
        why = end.native or end.finish_reason
        return f"the provider refused to answer ({why}); the reply is cached, --retry-failed asks again"
    return None


def cap_text(params: Mapping[str, Any]) -> str:
    """`max_tokens=512` (each output cap the request carried), or `no cap sent`."""
    caps = [f"{name}={params[name]}" for name in OUTPUT_BOUNDS if params.get(name) is not None]
    return ", ".join(caps) or "no cap sent"


def end_fields(end: ReplyEnd) -> dict[str, Any]:
    """The end as stored beside a cached answer: nothing for a plain one, so an ordinary answer's entry is what
    it always was."""
    if end.plain:
        return {}
    fields: dict[str, Any] = {"status": end.status, "finish_reason": end.finish_reason}
    if end.native:
        fields["native_finish_reason"] = end.native
    if end.reasoning_tokens:
        fields["reasoning_tokens"] = end.reasoning_tokens
    return fields


def end_of(value: Mapping[str, Any]) -> ReplyEnd:
    """The end stored with a cached answer; an entry without one (written before prbj recorded ends, or an
    ordinary answer) ended normally. A cache folder is untrusted input: fields of the wrong type are ignored."""
    finish = value.get("finish_reason")
    if not isinstance(finish, str):
        return COMPLETE
    native = value.get("native_finish_reason")
    reasoning = value.get("reasoning_tokens")
    return ReplyEnd(
        finish,
        native if isinstance(native, str) else None,
        reasoning if isinstance(reasoning, int) and not isinstance(reasoning, bool) and reasoning > 0 else 0,
    )
