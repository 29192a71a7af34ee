"""Which provider errors are worth retrying, how long to wait and when to give up: the one retry layer in prbj
(tenacity runs it in the gateway's call path), and the short cause a failure is counted by.

LiteLLM's and the SDKs' own retries are off, so attempts and waits are counted here and nowhere else. A
transient failure (429, 5xx, a timeout, a dropped connection) is retried until the call's retry time
(`max_total_seconds`) runs out, not for a fixed number of attempts: against a provider that refuses 40% of
requests at random, six attempts lose 0.4⁶ ≈ 0.4% of calls, while five minutes of retries lose none. Each wait
is the longer of the provider's delay and the backoff. The provider's own word on when to retry (Retry-After,
Gemini's RetryInfo, OpenAI's rate-limit reset headers) is read by prbj.llm.provider_errors and obeyed: no
retry leaves before it, and a call the provider asks to wait longer than its remaining retry time ends at once
with that cause. Errors that no wait clears (400, 401, a rejected parameter, an exhausted quota) are never
retried.
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
    """How long a call retries its transient failures: for `max_total_seconds` of its own time (its attempts and
    the waits between them; not the time its requests queued in prbj's pacing, which grows with the run and its
    limits rather than with the provider's trouble), each wait the longer of the provider's delay and a backoff
    between half and all of `initial_wait` × 2^(attempt − 1), at most `max_wait`.

    `max_attempts` is a cap on attempts on top of that: None (the default) derives it from the waits
    (`attempt_cap`), so that it cannot bind before the retry time does and exists only as a safety net; a test or
    a caller that wants no retries at all sets 1."""

    max_attempts: int | None = None
    max_total_seconds: float = 300.0
    initial_wait: float = 1.0
    max_wait: float = 60.0
    # A provider asking to wait longer than this (or than the call's remaining max_total_seconds) before the
    # next attempt ends the call at once, with that cause: no retry leaves before the provider's delay.
    max_retry_after: float = 120.0

    def __post_init__(self) -> None:
        # A zero wait would let the derived attempt cap grow without bound (and hammer a provider that answers
        # at once); a negative one is meaningless.
        if not (self.initial_wait > 0 and self.max_wait >= self.initial_wait and self.max_total_seconds >= 0):
            raise ValueError(
                f"retry policy: expected 0 < initial_wait <= max_wait and max_total_seconds >= 0, got {self}"
            )
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"retry policy: max_attempts must be at least 1, got {self.max_attempts}")

    def backoff_ceiling(self, failed_attempts: int) -> float:
        """The longest backoff after the `failed_attempts`-th failed attempt; the shortest is half of it."""
        return min(self.max_wait, self.initial_wait * 2.0 ** min(failed_attempts - 1, 64))

    def attempt_cap(self) -> int:
        """`max_attempts`, or the most attempts that fit in `max_total_seconds` when every wait is the shortest
        the backoff allows (half its ceiling), plus one: the last wait may be cut to the time left (BackoffWait),
        which lets one more attempt leave at the deadline. Every real wait is at least that long (the provider's
        delay only ever lengthens it), so the retry time always runs out first; the cap only stops a runaway if
        the clock or the waits misbehave. With the defaults (1 s doubling to 60 s, 300 s) it is 16 attempts."""
        if self.max_attempts is not None:
            return self.max_attempts
        attempts, elapsed = 1, 0.0
        while elapsed + self.backoff_ceiling(attempts) / 2 <= self.max_total_seconds:
            elapsed += self.backoff_ceiling(attempts) / 2
            attempts += 1
        return attempts + 1


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
    """The longer of the provider's delay (Retry-After, Gemini's RetryInfo, OpenAI's reset headers) and an
    exponential backoff with "equal jitter": a uniform draw between half and all of the ceiling. Half the ceiling
    is a floor, so attempts never come faster than the backoff intends (and `RetryPolicy.attempt_cap` can be
    derived from it); the other half spreads calls that failed together. The backoff, being prbj's own choice,
    is cut to the call's remaining retry time, so that its last attempt leaves at the deadline instead of the
    call giving up early; the provider's delay is never shortened: AskedTooLong ends the call instead."""

    def __init__(self, policy: RetryPolicy, rng: random.Random | None = None) -> None:
        self.policy = policy
        self.rng = rng or random.Random()

    def __call__(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        asked = (retry_after_seconds(error) if error is not None else None) or 0.0
        ceiling = self.policy.backoff_ceiling(state.attempt_number)
        backoff = self.rng.uniform(ceiling / 2, ceiling)
        remaining = max(0.0, self.policy.max_total_seconds - (state.seconds_since_start or 0.0))
        return max(asked, min(backoff, remaining))


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


def why_retries_ended(policy: RetryPolicy, state: RetryCallState) -> str:
    """What ended the retries of a call that failed after them, in the words of its error message: its retry
    time ran out, the provider asked for a longer wait than was left, or (a safety net) the attempt cap."""
    error = state.outcome.exception() if state.outcome else None
    asked = retry_after_seconds(error) if error is not None else None
    elapsed = state.seconds_since_start or 0.0
    remaining = policy.max_total_seconds - elapsed
    ran_out = f"its retry time ({policy.max_total_seconds:g}s) ran out"
    if remaining <= 0:
        return ran_out
    if asked is not None and asked > policy.max_retry_after:
        return f"the provider asked to retry in {asked:g}s, longer than a retry waits ({policy.max_retry_after:g}s)"
    if asked is not None and asked > remaining:
        return f"{ran_out}: the provider asked to retry in {asked:g}s, {remaining:.2g}s were left"
    return f"it reached the cap of {policy.attempt_cap()} attempts"
