"""Intervals of a proportion that hold with few units (users, or pairs where each user has one): the exact
Clopper–Pearson interval, read at a real-valued number of trials, and Korn and Graubard's (1998) interval on the
effective size, which carries a clustered estimate's variance into Clopper–Pearson's shape.

Why not the bootstrap: a percentile bootstrap over K units cannot hold with few of them (its resamples see only
what the K units show: one user at 80% gives [0.80, 0.80], every user right gives [1.0, 1.0]), and
bench/small_users.py measures 0.43–0.93 coverage under 20 unequal users (0.90–0.94 at 50). Where users repeat,
prbj.analysis.clusters uses Korn–Graubard at any number of users, and at 0% or 100% (no spread to measure)
Clopper–Pearson on the effective size at the largest design effect the units allow (kish_size). For independent
outcomes (pairs, each its own user) prbj.analysis.stats.accuracy_interval uses Clopper–Pearson under
SMALL_SAMPLE of them and at 0% or 100%, the bootstrap otherwise; prbj.analysis.mcnemar switches from the exact
sign-flip test to Obuchowski's chi-square at SMALL_SAMPLE users.

scipy.special is imported where used: most runs (large groups, no figure at 0% or 100%) never need it.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

# Below this many independent outcomes an interval is Clopper–Pearson's, not the percentile bootstrap's; below
# this many users the paired test is the exact sign-flip test, not Obuchowski's chi-square (which Yang, Sun and
# Hardin 2010 find holds its size from about 50 clusters).
SMALL_SAMPLE = 50

Interval = tuple[float, float]


def _tail(confidence: float) -> float:
    return (1.0 - confidence) / 2.0


def clopper_pearson(successes: float, trials: float, confidence: float) -> Interval:
    """The two-sided Clopper–Pearson interval of a proportion, at a real-valued number of trials (an effective
    size): the beta quantiles, in closed form at 0 and at `trials` successes."""
    tail = _tail(confidence)
    if trials <= 0:
        return (0.0, 1.0)
    successes = min(max(successes, 0.0), trials)
    if successes == 0:
        return (0.0, 1.0 - tail ** (1.0 / trials))
    if successes == trials:
        return (tail ** (1.0 / trials), 1.0)
    from scipy.special import betaincinv

    low = float(betaincinv(successes, trials - successes + 1.0, tail))
    high = float(betaincinv(successes + 1.0, trials - successes, 1.0 - tail))
    return (low, high)


def t_quantile(df: float, p: float) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom."""
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def kish_size(weights: np.ndarray) -> float:
    """(Σw)² / Σw²: how many independent units a weighted mean of these units is worth when each unit's outcomes
    all move together (the largest design effect their sizes allow). K for equal weights."""
    w = np.asarray(weights, dtype=np.float64)
    squares = float(np.sum(w**2))
    return float(np.sum(w)) ** 2 / squares if squares > 0 else 0.0


def at_the_edge(estimate: float, effective: float, confidence: float) -> Interval | None:
    """Clopper–Pearson on the effective size for an estimate of exactly 0 or 1 (None otherwise): nothing varies
    to measure a spread from, so the interval uses the worst design effect instead. For a mean of K users'
    accuracies it is exact: P(every user at 100%) ≤ Π P(user k at 100%) ≤ μ^K."""
    if estimate >= 1.0:
        return clopper_pearson(effective, effective, confidence)
    if estimate <= 0.0:
        return clopper_pearson(0.0, effective, confidence)
    return None


def korn_graubard(
    estimate: float, variance: float, *, units: int, most: float, confidence: float
) -> Interval:
    """Korn and Graubard's (1998) interval for a proportion estimated from `units` clusters with this variance:
    Clopper–Pearson at the effective size n = p(1 − p) / variance (at most `most`, the size were every outcome
    independent), shrunk by (z / t_(units−1))² so that a variance estimated from few units widens it as
    Student's t would. For 0 < estimate < 1."""
    effective = most if variance <= 0 else min(estimate * (1.0 - estimate) / variance, most)
    level = 1.0 - _tail(confidence)
    shrink = (NormalDist().inv_cdf(level) / t_quantile(units - 1, level)) ** 2
    trials = effective * shrink
    return clopper_pearson(estimate * trials, trials, confidence)
