"""How many pairs it takes to tell two judges apart, from how often they disagree.

Two judges compared on the same pairs differ only on the discordant pairs (one right, the other wrong).
With ψ the share of discordant pairs and δ the true accuracy difference, McNemar's test at level α reaches
power 1 − β with (Connor, 1987)

    n = ( z_{1−α/2} · √ψ + z_{1−β} · √(ψ − δ²) )² / δ²

pairs. The minimum detectable difference at a given n is the δ that solves the same equation.
"""

from __future__ import annotations

import math
from statistics import NormalDist

ALPHA = 0.05
POWER = 0.80


def _z(p: float) -> float:
    return NormalDist().inv_cdf(p)


def pairs_needed_exact(
    discordance: float, delta: float, *, alpha: float = ALPHA, power: float = POWER
) -> float:
    """The formula above as a real number; inf when δ cannot happen with this discordance (|δ| > ψ)."""
    delta = abs(delta)
    if delta <= 0:
        return math.inf
    if discordance < delta or discordance <= 0:
        return math.inf
    root = _z(1 - alpha / 2) * math.sqrt(discordance) + _z(power) * math.sqrt(discordance - delta**2)
    return root**2 / delta**2


def pairs_needed(
    discordance: float, delta: float, *, alpha: float = ALPHA, power: float = POWER
) -> int | None:
    """Pairs needed (rounded up) to detect δ; None when no number of pairs can (|δ| > ψ)."""
    value = pairs_needed_exact(discordance, delta, alpha=alpha, power=power)
    return None if math.isinf(value) else math.ceil(value)


def min_detectable_difference(
    discordance: float, n: int, *, alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """The smallest accuracy difference detectable with n pairs; None when even δ = ψ needs more pairs."""
    if n <= 0 or discordance <= 0:
        return None
    if pairs_needed_exact(discordance, discordance, alpha=alpha, power=power) > n:
        return None
    low, high = 1e-9, discordance
    # pairs_needed falls as δ grows: bisect for the δ where it equals n.
    for _ in range(100):
        mid = (low + high) / 2
        if pairs_needed_exact(discordance, mid, alpha=alpha, power=power) > n:
            low = mid
        else:
            high = mid
    return high
