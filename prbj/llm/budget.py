"""A hard cap on spend: worst-case cost is reserved before a paid call and settled to the real cost after it.

A call that does not fit beside the reservations still pending waits for them to settle (most settle well
below their worst case) rather than being skipped: it is skipped only when the cap is truly exhausted, i.e.
its worst case does not fit beside what is already spent even with nothing pending. So how much of the cap a
run uses does not depend on how many calls are in flight at once. Waiters are served first come, first served.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

from prbj.errors import ConfigError

# Amounts are sums of floats: a call that fits the cap exactly must not be refused for a rounding error.
_EPSILON = 1e-12


class CapBelowOneCall(ConfigError):
    """--max-cost is below the worst case of a call that must be sent, before any was: exit 2, nothing sent."""


@dataclass
class Budget:
    """`max_cost` in USD, or None for no cap. Lives on one event loop: reserve, settle and release never
    interleave with another coroutine between their check and their update."""

    max_cost: float | None = None
    spent: float = 0.0
    reserved: float = 0.0
    # Whether any call has had its worst case reserved (and so may have been sent): until then a cap too small
    # for one call stops the run (prbj.llm.admission.refuse_cap_below_one_call) instead of skipping every call.
    reserved_once: bool = field(default=False, init=False)
    _queue: asyncio.Lock | None = field(default=None, init=False, repr=False)
    _changed: asyncio.Event | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        # nan compares false with everything and inf never binds: either would let every call through.
        if self.max_cost is not None and (
            isinstance(self.max_cost, bool) or not math.isfinite(self.max_cost) or self.max_cost < 0
        ):
            raise ConfigError(f"--max-cost {self.max_cost}: expected a finite amount of USD >= 0")

    async def reserve(self, worst_case: float) -> bool:
        """Reserve `worst_case` USD, waiting while pending reservations might still free room; False (and the
        call is not sent) only when it cannot fit beside what is already spent."""
        if self.max_cost is None:
            self.reserved += worst_case
            self.reserved_once = True
            return True
        if self._queue is None:
            self._queue, self._changed = asyncio.Lock(), asyncio.Event()
        assert self._changed is not None
        # One waiter at a time, in arrival order: a later small call never overtakes an earlier one.
        async with self._queue:
            while True:
                if not self.fits_alone(worst_case):
                    return False
                if self.spent + self.reserved + worst_case <= self.max_cost + _EPSILON:
                    self.reserved += worst_case
                    self.reserved_once = True
                    return True
                # Room may appear when a pending call settles below its worst case or gives its share back.
                self._changed.clear()
                await self._changed.wait()

    def fits_alone(self, worst_case: float) -> bool:
        """Whether a call of this worst case could ever be sent under the cap, beside what is already spent."""
        return self.max_cost is None or self.spent + worst_case <= self.max_cost + _EPSILON

    def settle(self, reserved: float, actual: float) -> None:
        self.reserved = max(0.0, self.reserved - reserved)
        self.spent += actual
        self._wake()

    def release(self, reserved: float) -> None:
        """A call that failed before the provider billed anything gives its reservation back."""
        self.settle(reserved, 0.0)

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()

    @property
    def remaining(self) -> float | None:
        return None if self.max_cost is None else max(0.0, self.max_cost - self.spent - self.reserved)
