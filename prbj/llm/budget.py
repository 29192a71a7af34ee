"""A hard cap on spend: worst-case cost is reserved before a paid call and settled to the real cost after it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from prbj.errors import ConfigError


@dataclass
class Budget:
    """`max_cost` in USD, or None for no cap. Single event loop, so no lock: reserve and settle never interleave
    with another coroutine between their check and their update."""

    max_cost: float | None = None
    spent: float = 0.0
    reserved: float = 0.0

    def __post_init__(self) -> None:
        # nan compares false with everything and inf never binds: either would let every call through.
        if self.max_cost is not None and (
            isinstance(self.max_cost, bool) or not math.isfinite(self.max_cost) or self.max_cost < 0
        ):
            raise ConfigError(f"--max-cost {self.max_cost}: expected a finite amount of USD >= 0")

    def try_reserve(self, worst_case: float) -> bool:
        """Reserve `worst_case` USD if the cap allows it; a call that could cross the cap is not sent."""
        if self.max_cost is not None and self.spent + self.reserved + worst_case > self.max_cost + 1e-12:
            return False
        self.reserved += worst_case
        return True

    def settle(self, reserved: float, actual: float) -> None:
        self.reserved = max(0.0, self.reserved - reserved)
        self.spent += actual

    def release(self, reserved: float) -> None:
        """A call that failed before the provider billed anything gives its reservation back."""
        self.reserved = max(0.0, self.reserved - reserved)

    @property
    def remaining(self) -> float | None:
        return None if self.max_cost is None else max(0.0, self.max_cost - self.spent - self.reserved)
