"""Reading how a reply ended: out of a LiteLLM response (live calls), and out of a provider's own reply body (batch
results), mapped the way LiteLLM maps a live one (see prbj.llm.finish for what each provider sends)."""

from __future__ import annotations

import json
from typing import Any

from prbj.llm.finish import CONTENT_FILTER, STOP, ReplyEnd, ended


def reply_end(response: Any, raw: RawBody | None = None) -> ReplyEnd:
    """The end of the first choice of a LiteLLM ModelResponse; `raw` holds the provider's body where LiteLLM
    drops the provider's own reason (Gemini)."""
    choice = response.choices[0]
    finish = str(getattr(choice, "finish_reason", None) or STOP)
    native = None
    if finish == CONTENT_FILTER:
        native = _native_reason(choice) or (raw.gemini_reason() if raw is not None else None)
    return ended(finish, native, reasoning_tokens(getattr(response, "usage", None)))


def native_end(native: str | None, reasoning: int = 0) -> ReplyEnd:
    """The end of a reply read from the provider's own body (a batch result line): its finish reason mapped onto
    OpenAI's words exactly as LiteLLM maps a live reply's."""
    from prbj.llm.litellm_setup import litellm_part

    helpers = litellm_part("litellm.litellm_core_utils.core_helpers")
    return ended(helpers.map_finish_reason(native) if native else STOP, native, reasoning)


def gemini_end(response: dict[str, Any], reasoning: int = 0) -> ReplyEnd:
    """The end of a Gemini generateContent body: a blocked prompt (no candidates, promptFeedback.blockReason) is
    a refusal naming the block reason, else the first candidate's finishReason."""
    reason = gemini_reason(response)
    if reason is not None and reason.startswith(_BLOCKED):
        return ended(CONTENT_FILTER, reason, reasoning)
    return native_end(reason, reasoning)


def thinking_tokens(thinking: str, completion_tokens: int) -> int:
    """Tokens of Anthropic thinking text, counted as LiteLLM counts them for a live reply (Anthropic reports no
    separate figure), at most the reply's output tokens."""
    if not thinking:
        return 0
    from prbj.llm.litellm_setup import litellm

    return max(
        0, min(int(litellm().token_counter(text=thinking, count_response_tokens=True)), completion_tokens)
    )


_BLOCKED = "prompt blocked: "


def gemini_reason(response: Any) -> str | None:
    """Gemini's own reason a reply ended: `prompt blocked: <blockReason>` when the prompt was refused before any
    candidate, else the first candidate's finishReason."""
    if not isinstance(response, dict):
        return None
    feedback = response.get("promptFeedback") or response.get("prompt_feedback")
    if isinstance(feedback, dict):
        blocked = feedback.get("blockReason") or feedback.get("block_reason")
        if isinstance(blocked, str):
            return _BLOCKED + blocked
    candidates = response.get("candidates")
    if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict):
        candidate = candidates[0]
        reason = candidate.get("finishReason") or candidate.get("finish_reason")
        return reason if isinstance(reason, str) else None
    return None


def reasoning_tokens(usage: Any) -> int:
    """Hidden reasoning tokens among the output tokens (OpenAI reasoning_tokens, Gemini thoughtsTokenCount,
    Anthropic thinking blocks: LiteLLM reports all three as completion_tokens_details.reasoning_tokens)."""
    details = getattr(usage, "completion_tokens_details", None)
    value = getattr(details, "reasoning_tokens", None)
    return int(value) if isinstance(value, int) and value > 0 else 0


def _native_reason(choice: Any) -> str | None:
    """The provider's own word, where LiteLLM keeps it: Gemini's native_finish_reason on the choice, Anthropic's
    raw stop_reason (refusal) on the message."""
    for fields in (
        getattr(choice, "provider_specific_fields", None),
        getattr(getattr(choice, "message", None), "provider_specific_fields", None),
    ):
        if isinstance(fields, dict):
            value = fields.get("native_finish_reason") or fields.get("stop_reason")
            if isinstance(value, str):
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
            return gemini_reason(json.loads(self.body or ""))
        except ValueError:
            return None
