"""Do the per-user figures keep their promise with few users? Before (the methods prbj used until issue 43) and
after (what it uses now), side by side in one run, on simulated per-user benchmarks.

    python bench/small_users.py            # the full tables (1,000 runs per cell; about an hour on 2 cores)
    python bench/small_users.py --quick    # the same tables from 150 runs per cell and fewer cells (minutes)
    python bench/small_users.py --only 1,3 --reps 400

The generator (World): K users, each with m pairs drawn from a truncated power law P(m) ∝ m^−1.5 on 1…50 (heavy
tailed: most users have one to five pairs, a few have dozens; mean 5.4), and a per-user accuracy
p = expit(μ + σ·z). z is N(0, 1), or (`link` > 0) correlated with the user's size: z = link·s + √(1 − link²)·e,
s the standardised log size, so that users with many pairs are judged better and pair accuracy (pooled over pairs)
and user accuracy (the mean over users) estimate different things. Truths are computed from 2,000,000 users.
K = 3, 5, 10, 20, 50, 200 (and 6 for the tests, the fewest the sign-flip test can reject with).

Tables, each a share of runs (nominal level in brackets):
1. coverage of the 95% interval of user accuracy and of pair accuracy (0.95); before: the percentile cluster
   bootstrap (a zero-width interval when every user is at 100%); after: prbj.analysis.clusters.accuracy_intervals.
2. two judges of equal accuracy with judge-specific user effects τ: how often the 95% interval of their
   accuracy difference excludes 0 (0.05); before: the percentile cluster bootstrap; after: paired_cluster_interval.
3. size (equal judges, 0.05) and power (the second judge worse by 1 on the logit scale) of the paired test at
   α = 0.05; before: Obuchowski's clustered McNemar with its chi-square reference at every K; after:
   prbj.analysis.mcnemar.clustered_test (the exact sign-flip test under 50 users).
4. calibration with per-user offsets (each user's verdicts right more or less often than their confidence says,
   logit offset N(0, 0.8²)): coverage of the ECE interval (0.95), and Learn-then-Test's guarantee (target error
   0.10, δ = 0.05): the share of runs whose threshold's true error exceeds the target (at most 0.05), with the
   mean share of judgments kept; before: judgments resampled and tested as independent; after: users.
6. `prbj power`: from a pilot run of K users, the users it says a new study needs to detect the pilot's true
   difference with 80% power; then new studies of that many users are simulated and tested as prbj would: the
   median power they reach, and the share of pilots whose plan reaches 0.80. Before: pairs needed × the pilot's
   design effect (floored at 1) ÷ the pilot's pairs per user; after: prbj's users needed (the upper 80% of the
   design effect over user resamples).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from prbj.analysis.calibration import Resamples, calibrate
from prbj.analysis.clusters import (
    PairedClusters,
    accuracy_intervals,
    cluster_intervals,
    clustered_mcnemar,
    design_effect,
    paired_cluster_bootstrap,
    paired_cluster_interval,
    upper_design_effect,
)
from prbj.analysis.mcnemar import McNemarResult, clustered_test
from prbj.analysis.power import pairs_needed_exact, users_needed
from prbj.analysis.selective import learn_then_test
from prbj.analysis.stats import BOOTSTRAP_RESAMPLES, CONFIDENCE

SIZES = np.arange(1, 51)
SIZE_SHARES = SIZES**-1.5 / np.sum(SIZES**-1.5)
# log m's mean and spread under SIZE_SHARES, to standardise it.
_LOG_MEAN = float(np.sum(SIZE_SHARES * np.log(SIZES)))
_LOG_SD = float(np.sqrt(np.sum(SIZE_SHARES * (np.log(SIZES) - _LOG_MEAN) ** 2)))
ALPHA = 0.05
USER_COUNTS = (3, 5, 10, 20, 50, 200)


def expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


@dataclass(frozen=True)
class World:
    """A population of users: accuracy expit(μ + σ z), z correlated `link` with log size."""

    mu: float
    sigma: float = 1.0
    link: float = 0.0

    @property
    def name(self) -> str:
        return f"acc≈{self.truth()[0]:.2f}{', size-linked' if self.link else ''}"

    def sizes(self, rng: np.random.Generator, k: int) -> np.ndarray:
        return rng.choice(SIZES, size=k, p=SIZE_SHARES)

    def effects(self, rng: np.random.Generator, sizes: np.ndarray) -> np.ndarray:
        noise = rng.standard_normal(sizes.size)
        if not self.link:
            return noise
        standard = (np.log(sizes) - _LOG_MEAN) / _LOG_SD
        return self.link * standard + math.sqrt(1 - self.link**2) * noise

    def users(self, rng: np.random.Generator, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(correct, decided) per user."""
        sizes = self.sizes(rng, k)
        accuracy = expit(self.mu + self.sigma * self.effects(rng, sizes))
        return rng.binomial(sizes, accuracy), sizes

    @cache  # noqa: B019 - a frozen dataclass: one truth per world for the whole run
    def truth(self) -> tuple[float, float]:
        """(user accuracy, pair accuracy) of the population."""
        rng = np.random.default_rng(12345)
        sizes = self.sizes(rng, 2_000_000)
        accuracy = expit(self.mu + self.sigma * self.effects(rng, sizes))
        return float(accuracy.mean()), float(np.sum(sizes * accuracy) / np.sum(sizes))


WORLDS = (World(1.0), World(1.0, link=0.6), World(2.5), World(2.5, link=0.6))


def _covers(interval: Sequence[float | None] | None, value: float) -> bool:
    if interval is None or interval[0] is None or interval[1] is None:
        return False
    return bool(interval[0] <= value <= interval[1])


def _excludes_zero(interval: Sequence[float]) -> bool:
    return not interval[0] <= 0.0 <= interval[1]


def _print_table(title: str, header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    print(f"\n{title}")
    widths = [max(len(h), 7) for h in header]
    print("  " + " ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  " + " ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)), flush=True)


# --- 1. user and pair accuracy -----------------------------------------------------------------------------


def accuracy_coverage(world: World, k: int, reps: int, seed: int) -> dict[str, float]:
    """Shares of runs whose interval holds the truth, before and after; and of zero-width intervals before."""
    user_truth, pair_truth = world.truth()
    rng = np.random.default_rng(seed)
    hits = np.zeros(5)
    for rep in range(reps):
        correct, decided = world.users(rng, k)
        before = cluster_intervals(
            correct, decided, seed=rep, resamples=BOOTSTRAP_RESAMPLES, confidence=CONFIDENCE
        )
        after = accuracy_intervals(correct, decided, confidence=CONFIDENCE)
        assert before is not None and after is not None
        hits += [
            _covers(before.mean_of_clusters, user_truth),
            _covers(before.pooled, pair_truth),
            before.mean_of_clusters[0] == before.mean_of_clusters[1],
            _covers(after.mean_of_clusters, user_truth),
            _covers(after.pooled, pair_truth),
        ]
    share = hits / reps
    keys = ("users before", "pairs before", "zero width", "users after", "pairs after")
    return dict(zip(keys, share.tolist(), strict=True))


def table_accuracy(reps: int, counts: Sequence[int], worlds: Sequence[World], seed: int) -> None:
    rows = []
    for world in worlds:
        for k in counts:
            found = accuracy_coverage(world, k, reps, seed)
            rows.append([world.name, str(k), *(f"{v:.3f}" for v in found.values())])
    _print_table(
        "1. 95% intervals holding the truth (0.95): user accuracy and pair accuracy, before and after",
        ["world", "users", "users before", "pairs before", "zero width", "users after", "pairs after"],
        rows,
    )


# --- 2 and 3. two judges, paired -----------------------------------------------------------------------------


def two_judges(
    rng: np.random.Generator, k: int, *, tau: float, shift: float, world: World = WORLDS[0]
) -> PairedClusters:
    """Two judges on the same users' pairs: a shared user effect, a judge-specific one τ·w, the second judge
    `shift` lower on the logit scale."""
    sizes = world.sizes(rng, k)
    shared = world.mu + world.sigma * world.effects(rng, sizes)
    labels = np.repeat(np.arange(k), sizes)
    first = rng.uniform(size=labels.size) < expit(shared + tau * rng.standard_normal(k))[labels]
    second = rng.uniform(size=labels.size) < expit(shared - shift + tau * rng.standard_normal(k))[labels]
    return PairedClusters.from_pairs(first.astype(np.float64), second.astype(np.float64), labels)


def paired_errors(k: int, tau: float, shift: float, reps: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    counts = np.zeros(4)
    for rep in range(reps):
        clusters = two_judges(rng, k, tau=tau, shift=shift)
        before = paired_cluster_bootstrap(
            clusters, seed=rep, resamples=BOOTSTRAP_RESAMPLES, confidence=CONFIDENCE
        )
        after = paired_cluster_interval(clusters, confidence=CONFIDENCE)
        counts += [
            _excludes_zero(before),
            _excludes_zero(after),
            clustered_mcnemar(clusters).p_value < ALPHA,
            _test_now(clusters, rep).p_value < ALPHA,
        ]
    share = counts / reps
    keys = ("CI before", "CI after", "test before", "test after")
    return dict(zip(keys, share.tolist(), strict=True))


def _test_now(clusters: PairedClusters, seed: int) -> McNemarResult:
    """prbj's paired test over users on these per-user counts (pairs rebuilt: within a user only the counts
    matter)."""
    first, second, labels = _pairs(clusters)
    return clustered_test(first, second, labels, seed=seed)


def _pairs(clusters: PairedClusters) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-pair 0/1 outcomes with these per-user counts: both right, first only, second only, neither."""
    firsts, seconds, users = [], [], []
    for user, (a, b, discordant, n) in enumerate(
        zip(clusters.first, clusters.second, clusters.discordant, clusters.n, strict=True)
    ):
        first_only = (discordant + a - b) // 2
        second_only = discordant - first_only
        both = a - first_only
        neither = n - both - first_only - second_only
        firsts += [1] * both + [1] * first_only + [0] * second_only + [0] * neither
        seconds += [1] * both + [0] * first_only + [1] * second_only + [0] * neither
        users += [user] * n
    return np.array(firsts, float), np.array(seconds, float), np.array(users)


def table_paired(reps: int, counts: Sequence[int], seed: int) -> None:
    rows = []
    for tau in (0.0, 1.0):
        for k in counts:
            found = paired_errors(k, tau, 0.0, reps, seed)
            rows.append([f"τ={tau:g}", str(k), *(f"{v:.3f}" for v in found.values())])
    _print_table(
        "2-3. equal judges: the 95% interval of the difference excludes 0 (0.05); the test rejects at "
        "α = 0.05 (size, 0.05)",
        ["null", "users", "CI before", "CI after", "test before", "test after"],
        rows,
    )
    rows = []
    for k in counts:
        found = paired_errors(k, 1.0, 1.0, reps, seed + 1)
        rows.append(["shift 1", str(k), f"{found['test before']:.3f}", f"{found['test after']:.3f}"])
    _print_table(
        "3. power at α = 0.05: the second judge 1 lower on the logit scale (τ = 1)",
        ["alt", "users", "before", "after"],
        rows,
    )


# --- 4. calibration and Learn-then-Test ----------------------------------------------------------------------

# Per-user offsets on the logit of being right: moderate for the ECE, strong for Learn-then-Test (whose test is
# conservative enough that only strong clustering breaks it).
ECE_OFFSET, LTT_OFFSET = 0.8, 2.0
TARGET, DELTA = 0.15, 0.05


def _judged(rng: np.random.Generator, k: int, offset: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(confidence, correct, user) of one run: confidences 0.5 + 0.5·Beta(2, 1.2), right with probability
    expit(logit(confidence − 0.03) + u_user), u ~ N(0, offset²)."""
    sizes = WORLDS[0].sizes(rng, k)
    users = np.repeat(np.arange(k), sizes)
    confidence = 0.5 + 0.5 * rng.beta(2.0, 1.2, users.size)
    right = rng.uniform(size=users.size) < _right(confidence, rng.normal(0.0, offset, k)[users])
    return confidence, right.astype(np.float64), users


def _right(confidence: np.ndarray, offset: np.ndarray) -> np.ndarray:
    base = np.clip(confidence - 0.03, 1e-6, 1 - 1e-6)
    return expit(np.log(base / (1 - base)) + offset)


@cache
def _population(offset: float) -> tuple[np.ndarray, np.ndarray]:
    """Confidences and true probabilities of being right of 4,000,000 judgments (users one pair each: the
    offsets are independent of the confidences, so pair weighting changes nothing)."""
    rng = np.random.default_rng(99)
    confidence = 0.5 + 0.5 * rng.beta(2.0, 1.2, 4_000_000)
    return confidence, _right(confidence, rng.normal(0.0, offset, confidence.size))


@cache
def true_ece(offset: float = ECE_OFFSET) -> float:
    from prbj.analysis.calibration import ECE_BINS, bin_of

    confidence, right = _population(offset)
    gaps = np.bincount(bin_of(confidence), right - confidence, minlength=ECE_BINS) / confidence.size
    return float(np.abs(gaps).sum())


def true_error_above(threshold: float, offset: float = LTT_OFFSET) -> float:
    confidence, right = _population(offset)
    kept = confidence >= threshold
    return float(1.0 - right[kept].mean()) if kept.any() else 0.0


def calibration_errors(k: int, reps: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    counts = np.zeros(6)
    truth = true_ece()
    for rep in range(reps):
        confidence, correct, users = _judged(rng, k, ECE_OFFSET)
        p_chosen = confidence  # only the figures of the verdict's confidence are checked here
        figures = [
            calibrate(confidence, correct, p_chosen, resamples=Resamples(rep), users=labels)
            for labels in (None, users)
        ]
        counts[:2] += [_covers((f["ece_ci_low"], f["ece_ci_high"]), truth) for f in figures]
        confidence, correct, users = _judged(rng, k, LTT_OFFSET)
        for index, labels in enumerate((None, users)):
            found = learn_then_test(confidence, correct, target_error=TARGET, delta=DELTA, users=labels)
            if found.threshold is not None:
                counts[2 + index] += true_error_above(found.threshold) > TARGET
                counts[4 + index] += found.coverage
    share = counts / reps
    keys = ("ECE before", "ECE after", "LTT broken before", "LTT broken after", "kept before", "kept after")
    return dict(zip(keys, share.tolist(), strict=True))


def table_calibration(reps: int, counts: Sequence[int], seed: int) -> None:
    rows = []
    for k in counts:
        found = calibration_errors(k, reps, seed)
        rows.append([str(k), *(f"{v:.3f}" for v in found.values())])
    _print_table(
        f"4. per-user offsets N(0, {ECE_OFFSET}²): the ECE interval holds the true ECE {true_ece():.3f} (0.95);"
        f" offsets N(0, {LTT_OFFSET}²): Learn-then-Test's threshold has a true error above {TARGET} (at most "
        f"{DELTA}); the mean share of judgments kept",
        [
            "users",
            "ECE before",
            "ECE after",
            "LTT broken before",
            "LTT broken after",
            "kept before",
            "kept after",
        ],
        rows,
    )


# --- 6. power in users -------------------------------------------------------------------------------------

POWER_SHIFT = 0.5


@cache
def true_difference(shift: float, tau: float) -> float:
    rng = np.random.default_rng(7)
    world = WORLDS[0]
    sizes = world.sizes(rng, 1_000_000)
    shared = world.mu + world.sigma * world.effects(rng, sizes)
    first = expit(shared + tau * rng.standard_normal(sizes.size))
    second = expit(shared - shift + tau * rng.standard_normal(sizes.size))
    return float(np.sum(sizes * (first - second)) / np.sum(sizes))


def users_needed_before(clusters: PairedClusters, delta: float) -> int | None:
    """What `prbj power` said before: pairs needed × the run's design effect (never below 1), in users at the
    run's pairs per user."""
    n = float(clusters.n.sum())
    discordance = float(clusters.discordant.sum()) / n
    pairs = pairs_needed_exact(discordance, delta) * design_effect(clusters)
    return None if math.isinf(pairs) else math.ceil(pairs / (n / clusters.count))


def users_needed_after(clusters: PairedClusters, delta: float, seed: int) -> int | None:
    """What `prbj power` says now (prbj.analysis.compare.power_rows does the same from a run)."""
    n = float(clusters.n.sum())
    return users_needed(
        float(clusters.discordant.sum()) / n,
        delta,
        design_effect=upper_design_effect(clusters, seed=seed, resamples=BOOTSTRAP_RESAMPLES),
        pairs_per_user=n / clusters.count,
    )


def achieved_power(users: int, *, tau: float, studies: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for study in range(studies):
        clusters = two_judges(rng, users, tau=tau, shift=POWER_SHIFT)
        hits += _test_now(clusters, study).p_value < ALPHA
    return hits / studies


def power_plans(k: int, reps: int, studies: int, seed: int) -> dict[str, float]:
    tau = 1.0
    delta = true_difference(POWER_SHIFT, tau)
    rng = np.random.default_rng(seed)
    reached: dict[str, list[float]] = {"before": [], "after": []}
    planned: dict[str, list[int]] = {"before": [], "after": []}
    for rep in range(reps):
        pilot = two_judges(rng, k, tau=tau, shift=POWER_SHIFT)
        plans = {
            "before": users_needed_before(pilot, delta),
            "after": users_needed_after(pilot, delta, rep),
        }
        for name, users in plans.items():
            if users is None:
                reached[name].append(0.0)
                continue
            planned[name].append(users)
            reached[name].append(
                achieved_power(min(users, 5000), tau=tau, studies=studies, seed=seed + 1000 * rep)
            )
    out: dict[str, float] = {}
    for name in ("before", "after"):
        out[f"median users {name}"] = float(np.median(planned[name])) if planned[name] else math.nan
        out[f"median power {name}"] = float(np.median(reached[name]))
        out[f"≥ 0.80 {name}"] = float(np.mean(np.array(reached[name]) >= 0.8 - 1e-9))
    return out


def table_power(reps: int, studies: int, counts: Sequence[int], seed: int) -> None:
    rows = []
    for k in counts:
        found = power_plans(k, reps, studies, seed)
        rows.append([str(k), *(f"{v:.3f}" if v < 1.5 else f"{v:.0f}" for v in found.values())])
    delta = true_difference(POWER_SHIFT, 1.0)
    _print_table(
        f"6. users planned from a pilot to detect its true difference {delta:.3f} with power 0.80, and the "
        f"power new studies of that many users reach ({studies} studies per plan)",
        [
            "pilot users",
            "users before",
            "power before",
            "≥0.80 before",
            "users after",
            "power after",
            "≥0.80 after",
        ],
        rows,
    )


# --- main -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    reps: int
    counts: tuple[int, ...]
    worlds: tuple[World, ...]
    calibration_counts: tuple[int, ...]
    power_reps: int
    power_studies: int
    power_counts: tuple[int, ...]


FULL = Plan(1000, USER_COUNTS, WORLDS, (10, 20, 50, 200), 100, 200, (20, 50, 200))
QUICK = Plan(150, (3, 5, 10, 50), (WORLDS[0], WORLDS[3]), (20, 200), 20, 60, (50,))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and cells: minutes, not an hour")
    parser.add_argument("--reps", type=int, help="runs per cell (default 1000, 150 with --quick)")
    parser.add_argument("--only", default="1,2,4,6", help="tables to print: any of 1,2,4,6 (2 holds 3)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    reps = args.reps or plan.reps
    wanted = {part.strip() for part in args.only.split(",")}
    started = time.perf_counter()
    print(
        f"users with 1–50 pairs (P(m) ∝ m^-1.5, mean {float(np.sum(SIZES * SIZE_SHARES)):.1f}), {reps} runs "
        f"per cell, {BOOTSTRAP_RESAMPLES} resamples"
    )
    steps: list[tuple[str, Callable[[], None]]] = [
        ("1", lambda: table_accuracy(reps, plan.counts, plan.worlds, args.seed)),
        ("2", lambda: table_paired(reps, plan.counts, args.seed)),
        ("4", lambda: table_calibration(max(reps // 2, 50), plan.calibration_counts, args.seed)),
        ("6", lambda: table_power(plan.power_reps, plan.power_studies, plan.power_counts, args.seed)),
    ]
    for key, step in steps:
        if key in wanted:
            step()
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    print(f"\n{time.perf_counter() - started:.0f} s; load average {', '.join(f'{v:.1f}' for v in load)}")


if __name__ == "__main__":
    main()
