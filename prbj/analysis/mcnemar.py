"""McNemar's test on paired right/wrong outcomes: did the same items flip from right to wrong more often than
chance would allow, between a baseline run and a new one?

Only the discordant items carry information: `lost` (right before, wrong now) and `gained` (wrong before,
right now). Under the null hypothesis each discordant item is a fair coin, so `lost` ~ Binomial(lost + gained,
1/2). With few discordant items the exact two-sided binomial p-value is used; with many, the chi-square
statistic with Edwards' continuity correction, which is then close to the exact value and cheaper to explain.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

# The usual rule of thumb: below 25 discordant pairs the chi-square approximation is poor.
EXACT_BELOW = 25

Method = Literal["exact", "chi2"]


@dataclass(frozen=True, slots=True)
class McNemarResult:
    lost: int
    gained: int
    p_value: float
    method: Method

    @property
    def discordant(self) -> int:
        return self.lost + self.gained

    def describe(self) -> str:
        name = "exact binomial" if self.method == "exact" else "chi-square, continuity-corrected"
        return f"McNemar {name} p={self.p_value:.3g} ({self.lost} lost, {self.gained} gained)"


def exact_two_sided_p(lost: int, gained: int) -> float:
    """Two-sided exact binomial p-value for `lost` successes in `lost + gained` fair coin flips. The binomial
    with p = 1/2 is symmetric, so doubling the smaller tail is exactly the sum over outcomes as unlikely as
    the one seen. Integer arithmetic keeps it exact at any size."""
    n = lost + gained
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(lost, gained) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


def chi2_continuity_p(lost: int, gained: int) -> float:
    """p-value of (|lost - gained| - 1)² / (lost + gained) against chi-square with one degree of freedom,
    whose survival function is erfc(sqrt(x / 2)).

    The continuity correction is clamped at zero: when lost = gained, |lost - gained| - 1 = -1 and the unclamped
    square would be 1 / n, a p-value below 1 for runs that differ not at all. Clamped, lost = gained (and
    |lost - gained| = 1) gives a statistic of 0 and p = 1.0, as the exact test does for lost = gained."""
    n = lost + gained
    if n == 0:
        return 1.0
    statistic = max(abs(lost - gained) - 1, 0) ** 2 / n
    return math.erfc(math.sqrt(statistic / 2.0))


def mcnemar(lost: int, gained: int, *, exact_below: int = EXACT_BELOW) -> McNemarResult:
    if lost < 0 or gained < 0:
        raise ValueError("discordant counts must be non-negative")
    if lost + gained < exact_below:
        return McNemarResult(lost, gained, exact_two_sided_p(lost, gained), "exact")
    return McNemarResult(lost, gained, chi2_continuity_p(lost, gained), "chi2")


def paired_test(baseline: Mapping[str, bool], current: Mapping[str, bool]) -> tuple[int, McNemarResult]:
    """McNemar on the items both runs judged; returns how many items were paired and the result."""
    shared = baseline.keys() & current.keys()
    lost = sum(1 for key in shared if baseline[key] and not current[key])
    gained = sum(1 for key in shared if current[key] and not baseline[key])
    return len(shared), mcnemar(lost, gained)
