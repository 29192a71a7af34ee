"""A circuit breaker per provider: stop sending when the provider's answers say that retrying cannot help.

Four kinds of trouble open it. A handful of 401/403/404 answers in a row (a bad key, no access, an unknown
model: every other request would get the same), a run of refused connections or unresolvable host names (no
server there), one answer saying a quota is exhausted (a per-day quota, the account's credit: no wait within the
run clears it), and a run of 5xx answers from a provider that has not answered once in this run (a dead endpoint
behind a proxy or load balancer answers 502/503 to everything; each call would otherwise spend its whole retry
time, five minutes, before failing). A provider that has answered in this run is alive: its 5xx are a bad minute,
which the retry time outlasts, and never open the breaker. Once the provider looks suspect (one such failure
since the last success), its requests go one at a time, so a dead provider sees a handful of requests, not one
per call in flight. When open, every later call fails at once with the reason, and the run ends in seconds
instead of retrying every pair.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from prbj.llm.provider_errors import quota_exhausted
from prbj.llm.retry import cause_of, http_status, is_hopeless, is_unreachable

HOPELESS_LIMIT = 3
UNREACHABLE_LIMIT = 5
# 5xx answers in a row, before any success in the run, that open the breaker. A live provider failing 40% of
# requests at random starts a run with this many failures in a row once in ~10,000 runs (0.4^10); a dead one
# reaches it in seconds, its requests going one at a time.
DEAD_SERVER_ERRORS = 10


class BreakerOpen(Exception):
    """The provider's breaker is open: the request was not sent. `cause` is that of the failures that opened it."""

    def __init__(self, message: str, cause: str | None = None) -> None:
        super().__init__(message)
        self.cause = cause


@dataclass
class CircuitBreaker:
    provider: str
    hopeless_limit: int = HOPELESS_LIMIT
    unreachable_limit: int = UNREACHABLE_LIMIT
    server_error_limit: int = DEAD_SERVER_ERRORS
    hopeless_streak: int = 0
    unreachable_streak: int = 0
    server_error_streak: int = 0
    # Whether the provider has answered a request successfully in this run.
    answered: bool = False
    # Told (one line) when a run of 5xx opens the breaker; the reason is also every later call's error.
    on_open: Callable[[str], None] | None = None
    # Why it opened (None while closed); the first message of the failures that opened it, and their cause.
    reason: str | None = None
    cause: str | None = None
    _one_at_a_time: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def suspect(self) -> bool:
        return self.hopeless_streak > 0 or self.unreachable_streak > 0 or self.server_error_streak > 0

    def check(self) -> None:
        if self.reason is not None:
            raise BreakerOpen(self.reason, self.cause)

    @asynccontextmanager
    async def admit(self) -> AsyncIterator[None]:
        """Enter to send one request: raises BreakerOpen when open; one request at a time while suspect."""
        self.check()
        if not self.suspect:
            yield
            return
        async with self._one_at_a_time:
            self.check()
            yield

    def record_success(self) -> None:
        self.hopeless_streak = 0
        self.unreachable_streak = 0
        self.server_error_streak = 0
        self.answered = True

    def record_failure(self, error: BaseException, message: str) -> None:
        """Count `error` (described for the user as `message`); open when a limit is reached."""
        if is_unreachable(error):
            self.unreachable_streak += 1
            self._open_at_limit(
                error,
                self.unreachable_streak,
                self.unreachable_limit,
                f"connection failures in a row ({message})",
            )
            return
        # Any answer, even an error, shows a server is there.
        self.unreachable_streak = 0
        status = http_status(error)
        if status is not None and status >= 500 and not self.answered:
            self.server_error_streak += 1
            was_open = self.reason is not None
            self._open_at_limit(
                error,
                self.server_error_streak,
                self.server_error_limit,
                f"× HTTP {status} in a row from a provider that has not answered in this run ({message})",
            )
            if not was_open and self.reason is not None and self.on_open is not None:
                # Said at once: the run is about to end in seconds, and this is why (the retries of a live
                # provider's bad minute would have gone on for minutes).
                self.on_open(
                    f"{self.provider}: {self.reason.removeprefix('not sent: ')}; its calls left are not sent"
                )
            return
        if status is not None:  # another answer (a 429, a 4xx) breaks a run of 5xx
            self.server_error_streak = 0
        exhausted = quota_exhausted(error)
        if exhausted is not None:
            if self.reason is None:
                self._open(
                    f"not sent: the circuit breaker for {self.provider} opened: quota exhausted, {exhausted} "
                    f"({message})",
                    "quota exhausted",
                )
            return
        if is_hopeless(error):
            self.hopeless_streak += 1
            self._open_at_limit(
                error, self.hopeless_streak, self.hopeless_limit, f"× HTTP {http_status(error)} ({message})"
            )

    def _open_at_limit(self, error: BaseException, streak: int, limit: int, failures: str) -> None:
        """Open once `streak` reaches `limit`; the first reason to open it is the one kept."""
        if streak >= limit and self.reason is None:
            self._open(
                f"not sent: the circuit breaker for {self.provider} opened after {streak} {failures}",
                cause_of(error),
            )

    def _open(self, reason: str, cause: str) -> None:
        self.reason, self.cause = reason, cause
