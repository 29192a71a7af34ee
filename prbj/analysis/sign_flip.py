"""A paired randomization test over clusters (users): were the per-user changes between two runs larger than
random signs would make them?

Under the null hypothesis each user's change d_u is as likely to have come out with the other sign, so the
statistic |Σ d_u| is referred to its distribution over the 2^K sign vectors: enumerated exactly for up to
EXACT_UP_TO users, drawn at random (seeded, with the +1 correction so a p-value is never 0) above. It needs no
model of how a user's pairs are correlated and holds its size with few users; with K users the smallest p-value
it can give is 2 / 2^K, so it can reject at 5% from 6 users.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# 2^16 = 65,536 sign vectors: enumerated exactly, at once.
EXACT_UP_TO = 16
RANDOM_FLIPS = 20_000
_BLOCK = 1 << 12


@dataclass(frozen=True, slots=True)
class SignFlip:
    p_value: float
    users: int
    exact: bool

    def describe(self) -> str:
        how = "exact" if self.exact else f"{RANDOM_FLIPS:,} random flips"
        return f"sign-flip test over {self.users} users ({how}) p={self.p_value:.3g}"


def sign_flip_test(differences: np.ndarray, *, seed: int = 0) -> SignFlip:
    """Two-sided p-value of Σ differences against random signs per element (a user's change)."""
    d = np.asarray(differences, dtype=np.float64)
    k = int(d.size)
    observed = abs(float(d.sum()))
    if k == 0 or not np.any(d):
        return SignFlip(1.0, k, True)
    # Sums equal up to float rounding count as equal: the observed sign vector is always among the extremes.
    tolerance = 1e-9 * max(1.0, float(np.abs(d).sum()))
    if k <= EXACT_UP_TO:
        codes = np.arange(1 << k, dtype=np.int64)[:, None]
        signs = 1.0 - 2.0 * ((codes >> np.arange(k)) & 1)
        totals = np.abs(signs @ d)
        return SignFlip(float(np.mean(totals >= observed - tolerance)), k, True)
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, RANDOM_FLIPS, _BLOCK):
        signs = rng.choice((-1.0, 1.0), size=(min(_BLOCK, RANDOM_FLIPS - start), k))
        extreme += int(np.sum(np.abs(signs @ d) >= observed - tolerance))
    return SignFlip((extreme + 1) / (RANDOM_FLIPS + 1), k, False)
