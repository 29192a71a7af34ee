"""Reading how a reply ended out of a LiteLLM response (see prbj.llm.finish for what each provider sends and how
LiteLLM maps it)."""

from __future__ import annotations

import json
from typing import Any

from prbj.llm.finish import CONTENT_FILTER, STOP, ReplyEnd


def reply_end(response: Any, raw: RawBody | None = None) -> ReplyEnd:
    """The end of the first choice of a LiteLLM ModelResponse; `raw` holds the provider's body where LiteLLM
    drops the provider's own reason (Gemini)."""
    choice = response.choices[0]
    finish = str(getattr(choice, "finish_reason", None) or STOP)
    native = _native_reason(choice)
    if native is None and finish == CONTENT_FILTER and raw is not None:
        native = raw.gemini_reason()
    return ReplyEnd(finish, native, reasoning_tokens(getattr(response, "usage", None)))


def reasoning_tokens(usage: Any) -> int:
    """Hidden reasoning tokens among the output tokens (OpenAI reasoning_tokens, Gemini thoughtsTokenCount,
    Anthropic thinking blocks: LiteLLM reports all three as completion_tokens_details.reasoning_tokens)."""
    details = getattr(usage, "completion_tokens_details", None)
    value = getattr(details, "reasoning_tokens", None)
    return int(value) if isinstance(value, int) and value > 0 else 0


def _native_reason(choice: Any) -> str | None:
    """The provider's own word, where LiteLLM keeps it: Gemini's native_finish_reason on the choice, Anthropic's
    raw stop_reason on the message. A normal end needs no second name."""
    for fields in (
        getattr(choice, "provider_specific_fields", None),
        getattr(getattr(choice, "message", None), "provider_specific_fields", None),
    ):
        if isinstance(fields, dict):
            value = fields.get("native_finish_reason") or fields.get("stop_reason")
            if isinstance(value, str) and value not in ("STOP", "end_turn", "stop_sequence"):
                return value
    return None


class RawBody:
    """LiteLLM's per-call `logger_fn`: it is handed the provider's raw body after the call. LiteLLM turns a Gemini
    prompt blocked (`promptFeedback.blockReason`) or a candidate flagged (SAFETY, PROHIBITED_CONTENT, RECITATION,
    …) into `content_filter` and drops which it was; the reason is read back from here, only then."""

    __slots__ = ("body",)

    def __init__(self) -> None:
        self.body: str | None = None

    def __call__(self, details: dict[str, Any]) -> None:
        body = details.get("original_response")
        if isinstance(body, str):
            self.body = body

    def gemini_reason(self) -> str | None:
        try:
            parsed = json.loads(self.body or "")
        except ValueError:
            return None
        if not isinstance(parsed, dict):
            return None
        feedback = parsed.get("promptFeedback")
        if isinstance(feedback, dict) and isinstance(feedback.get("blockReason"), str):
            return f"prompt blocked: {feedback['blockReason']}"
        candidates = parsed.get("candidates")
        if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict):
            reason = candidates[0].get("finishReason")
            return reason if isinstance(reason, str) else None
        return None
