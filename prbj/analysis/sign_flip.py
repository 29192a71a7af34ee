"""The sign-flip (randomization) test over users of two judges' paired outcomes: does the sum of per-user
differences D_k (pairs of user k only the first judge got right minus those only the second got right) stand out
among the sums the same users would show if, within each user, which judge is which were a coin flip?

Under that null each D_k is as likely to be −D_k, independently across users, so the 2^K sign vectors are
equally likely and the p-value is the share of them whose |Σ s_k D_k| is at least the observed |Σ D_k|. Under
sign flips Σ D_k² never changes, so this is Obuchowski's clustered McNemar statistic
(K − 1)/K · (Σ D_k)² / Σ D_k² (prbj.analysis.clusters) referred to its exact randomization distribution instead
of chi-square: exact at any number of users, where the chi-square reference rejects almost never under 20 users
(bench/small_users.py). It can reject at α = 0.05 from 6 users with a difference (2 / 2^6 = 0.031); the
smallest p-value it can give is `floor`.

The distribution is computed exactly: D_k are integers, so the sums of a random subset of the |D_k| have a
distribution one convolution per user gives (the 2^K sign vectors counted, never listed), while users × the
largest sum stays under EXACT_CELLS; beyond that, MONTE_CARLO_DRAWS sign vectors from a seeded generator, with
the p-value (1 + hits) / (1 + draws), which keeps its level.

Differences that are not whole numbers (a user's change in their own accuracy, which `prbj check` tests when the
headline is user accuracy: prbj.analysis.check_headline) have no such convolution: their 2^K sign vectors are
enumerated up to EXACT_USERS users, and drawn at random above.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

# The exact distribution is computed while users × Σ|D_k| stays under this (a few hundred milliseconds at most).
EXACT_CELLS = 20_000_000
MONTE_CARLO_DRAWS = 100_000
# Fractional differences: 2^16 = 65,536 sign vectors enumerated at once (a few MB).
EXACT_USERS = 16
# Monte Carlo draws are made in blocks of this many sign vectors, so that memory stays flat with many users.
_BLOCK = 2_000

Method = Literal["exact", "monte carlo"]


@dataclass(frozen=True, slots=True)
class SignFlip:
    p_value: float
    # Users whose difference is not 0 (the others flip to themselves and count for nothing).
    users: int
    method: Method
    # The smallest p-value these users could give (2 / 2^users exactly; 1 with no user): at or above α, the
    # test cannot reject whatever the outcomes.
    floor: float
    draws: int | None = None

    def describe(self) -> str:
        how = self.method if self.draws is None else f"{self.method}, {self.draws:,} draws"
        return f"sign-flip test over {self.users} users ({how}) p={self.p_value:.3g}"

    def can_reject(self, alpha: float) -> bool:
        """Whether some outcome of these users could reach `alpha` (below it, the test cannot decide)."""
        return self.floor < alpha


def subset_sum_distribution(values: np.ndarray) -> np.ndarray:
    """P(Σ_{k in S} values_k = s) for s = 0 … Σ values, S a uniformly random subset (each value in with
    probability ½): the distribution of the 2^K sums, one convolution with {0, value} per value."""
    values = np.asarray(values, dtype=np.int64)
    total = int(values.sum())
    distribution = np.zeros(total + 1)
    distribution[0] = 1.0
    reach = 0
    for value in values.tolist():
        reach += value
        shifted = distribution[: reach - value + 1].copy()
        distribution[: reach + 1] *= 0.5
        distribution[value : reach + 1] += 0.5 * shifted
    return distribution


def sign_flip_test(differences: np.ndarray, *, seed: int = 0) -> SignFlip:
    """Two-sided p-value of |Σ D_k| under random signs of the per-user differences."""
    d = np.asarray(differences, dtype=np.float64)
    d = d[d != 0]
    users = int(d.size)
    if users == 0:
        return SignFlip(1.0, 0, "exact", 1.0)
    floor = min(1.0, 2.0 ** (1 - users))
    if np.array_equal(d, np.round(d)):
        return _whole(d.astype(np.int64), floor, seed)
    return _fractional(d, floor, seed)


def _whole(d: np.ndarray, floor: float, seed: int) -> SignFlip:
    users = int(d.size)
    observed = abs(int(d.sum()))
    sizes = np.abs(d)
    total = int(sizes.sum())
    if users * total <= EXACT_CELLS:
        # Σ s_k |D_k| = 2 U − total, U the sum of the |D_k| whose sign is +.
        distribution = subset_sum_distribution(sizes)
        sums = np.abs(2 * np.arange(total + 1) - total)
        return SignFlip(min(1.0, float(distribution[sums >= observed].sum())), users, "exact", floor)
    return _drawn(sizes.astype(np.float64), float(observed), 0.0, floor, seed)


def _fractional(d: np.ndarray, floor: float, seed: int) -> SignFlip:
    users = int(d.size)
    observed = abs(float(d.sum()))
    # Sums equal up to float rounding count as equal: the observed sign vector is always among the extremes.
    tolerance = 1e-9 * max(1.0, float(np.abs(d).sum()))
    if users <= EXACT_USERS:
        codes = np.arange(1 << users, dtype=np.int64)[:, None]
        signs = 1.0 - 2.0 * ((codes >> np.arange(users)) & 1)
        share = float(np.mean(np.abs(signs @ d) >= observed - tolerance))
        return SignFlip(share, users, "exact", floor)
    return _drawn(np.abs(d), observed, tolerance, floor, seed)


def _drawn(sizes: np.ndarray, observed: float, tolerance: float, floor: float, seed: int) -> SignFlip:
    """MONTE_CARLO_DRAWS random sign vectors (seeded), in blocks so that memory stays flat with many users."""
    rng = np.random.default_rng(seed)
    users = int(sizes.size)
    hits = 0
    for start in range(0, MONTE_CARLO_DRAWS, _BLOCK):
        signs = rng.integers(0, 2, size=(min(_BLOCK, MONTE_CARLO_DRAWS - start), users), dtype=np.int8)
        flipped = (2.0 * signs - 1.0) @ sizes
        hits += int(np.count_nonzero(np.abs(flipped) >= observed - tolerance))
    p_value = (1 + hits) / (1 + MONTE_CARLO_DRAWS)
    return SignFlip(p_value, users, "monte carlo", floor, MONTE_CARLO_DRAWS)
