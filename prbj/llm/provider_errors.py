"""What a provider's error answer says, read from the provider's own response (status, headers, JSON body) rather
than from the text of the exception LiteLLM or an SDK wrapped it in.

- When to retry: `Retry-After` / `retry-after-ms`; Gemini's `google.rpc.RetryInfo.retryDelay` in the body (its
  429 has no header) or "Please retry in 53.2s" in its message; OpenAI's `x-ratelimit-reset-requests` /
  `-tokens` ("1s", "6m0s", "20ms") when there is no `Retry-After`.
- Whether waiting can help at all: a daily quota (Gemini `google.rpc.QuotaFailure` naming a per-day quota id)
  or OpenAI's `insufficient_quota` (billing) never clears within a run.
- Anthropic's 529 `overloaded_error` (LiteLLM reports it as a 500 of its own).
- `cause`: the short name a failure is counted by in the report.

LiteLLM keeps the provider's real HTTP response at the bottom of the exception chain (httpx's HTTPStatusError),
also where the exception on top carries a status of LiteLLM's making; the SDK clients of the batch APIs put it
on their own status errors. Parsing stays here so that the retry layer, the circuit breaker and the batch
clients share one reading; durations are read as prbj.llm.ratelimit_headers reads them on successful replies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from prbj.llm.ratelimit_headers import duration_seconds

OVERLOADED_STATUS = 529
_RETRY_IN_MESSAGE = re.compile(r"retry in (\d+(?:\.\d+)?)\s*(ms|s)\b", re.IGNORECASE)
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"


@dataclass(frozen=True)
class ProviderAnswer:
    """The HTTP answer behind an error: its status, headers (lower-case names) and the JSON object of its body
    (empty when it had none)."""

    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Mapping[str, Any] = field(default_factory=dict)

    @property
    def error(self) -> Mapping[str, Any]:
        """The body's `error` object (OpenAI, Gemini, Anthropic all nest it so), or the body itself."""
        inner = self.body.get("error")
        return inner if isinstance(inner, dict) else self.body


def causes(error: BaseException) -> Iterator[BaseException]:
    """`error` and the errors it was raised from, outermost first (LiteLLM wraps the SDK's, which wraps httpx's)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def provider_answer(error: BaseException) -> ProviderAnswer:
    """The provider's answer behind `error`: the innermost response in its chain that a server really sent (a
    status and a body), else what the outermost error says of itself."""
    found = ProviderAnswer()
    for link in causes(error):
        response = getattr(link, "response", None)
        status = getattr(response, "status_code", None)
        if isinstance(status, int):
            body = _json_object(_text(response))
            if body or not found.body:
                found = ProviderAnswer(status, _headers(getattr(response, "headers", None)), body)
    if found.status is None:
        own = getattr(error, "body", None) or getattr(error, "details", None)  # OpenAI SDK / Google SDK
        found = ProviderAnswer(
            _status_attribute(error),
            _headers(getattr(error, "litellm_response_headers", None)),
            own if isinstance(own, dict) else _json_object(_embedded_json(str(error))),
        )
    elif not found.headers:
        found = ProviderAnswer(
            found.status, _headers(getattr(error, "litellm_response_headers", None)), found.body
        )
    return found


# Where the errors of provider clients come from: LiteLLM, the OpenAI, Anthropic and Google SDKs, their HTTP layers.
_CLIENT_MODULES = ("litellm", "openai", "anthropic", "google", "httpx", "aiohttp")


def from_provider(error: BaseException) -> bool:
    """An error a provider client raised (or one carrying an HTTP status): provider trouble to report in one line,
    never a bug in prbj to show with its traceback."""
    return type(error).__module__.startswith(_CLIENT_MODULES) or _status_attribute(error) is not None


def real_status(error: BaseException) -> int | None:
    """The HTTP status the provider answered with (529, where LiteLLM says 500), else the error's own."""
    status = provider_answer(error).status
    return status if status is not None else _status_attribute(error)


def retry_delay(error: BaseException) -> float | None:
    """Seconds the provider asked to wait before another request, from wherever it said so; None if it did not."""
    answer = provider_answer(error)
    headers = answer.headers
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            seconds = _seconds_or_date(value, scale)
            if seconds is not None:
                return seconds
    asked = _retry_info(answer.error)
    if asked is not None:
        return asked
    message = answer.error.get("message")
    found = _RETRY_IN_MESSAGE.search(message if isinstance(message, str) else str(error))
    if found:
        return float(found.group(1)) * (1e-3 if found.group(2).lower() == "ms" else 1.0)
    if answer.status == HTTPStatus.TOO_MANY_REQUESTS:
        return _rate_limit_reset(headers)
    return None


def quota_exhausted(error: BaseException) -> str | None:
    """Why waiting cannot help, when that is so: a per-day quota ran out (Gemini), or the account's credit
    (OpenAI `insufficient_quota`); None otherwise."""
    answer = provider_answer(error)
    if answer.status not in (None, HTTPStatus.TOO_MANY_REQUESTS):
        return None
    details = answer.error
    if "insufficient_quota" in (details.get("code"), details.get("type")):
        return "insufficient_quota (billing: add credit or raise the spending limit)"
    for detail in _details(details):
        if detail.get("@type") != _QUOTA_FAILURE:
            continue
        for violation in detail.get("violations") or []:
            quota = violation.get("quotaId") if isinstance(violation, dict) else None
            if isinstance(quota, str) and "PerDay" in quota:
                return f"daily quota {quota} (it resets at midnight Pacific time)"
    return None


def overloaded(error: BaseException) -> bool:
    """Anthropic's 529 `overloaded_error`: the provider is busy, not the request wrong; retried."""
    answer = provider_answer(error)
    return answer.status == OVERLOADED_STATUS or answer.error.get("type") == "overloaded_error"


def status_phrase(status: int) -> str:
    """`429 Too Many Requests`; a status outside the standard list by number only."""
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


def _rate_limit_reset(headers: Mapping[str, str]) -> float | None:
    """OpenAI's reset time of the limit that ran out: the limits whose remaining count is 0 (the longest of
    them), else the soonest reset it names."""
    resets: dict[str, float] = {}
    for limit in ("requests", "tokens"):
        value = headers.get(f"x-ratelimit-reset-{limit}")
        seconds = duration_seconds(value) if value is not None else None
        if seconds is not None:
            resets[limit] = seconds
    exhausted = [s for limit, s in resets.items() if headers.get(f"x-ratelimit-remaining-{limit}") == "0"]
    if exhausted:
        return max(exhausted)
    return min(resets.values()) if resets else None


def _retry_info(error: Mapping[str, Any]) -> float | None:
    for detail in _details(error):
        if detail.get("@type") == _RETRY_INFO:
            delay = detail.get("retryDelay")
            if isinstance(delay, str):
                return duration_seconds(delay)
    return None


def _details(error: Mapping[str, Any]) -> list[dict[str, Any]]:
    details = error.get("details")
    return [d for d in details if isinstance(d, dict)] if isinstance(details, list) else []


def _seconds_or_date(value: str, scale: float) -> float | None:
    try:
        return max(0.0, float(value) * scale)
    except ValueError:
        pass
    try:
        from datetime import UTC, datetime
        from email.utils import parsedate_to_datetime

        return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def _status_attribute(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None)
    if not isinstance(status, int) and type(error).__module__.startswith("google.genai"):
        status = getattr(error, "code", None)  # the Google SDK's APIError names it `code`
    return int(status) if isinstance(status, int) else None


def _headers(headers: Any) -> dict[str, str]:
    if not headers:
        return {}
    try:
        return {str(k).lower(): str(v) for k, v in headers.items()}
    except (AttributeError, TypeError):
        return {}


def _text(response: Any) -> str:
    try:
        text = response.text
    except Exception:  # a streamed response not read yet raises; nothing to read then
        return ""
    return text if isinstance(text, str) else ""


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _embedded_json(message: str) -> str:
    """The JSON object a wrapper quoted in its message (`GeminiException - {"error": …}`), or ''."""
    start = message.find("{")
    if start < 0:
        return ""
    try:
        _, end = json.JSONDecoder().raw_decode(message, start)
    except ValueError:
        return ""
    return message[start:end]
