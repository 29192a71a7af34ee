"""How many pairs it takes to tell two judges apart, from how often they disagree.

Two judges compared on the same pairs differ only on the discordant pairs (one right, the other wrong).
With ψ the share of discordant pairs and δ the true accuracy difference, McNemar's test at level α reaches
power 1 − β with (Connor, 1987)

    n = ( z_{1−α/2} · √ψ + z_{1−β} · √(ψ − δ²) )² / δ²

pairs. The minimum detectable difference at a given n is the δ that solves the same equation.

Where users repeat, a new study is planned in users (`users_needed`): the pairs above times the design effect
(how much a user's pairs moving together inflate the variance of the difference), divided by the pairs a user
brings, with Student's t over users in place of the normal quantiles (the test is over users, and a study of
few users has few degrees of freedom). The design effect is the upper 80% of its values over user resamples of
the run (prbj.analysis.clusters.upper_design_effect): the point value is an estimate from one run, and half the
studies planned on it fall short. Assumed: the new users are drawn like the run's users, bring as many pairs on
average, and the judges disagree on them as on these.
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


def users_needed(
    discordance: float,
    delta: float,
    *,
    design_effect: float,
    pairs_per_user: float,
    alpha: float = ALPHA,
    power: float = POWER,
) -> int | None:
    """Users a study needs to detect δ (see the module docstring); None when no number of users can."""
    from prbj.analysis.small_samples import t_quantile

    delta = abs(delta)
    if delta <= 0 or discordance < delta or pairs_per_user <= 0:
        return None

    def needed(users: int) -> int:
        """Users needed were the test's degrees of freedom those of `users` users."""
        df = max(users - 1, 1)
        spread = math.sqrt(discordance - delta**2)
        root = t_quantile(df, 1 - alpha / 2) * math.sqrt(discordance) + t_quantile(df, power) * spread
        return max(2, math.ceil(root**2 / delta**2 * design_effect / pairs_per_user))

    # needed() falls as users grow: the smallest count that needs no more than itself, between the normal
    # approximation's count (a lower bound) and what t at that count asks.
    normal = pairs_needed_exact(discordance, delta, alpha=alpha, power=power) * design_effect
    low = max(2, math.ceil(normal / pairs_per_user))
    high = max(low, needed(low))
    while low < high:
        middle = (low + high) // 2
        if needed(middle) <= middle:
            high = middle
        else:
            low = middle + 1
    return low


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
