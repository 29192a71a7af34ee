"""The pacing primitives of one provider: requests in flight (a gate whose limit moves), requests per minute (a
pacer), tokens per minute (a sliding window). prbj.llm.pacing decides their limits; each is small enough to test
alone.

Every waiter queues first come, first served on a future of its own, and is woken exactly once: a run fans out
hundreds of calls, and polling or waking them all on each change would cost CPU per waiter.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from dataclasses import dataclass, field


class Gate:
    """A semaphore whose limit may change at any time: raising it admits waiters at once, lowering it admits
    nobody until enough holders have left. A slot that frees is handed to exactly one waiter."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.in_flight = 0
        # Each waiter's future is resolved once a slot is counted as theirs (in_flight already raised).
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def resize(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._admit()

    async def __aenter__(self) -> Gate:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    async def acquire(self) -> None:
        if not self._waiters and self.in_flight < self.limit:
            self.in_flight += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot was handed over just as this waiter was cancelled: pass it on
            elif waiter in self._waiters:  # not yet passed over by _admit, which skips cancelled waiters
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        self.in_flight -= 1
        self._admit()

    def _admit(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)


class AdaptiveConcurrency(Gate):
    """Requests in flight to one provider: the figure Little's law asks for (`aim`, from the rate limit and the
    latency), or, when no rate is known, a limit that grows by one after each run of successes; never above
    `maximum` (the ceiling). Sustained 429s halve it, and it grows back by one after each run of successes (AIMD);
    while it is backed off, no new aim raises it: a 429 wins over any stated limit. It halves once per round trip:
    429s to requests sent before the last halving were answered to the rate it just gave up, so they do not halve
    it again (hundreds in flight may be refused at once).

    Server errors (5xx) do not lower it: they say nothing about our request rate."""

    def __init__(
        self,
        maximum: int,
        *,
        start: int | None = None,
        rate_limits_to_shrink: int = 2,
        successes_to_grow: int = 20,
    ) -> None:
        self.maximum = maximum
        # The limit grown step by step while no rate says what is needed.
        self._grown = min(maximum, start or maximum)
        self._wanted: int | None = None
        # After sustained 429s: the cap AIMD holds the limit under, or None.
        self._backoff: int | None = None
        self._halved_at = -math.inf
        self._rate_limited_streak = 0
        self._success_streak = 0
        self._shrink_after = rate_limits_to_shrink
        self._grow_after = successes_to_grow
        super().__init__(self._grown)

    @property
    def backed_off(self) -> bool:
        return self._backoff is not None

    def aim(self, wanted: int | None) -> None:
        """The requests in flight the provider's rate needs (None: no rate known)."""
        self._wanted = None if wanted is None else max(1, wanted)
        self._apply()

    def _target(self) -> int:
        return self._wanted if self._wanted is not None else self._grown

    def _apply(self) -> None:
        limit = min(self.maximum, self._target())
        if self._backoff is not None:
            limit = min(limit, self._backoff)
        self.resize(limit)

    def record_rate_limited(self, sent_at: float | None = None) -> None:
        """A 429 to a request sent at `sent_at` (time.monotonic; None: count it whenever it was sent)."""
        self._success_streak = 0
        if sent_at is not None and sent_at < self._halved_at:
            return
        self._rate_limited_streak += 1
        if self._rate_limited_streak >= self._shrink_after:
            self._backoff = max(1, self.limit // 2)
            self._rate_limited_streak = 0
            self._halved_at = time.monotonic()
            self._apply()

    def record_success(self) -> None:
        self._rate_limited_streak = 0
        self._success_streak += 1
        if self._success_streak < self._grow_after:
            return
        self._success_streak = 0
        if self._backoff is not None:
            self._backoff += 1
            if self._backoff >= min(self.maximum, self._target()):
                self._backoff = None
        elif self._wanted is None and self._grown < self.maximum:
            self._grown += 1
        else:
            return
        self._apply()


class RequestPacer:
    """Requests leave evenly spaced, one per 60/rpm seconds (a generic cell rate algorithm). A request may
    leave up to `tolerance` seconds ahead of its slot, so that a timer that fires late is made up for without
    drifting below the rate; the longest burst is 1 + tolerance × rpm / 60 requests. A sliding window of `rpm`
    per minute would allow the whole minute's quota at once, which providers count against shorter windows too.

    The rate may change at any time (a provider's stated limit) and applies from the next departure;
    `hold_until` keeps everything back until a moment (a provider whose quota is used up until its reset)."""

    def __init__(self, rpm: float | None, *, tolerance: float = 0.05) -> None:
        self.rpm = rpm
        self.tolerance = tolerance
        # The last departure's theoretical time: the next one is due one interval after it.
        self._base = -math.inf
        # Each waiter's future is resolved with the time its slot was due.
        self._waiters: deque[asyncio.Future[float]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        # While requests queue for it, does it release them at its rate? Seconds with a queue, releases then.
        self.queued_s = 0.0
        self.queued_releases = 0
        self._queued_since: float | None = None

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def _due(self) -> float:
        return self._base + (60.0 / self.rpm if self.rpm else 0.0) - self.tolerance

    def delivered(self) -> float | None:
        """The share of its rate it released while requests queued for it (None: none ever queued). Below 1 the
        rate was not what held them: the event loop came late to its slots (the process was short of CPU)."""
        queued = self.queued_s
        if self._queued_since is not None:  # the event loop's clock is time.monotonic
            queued += time.monotonic() - self._queued_since
        if not self.rpm or queued <= 0:
            return None
        return self.queued_releases / (queued * self.rpm / 60.0)

    def set_rpm(self, rpm: float | None) -> None:
        self.rpm = rpm
        self._rearm()

    def hold_until(self, moment: float) -> None:
        """No departure before `moment` (the event loop's clock)."""
        interval = 60.0 / self.rpm if self.rpm else 0.0
        self._base = max(self._base, moment + self.tolerance - interval)
        self._rearm()

    async def wait(self) -> tuple[float, float]:
        """Wait for this request's slot: (seconds until it was due, seconds it came late). A late slot means the
        event loop was busy: the process, not the rate, held the request back."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if not self._waiters and now >= self._due():
            self._depart(now)
            return 0.0, 0.0
        waiter: asyncio.Future[float] = loop.create_future()
        if not self._waiters:
            self._queued_since = now
        self._waiters.append(waiter)
        self._arm(loop)
        try:
            due = await waiter
        except asyncio.CancelledError:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
                self._end_queue(loop.time())
            raise
        return max(0.0, due - now), max(0.0, loop.time() - max(due, now))

    def _depart(self, now: float) -> None:
        # GCRA: the slot taken is the one due, or now when the provider sat idle (no credit for idle time).
        self._base = max(self._base + 60.0 / self.rpm, now) if self.rpm else now

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._timer is None and self._waiters:
            self._timer = loop.call_at(max(loop.time(), self._due()), self._release)

    def _rearm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._arm(asyncio.get_running_loop())

    def _release(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        while self._waiters and now >= self._due():
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(self._due())
                self._depart(now)
                self.queued_releases += 1
        self._end_queue(now)
        self._arm(loop)

    def _end_queue(self, now: float) -> None:
        if not self._waiters and self._queued_since is not None:
            self.queued_s += now - self._queued_since
            self._queued_since = None


@dataclass
class TokenWindow:
    """Tokens-per-minute accounting over a sliding 60 s window. A call waits until its estimate fits; the
    estimate is replaced by what the provider reported once it answers (`correct`), which lets a waiting call
    in at once when it then fits. The limit may change at any time (`set_limit`: a provider's stated limit);
    `hold_until` keeps every call back until a moment."""

    tpm: float | None
    window: float = 60.0
    # [time, tokens] per call; a call's entry is corrected in place, and marked spent (time -1) once it expires.
    _spent: deque[list[float]] = field(default_factory=deque)
    # The sum of the tokens in _spent, kept as entries come and go: re-summing the deque on every acquire
    # would make a busy window quadratic.
    _total: float = 0.0
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _hold: float = 0.0
    # The one call waiting for room (acquires are serialised by _lock), woken early when room may have appeared.
    _wake: asyncio.Future[None] | None = None

    @property
    def waiting(self) -> bool:
        return self._lock.locked()

    def _used(self, now: float) -> float:
        while self._spent and now - self._spent[0][0] >= self.window:
            entry = self._spent.popleft()
            self._total -= entry[1]
            entry[0] = -1.0
        return self._total

    def hold_until(self, moment: float) -> None:
        """No call passes before `moment` (time.monotonic)."""
        self._hold = max(self._hold, moment)

    def set_limit(self, tpm: float | None) -> None:
        self.tpm = tpm
        self._nudge()

    def _nudge(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _sleep(self, seconds: float) -> None:
        """Sleep up to `seconds`, or until a correction or a new limit may have made room."""
        loop = asyncio.get_running_loop()
        wake = self._wake = loop.create_future()
        timer = loop.call_later(seconds, _resolve, wake)
        try:
            await wake
        finally:
            timer.cancel()
            self._wake = None

    async def acquire(self, tokens: int) -> list[float] | None:
        """Wait until `tokens` fit; the call's entry (for `correct`), or None when no limit applies."""
        if not self.tpm:
            return None
        async with self._lock:
            while True:
                now = time.monotonic()
                if now < self._hold:
                    await asyncio.sleep(self._hold - now)
                    continue
                limit = self.tpm
                if not limit:
                    return None
                # A single call larger than the whole budget can never fit; let it through alone rather than hang.
                wanted = min(tokens, int(limit))
                if self._used(now) + wanted <= limit:
                    entry = [now, float(wanted)]
                    self._spent.append(entry)
                    self._total += wanted
                    return entry
                oldest = self._spent[0][0]
                await self._sleep(max(0.01, oldest + self.window - now))

    def correct(self, entry: list[float] | None, actual: int) -> None:
        """Replace a call's estimate with what the provider reported (nothing once the entry left the window)."""
        if entry is None or entry[0] < 0:
            return
        self._total += actual - entry[1]
        freed = actual < entry[1]
        entry[1] = float(actual)
        if freed:
            self._nudge()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
