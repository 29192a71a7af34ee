"""Do the intervals cover? A simulation of a per-user benchmark whose pairs are correlated within users.

    python bench/user_coverage.py [--reps 1000] [--users 100] [--seed 0]

Each simulated user has 5–15 pairs (PersonalRewardBench gives 5–15 prior preferences per user) and a
user-level random effect on the judge's correctness: logit P(correct) = μ + σ·z_user, z ~ N(0, 1), the pairs
independent given the user. σ = 0 is the independent-pairs world the pair bootstrap assumes; the larger σ, the
more a user's pairs go right or wrong together. The true accuracy E[expit(μ + σz)] is computed by
Gauss–Hermite quadrature; pair accuracy and user accuracy both estimate it here (the number of pairs of a user
does not depend on their effect).

Per setting and replication: the 95% bootstrap interval of pair accuracy over pairs (prbj.analysis.stats), and
the intervals over users of pair accuracy and of user accuracy that prbj reports (prbj.analysis.clusters.
accuracy_intervals: Korn–Graubard over users); the share of replications whose interval holds the truth is
printed (nominal 0.95). bench/small_users.py does the same with few users and unequal ones.

Then two judges with the same accuracy and judge-specific user effects (logit = μ + σ·z_user + τ·w_judge,user),
so that their disagreements bunch in some users: how often McNemar's test on pairs and Obuchowski's clustered
test reject at α = 0.05 (nominal 0.05), and how often the paired interval of the difference over pairs and over
users (prbj.analysis.clusters.paired_cluster_interval) holds 0.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass

import numpy as np

from prbj.analysis.clusters import (
    PairedClusters,
    accuracy_intervals,
    clustered_mcnemar,
    paired_cluster_interval,
)
from prbj.analysis.mcnemar import mcnemar
from prbj.analysis.paired import paired_difference_ci
from prbj.analysis.stats import BOOTSTRAP_RESAMPLES, CONFIDENCE, bootstrap_ci

PAIRS_PER_USER = (5, 15)
MU = 1.0  # expit(1.0) ≈ 0.73: a judge in the range real ones reach


def expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def true_accuracy(mu: float, sigma: float) -> float:
    """E[expit(μ + σZ)], Z ~ N(0, 1), by Gauss–Hermite quadrature (probabilists' weights)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    return float(np.sum(weights * expit(mu + sigma * nodes)) / math.sqrt(2 * math.pi))


def _covers(interval: tuple[float, float] | tuple[float | None, float | None], value: float) -> bool:
    low, high = interval
    return low is not None and high is not None and low <= value <= high


@dataclass(frozen=True)
class Coverage:
    sigma: float
    pair_bootstrap: float
    cluster_pairs: float
    cluster_users: float


def accuracy_coverage(*, sigma: float, users: int, reps: int, seed: int) -> Coverage:
    truth = true_accuracy(MU, sigma)
    rng = np.random.default_rng(seed)
    hits = np.zeros(3)
    for rep in range(reps):
        sizes = rng.integers(PAIRS_PER_USER[0], PAIRS_PER_USER[1] + 1, size=users)
        correct = rng.binomial(sizes, expit(MU + sigma * rng.standard_normal(users)))
        right = int(correct.sum())
        outcomes = np.r_[np.ones(right), np.zeros(int(sizes.sum()) - right)]
        found = accuracy_intervals(correct, sizes, confidence=CONFIDENCE)
        assert found is not None
        hits += [
            _covers(bootstrap_ci(outcomes, seed=rep), truth),
            _covers(found.pooled, truth),
            _covers(found.mean_of_clusters, truth),
        ]
    share = hits / reps
    return Coverage(sigma, float(share[0]), float(share[1]), float(share[2]))


@dataclass(frozen=True)
class PairedErrors:
    tau: float
    mcnemar_rejects: float
    clustered_rejects: float
    pair_interval_covers: float
    cluster_interval_covers: float


def paired_errors(*, sigma: float, tau: float, users: int, reps: int, seed: int) -> PairedErrors:
    """Two judges of equal accuracy: rejection rates at α = 0.05 and coverage of a zero difference."""
    rng = np.random.default_rng(seed)
    counts = np.zeros(4)
    for rep in range(reps):
        sizes = rng.integers(PAIRS_PER_USER[0], PAIRS_PER_USER[1] + 1, size=users)
        shared = sigma * rng.standard_normal(users)
        labels = np.repeat(np.arange(users), sizes)
        first = rng.uniform(size=labels.size) < expit(MU + shared + tau * rng.standard_normal(users))[labels]
        second = rng.uniform(size=labels.size) < expit(MU + shared + tau * rng.standard_normal(users))[labels]
        a, b = first.astype(np.float64), second.astype(np.float64)
        grouped = PairedClusters.from_pairs(a, b, labels)
        plain = mcnemar(int((b > a).sum()), int((a > b).sum()))
        interval = paired_cluster_interval(grouped, confidence=CONFIDENCE)
        counts += [
            plain.p_value < 0.05,
            clustered_mcnemar(grouped).p_value < 0.05,
            _covers(paired_difference_ci(a, b, seed=rep), 0.0),
            _covers(interval, 0.0),
        ]
    share = counts / reps
    return PairedErrors(tau, *(float(v) for v in share))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    print(
        f"{args.users} users × {PAIRS_PER_USER[0]}–{PAIRS_PER_USER[1]} pairs, {args.reps} replications, "
        f"{BOOTSTRAP_RESAMPLES} resamples; share of 95% intervals that hold the true accuracy"
    )
    print(
        f"{'σ':>5} {'truth':>7} {'pairs: bootstrap over pairs':>28} {'over users':>11} {'users: over users':>18}"
    )
    for sigma in (0.0, 0.5, 1.0, 2.0):
        found = accuracy_coverage(sigma=sigma, users=args.users, reps=args.reps, seed=args.seed)
        print(
            f"{sigma:>5.1f} {true_accuracy(MU, sigma):>7.3f} {found.pair_bootstrap:>28.3f} "
            f"{found.cluster_pairs:>11.3f} {found.cluster_users:>18.3f}"
        )
    print(
        "\nTwo judges of equal accuracy (σ = 1): rejections at α = 0.05, and 95% intervals of the difference "
        "holding 0"
    )
    print(f"{'τ':>5} {'McNemar':>8} {'clustered':>10} {'CI over pairs':>14} {'CI over users':>14}")
    for tau in (0.0, 1.0, 2.0):
        errors = paired_errors(sigma=1.0, tau=tau, users=args.users, reps=args.reps, seed=args.seed)
        print(
            f"{tau:>5.1f} {errors.mcnemar_rejects:>8.3f} {errors.clustered_rejects:>10.3f} "
            f"{errors.pair_interval_covers:>14.3f} {errors.cluster_interval_covers:>14.3f}"
        )
    print(f"\n{time.perf_counter() - started:.1f} s; load average {', '.join(f'{v:.1f}' for v in _load())}")


def _load() -> tuple[float, float, float]:
    try:
        import os

        return os.getloadavg()
    except OSError:
        return (math.nan, math.nan, math.nan)


if __name__ == "__main__":
    main()
