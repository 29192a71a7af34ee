"""Which provider errors are worth retrying, how long to wait and when to give up: the one retry layer in prbj
(tenacity runs it in the gateway's call path), and the short cause a failure is counted by.

LiteLLM's and the SDKs' own retries are off, so attempts and waits are counted here and nowhere else. The
provider's own word on when to retry (Retry-After, Gemini's RetryInfo, OpenAI's rate-limit reset headers) is
read by prbj.llm.provider_errors and obeyed: no retry leaves before it, and a call the provider asks to wait
longer than its remaining retry time ends at once with that cause.
"""

from __future__ import annotations

import random
import socket
from dataclasses import dataclass

from tenacity import RetryCallState
from tenacity.stop import stop_base

from prbj.llm.provider_errors import (
    causes,
    overloaded,
    quota_exhausted,
    real_status,
    retry_delay,
    status_phrase,
)

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    max_total_seconds: float = 300.0
    initial_wait: float = 1.0
    max_wait: float = 60.0
    # A provider asking to wait longer than this (or than the call's remaining max_total_seconds) before the
    # next attempt ends the call at once, with that cause: no retry leaves before the provider's delay.
    max_retry_after: float = 120.0


def status_of(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None)
    return int(status) if isinstance(status, int) else None


def is_rate_limit(error: BaseException) -> bool:
    return status_of(error) == 429 or type(error).__name__ == "RateLimitError"


def is_quota_exhausted(error: BaseException) -> bool:
    """A daily quota or the account's credit ran out: no wait within a run clears it."""
    return quota_exhausted(error) is not None


def is_timeout(error: BaseException) -> bool:
    return type(error).__name__ in {"Timeout", "TimeoutError", "ReadTimeout", "APITimeoutError"}


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
    connection or a client-side refusal as a 500 of its own making, and Anthropic's 529 as a 500 too)."""
    if is_unreachable(error) or raised_before_sending(error):
        return None
    return real_status(error)


def cause_of(error: BaseException | None) -> str:
    """The short name a failed call is counted by in the report: `quota exhausted`, `overloaded`, `connection
    failed`, `refused by the client`, `timeout`, or the HTTP status the provider answered (`401 Unauthorized`)."""
    if error is None:
        return "gave up"
    if is_unreachable(error):
        return "connection failed"
    if raised_before_sending(error):
        return "refused by the client"
    if is_timeout(error):
        return "timeout"
    if is_quota_exhausted(error):
        return "quota exhausted"
    if overloaded(error):
        return "overloaded"
    status = http_status(error)
    return status_phrase(status) if status is not None else type(error).__name__


def is_retryable(error: BaseException) -> bool:
    """429, 5xx, timeouts and connection failures; never auth, bad-request or not-found errors, nor an error
    raised before the request left."""
    if raised_before_sending(error) or is_quota_exhausted(error):
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
    """The delay the provider asked for before the next request (see prbj.llm.provider_errors.retry_delay)."""
    return retry_delay(error)


class BackoffWait:
    """Wait as long as the provider asked (Retry-After, Gemini's RetryInfo, OpenAI's reset headers); otherwise
    exponential backoff with full jitter. A delay too long to wait is never shortened: AskedTooLong ends the
    call instead."""

    def __init__(self, policy: RetryPolicy, rng: random.Random | None = None) -> None:
        self.policy = policy
        self.rng = rng or random.Random()

    def __call__(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        if error is not None:
            asked = retry_after_seconds(error)
            if asked is not None:
                return asked
        ceiling = min(self.policy.max_wait, self.policy.initial_wait * 2 ** (state.attempt_number - 1))
        return self.rng.uniform(0, ceiling)


class AskedTooLong(stop_base):
    """Stop when the provider asks for a wait longer than `max_retry_after` or than the call's remaining retry
    time: retrying sooner would be refused again, and waiting would outlast the call."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy

    def __call__(self, state: RetryCallState) -> bool:
        error = state.outcome.exception() if state.outcome else None
        if error is None or not is_retryable(error):
            return False
        asked = retry_after_seconds(error)
        if asked is None:
            return False
        remaining = self.policy.max_total_seconds - (state.seconds_since_start or 0.0)
        return asked > min(remaining, self.policy.max_retry_after)
