"""A circuit breaker per provider: stop sending when the provider's answers say that retrying cannot help.

Three kinds of trouble open it. A handful of 401/403/404 answers in a row (a bad key, no access, an unknown
model: every other request would get the same), a run of refused connections or unresolvable host names (no
server there), and one answer saying a quota is exhausted (a per-day quota, the account's credit: no wait
within the run clears it). Once the provider looks suspect (one such failure since the last success), its
requests go one at a time, so a dead provider sees a handful of requests, not one per call in flight. When
open, every later call fails at once with the reason, and the run ends in seconds instead of retrying every pair.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from prbj.llm.provider_errors import quota_exhausted
from prbj.llm.retry import cause_of, http_status, is_hopeless, is_unreachable

HOPELESS_LIMIT = 3
UNREACHABLE_LIMIT = 5


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
    hopeless_streak: int = 0
    unreachable_streak: int = 0
    # Why it opened (None while closed); the first message of the failures that opened it, and their cause.
    reason: str | None = None
    cause: str | None = None
    _one_at_a_time: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def suspect(self) -> bool:
        return self.hopeless_streak > 0 or self.unreachable_streak > 0

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
        exhausted = quota_exhausted(error)
        if exhausted is not None:
            if self.reason is None:
                self.reason = (
                    f"not sent: the circuit breaker for {self.provider} opened: quota exhausted, {exhausted} "
                    f"({message})"
                )
                self.cause = "quota exhausted"
            return
        if is_hopeless(error):
            self.hopeless_streak += 1
            self._open_at_limit(
                error, self.hopeless_streak, self.hopeless_limit, f"× HTTP {http_status(error)} ({message})"
            )

    def _open_at_limit(self, error: BaseException, streak: int, limit: int, failures: str) -> None:
        """Open once `streak` reaches `limit`; the first reason to open it is the one kept."""
        if streak >= limit and self.reason is None:
            self.reason = (
                f"not sent: the circuit breaker for {self.provider} opened after {streak} {failures}"
            )
            self.cause = cause_of(error)
