"""Which provider errors are worth retrying, how long to wait and when to give up: the one retry layer in prbj
(tenacity runs it in the gateway's call path).

LiteLLM's and the SDKs' own retries are off, so attempts and waits are counted here and nowhere else.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from tenacity import RetryCallState

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    max_total_seconds: float = 300.0
    initial_wait: float = 1.0
    max_wait: float = 60.0
    # A longer Retry-After is capped at this; max_total_seconds still bounds the whole call.
    max_retry_after: float = 120.0


def status_of(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None)
    return int(status) if isinstance(status, int) else None


def is_rate_limit(error: BaseException) -> bool:
    return status_of(error) == 429 or type(error).__name__ == "RateLimitError"


def is_timeout(error: BaseException) -> bool:
    return type(error).__name__ in {"Timeout", "TimeoutError", "ReadTimeout", "APITimeoutError"}


def causes(error: BaseException) -> Iterator[BaseException]:
    """`error` and the errors it was raised from, outermost first (LiteLLM wraps the SDK's, which wraps httpx's)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


# Names of the errors a request raises once it is on its way (connecting, waiting, or answered with a status).
_ON_THE_WIRE = {"HTTPStatusError", "APIStatusError", "APIConnectionError", "APITimeoutError", "ConnectError"}
_CLIENT_SIDE_ROOTS = {"OpenAIError", "AnthropicError"}


def raised_before_sending(error: BaseException) -> bool:
    """An error the client raised before any request left (the OpenAI client refusing to send without a key):
    LiteLLM reports it as a 500, but no server saw it and asking again gives the same answer."""
    chain = list(causes(error))
    if any(type(e).__name__ in _ON_THE_WIRE or isinstance(e, OSError | TimeoutError) for e in chain):
        return False
    root = chain[-1]
    return root is not error and type(root).__name__ in _CLIENT_SIDE_ROOTS


def is_unreachable(error: BaseException) -> bool:
    """The provider's host refused the connection or does not resolve: nothing answered at all."""
    return any(
        isinstance(e, ConnectionRefusedError | socket.gaierror)
        or type(e).__name__ in {"ClientConnectorError", "ClientConnectorDNSError"}
        for e in causes(error)
    )


# A provider answering these will answer them to every request: a bad key, no access, an unknown model.
HOPELESS_STATUS = {401, 403, 404}


def is_hopeless(error: BaseException) -> bool:
    # http_status is None when nothing answered (an unreachable host), so that needs no check of its own.
    return http_status(error) in HOPELESS_STATUS


def http_status(error: BaseException) -> int | None:
    """The status a server really answered with; None when no answer came (LiteLLM reports a refused
    connection or a client-side refusal as a 500 of its own making)."""
    if is_unreachable(error) or raised_before_sending(error):
        return None
    return status_of(error)


def is_retryable(error: BaseException) -> bool:
    """429, 5xx, timeouts and connection failures; never auth, bad-request or not-found errors, nor an error
    raised before the request left."""
    if raised_before_sending(error):
        return False
    name = type(error).__name__
    if name in {
        "AuthenticationError",
        "PermissionDeniedError",
        "BadRequestError",
        "NotFoundError",
        "ContextWindowExceededError",
        "ContentPolicyViolationError",
        "UnsupportedParamsError",
    }:
        return False
    if is_timeout(error) or name in {
        "APIConnectionError",
        "ServiceUnavailableError",
        "InternalServerError",
        "BadGatewayError",
        "RateLimitError",
    }:
        return True
    status = status_of(error)
    return status in RETRYABLE_STATUS if status is not None else isinstance(error, ConnectionError)


def retry_after_seconds(error: BaseException) -> float | None:
    """The provider's Retry-After (seconds or an HTTP date), from wherever LiteLLM put the response headers."""
    headers: Any = getattr(error, "litellm_response_headers", None)
    response = getattr(error, "response", None)
    if headers is None and response is not None:
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            from datetime import UTC, datetime

            return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
        except (TypeError, ValueError):
            return None


class BackoffWait:
    """Honour Retry-After when the provider sends one; otherwise exponential backoff with full jitter."""

    def __init__(self, policy: RetryPolicy, rng: random.Random | None = None) -> None:
        self.policy = policy
        self.rng = rng or random.Random()

    def __call__(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        if error is not None:
            asked = retry_after_seconds(error)
            if asked is not None:
                return min(asked, self.policy.max_retry_after)
        ceiling = min(self.policy.max_wait, self.policy.initial_wait * 2 ** (state.attempt_number - 1))
        return self.rng.uniform(0, ceiling)
