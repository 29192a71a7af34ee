"""McNemar's test on paired right/wrong outcomes: did the same items flip from right to wrong more often than
chance would allow, between a baseline run and a new one?

Only the discordant items carry information: `lost` (right before, wrong now) and `gained` (wrong before,
right now). Under the null hypothesis each discordant item is a fair coin, so `lost` ~ Binomial(lost + gained,
1/2). With few discordant items the exact two-sided binomial p-value is used; with many, the chi-square
statistic with Edwards' continuity correction, which is then close to the exact value and cheaper to explain.

When the items come in clusters (the pairs of one user, on a per-user benchmark) and some cluster holds more than
one, the discordant items are no longer independent coins: `paired_test` and `clustered_test` then use
Obuchowski's clustered McNemar test (prbj.analysis.clusters) from SMALL_SAMPLE users, and under that many the
same statistic against its exact randomization distribution (the sign-flip test, prbj.analysis.sign_flip), where
the chi-square reference almost never rejects; the result's method says which.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np

from prbj.analysis.clusters import PairedClusters, clustered_mcnemar
from prbj.analysis.sign_flip import sign_flip_test
from prbj.analysis.small_samples import SMALL_SAMPLE

# The usual rule of thumb: below 25 discordant pairs the chi-square approximation is poor.
EXACT_BELOW = 25

Method = Literal["exact", "chi2", "clustered", "sign-flip"]


@dataclass(frozen=True, slots=True)
class McNemarResult:
    lost: int
    gained: int
    p_value: float
    method: Method
    # The clusters (users) the clustered test resampled; None for the test on independent items.
    clusters: int | None = None
    # The sign-flip test only: the smallest p-value its users could give (at or above α it cannot reject:
    # too few users to test), and the random sign vectors drawn when the exact distribution was too large.
    floor: float | None = None
    draws: int | None = None

    @property
    def discordant(self) -> int:
        return self.lost + self.gained

    def can_reject(self, alpha: float) -> bool:
        """Whether any outcome of these users could reach p < α (False: too few users to test)."""
        return self.floor is None or self.floor < alpha

    def describe(self) -> str:
        if self.method == "sign-flip":
            how = "exact" if self.draws is None else f"{self.draws:,} seeded random sign vectors"
            return (
                f"sign-flip test over {self.clusters} users ({how}) p={self.p_value:.3g} "
                f"({self.lost} lost, {self.gained} gained)"
            )
        if self.method == "clustered":
            return (
                f"clustered McNemar (Obuchowski, {self.clusters} users) p={self.p_value:.3g} "
                f"({self.lost} lost, {self.gained} gained)"
            )
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


def clustered_test(
    baseline: np.ndarray, current: np.ndarray, clusters: Sequence[str] | np.ndarray, *, seed: int = 0
) -> McNemarResult:
    """McNemar on paired 0/1 outcomes whose items belong to `clusters` (aligned labels): when some cluster holds
    two items or more, Obuchowski's clustered test from SMALL_SAMPLE clusters and the exact sign-flip test under
    that many (`seed` draws its sign vectors only when the exact distribution is too large); else the plain
    test, whose figures are then exact."""
    before = np.asarray(baseline, dtype=np.float64)
    after = np.asarray(current, dtype=np.float64)
    lost = int(((before == 1) & (after == 0)).sum())
    gained = int(((before == 0) & (after == 1)).sum())
    grouped = PairedClusters.from_pairs(before, after, np.asarray(clusters))
    if not grouped.repeat:
        return mcnemar(lost, gained)
    if grouped.count < SMALL_SAMPLE:
        flip = sign_flip_test(grouped.differences, seed=seed)
        return McNemarResult(lost, gained, flip.p_value, "sign-flip", grouped.count, flip.floor, flip.draws)
    test = clustered_mcnemar(grouped)
    return McNemarResult(lost, gained, test.p_value, "clustered", test.clusters)


def paired_test(
    baseline: Mapping[str, bool], current: Mapping[str, bool], clusters: Mapping[str, str] | None = None
) -> tuple[int, McNemarResult]:
    """McNemar on the items both runs judged; returns how many items were paired and the result. With
    `clusters` (item key → user) the test allows for users with several items."""
    shared = sorted(baseline.keys() & current.keys())
    if clusters is not None:
        before = np.array([baseline[key] for key in shared], dtype=np.float64)
        after = np.array([current[key] for key in shared], dtype=np.float64)
        return len(shared), clustered_test(before, after, [clusters.get(key, key) for key in shared])
    lost = sum(1 for key in shared if baseline[key] and not current[key])
    gained = sum(1 for key in shared if current[key] and not baseline[key])
    return len(shared), mcnemar(lost, gained)
