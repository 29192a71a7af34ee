"""Per-provider pacing: requests per minute, tokens per minute, and a concurrency limit that backs off on 429s.

Each concern is its own small object so the call path can compose them (and tests can check them alone).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

from asyncio_throttle import Throttler


def request_pacer(rpm: float | None) -> Throttler | None:
    """Evenly spaced requests: one per 60/rpm seconds. A sliding window of `rpm` per 60 s would allow a burst of
    the whole minute's quota at once, which providers count against shorter windows too."""
    if not rpm:
        return None
    return Throttler(rate_limit=1, period=60.0 / rpm)


@dataclass
class TokenWindow:
    """Tokens-per-minute accounting over a sliding 60 s window. A call waits until its estimate fits."""

    tpm: float | None
    window: float = 60.0
    _spent: deque[tuple[float, int]] = field(default_factory=deque)
    # The sum of the tokens in _spent, kept as entries come and go: re-summing the deque on every acquire
    # would make a busy window quadratic.
    _total: int = 0
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def _used(self, now: float) -> int:
        while self._spent and now - self._spent[0][0] >= self.window:
            self._total -= self._spent.popleft()[1]
        return self._total

    async def acquire(self, tokens: int) -> None:
        if not self.tpm:
            return
        # A single call larger than the whole budget can never fit; let it through alone rather than hang.
        tokens = min(tokens, int(self.tpm))
        async with self._lock:
            while True:
                now = time.monotonic()
                if self._used(now) + tokens <= self.tpm:
                    self._spent.append((now, tokens))
                    self._total += tokens
                    return
                oldest = self._spent[0][0]
                await asyncio.sleep(max(0.01, oldest + self.window - now))

    def correct(self, estimated: int, actual: int) -> None:
        """Replace the estimate of the latest matching call with what the provider reported."""
        if not self.tpm:
            return
        for i in range(len(self._spent) - 1, -1, -1):
            stamp, tokens = self._spent[i]
            if tokens == min(estimated, int(self.tpm)):
                self._spent[i] = (stamp, actual)
                self._total += actual - tokens
                return


class AdaptiveConcurrency:
    """A semaphore whose limit halves after sustained 429s and creeps back up after successes (AIMD).

    Server errors (5xx) do not lower it: they say nothing about our request rate. Waiters are admitted first
    come, first served, and a slot that frees is handed to exactly one of them: waking every waiter to re-check
    the limit would cost each release a pass over all of them (hundreds when a run fans out)."""

    def __init__(self, maximum: int, *, rate_limits_to_shrink: int = 2, successes_to_grow: int = 20) -> None:
        self.maximum = maximum
        self.limit = maximum
        self.in_flight = 0
        # Each waiter's future is resolved once a slot is counted as theirs (in_flight already raised).
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._rate_limited_streak = 0
        self._success_streak = 0
        self._shrink_after = rate_limits_to_shrink
        self._grow_after = successes_to_grow

    async def __aenter__(self) -> AdaptiveConcurrency:
        if not self._waiters and self.in_flight < self.limit:
            self.in_flight += 1
            return self
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # the slot was handed over just as this waiter was cancelled: pass it on
            elif waiter in self._waiters:  # not yet passed over by _admit, which skips cancelled waiters
                self._waiters.remove(waiter)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        self.in_flight -= 1
        self._admit()

    def _admit(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    def record_rate_limited(self) -> None:
        self._success_streak = 0
        self._rate_limited_streak += 1
        if self._rate_limited_streak >= self._shrink_after and self.limit > 1:
            self.limit = max(1, self.limit // 2)
            self._rate_limited_streak = 0

    def record_success(self) -> None:
        self._rate_limited_streak = 0
        self._success_streak += 1
        if self._success_streak >= self._grow_after and self.limit < self.maximum:
            self.limit += 1
            self._success_streak = 0
            self._admit()
