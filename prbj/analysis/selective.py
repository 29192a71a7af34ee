"""Selective judging with a guarantee: the lowest confidence threshold whose error among the verdicts it keeps
is at most a target α with probability at least 1 − δ (`prbj calibrate`), and what a threshold then does on
other judgments (`prbj judge --selective`).

The procedure is Learn-then-Test (Angelopoulos et al. 2021) with fixed-sequence testing:

1. Candidate thresholds are confidences of the calibration judgments, from the highest down: the first that
   keeps at least n₀ judgments, then the first that keeps at least each multiple of s above n₀ (s = 1% of the
   judgments, so that the sequence has no more than about a hundred places to stop by chance), then the
   lowest, which keeps them all. A threshold
   keeps every judgment at least as confident, ties included. Where the sequence starts trades two risks:
   started early, a single unlucky error among the surest verdicts ends it at once; started late, its first
   threshold may already keep more errors than the target allows (on 150 judgments, a start at 76 kept missed
   51 surest verdicts that were all right). n₀ is picked among a few counts from n_min = ⌈log δ / log(1 − α)⌉
   (the fewest at which no error at all could pass) to n_half (the fewest at which an error of half the target
   could): the one under which the threshold would keep the most judgments on average if every verdict were
   right with the probability its confidence states (the latest among equals). So the sequence depends on
   the number of judgments and their confidences only, never on which verdicts were right.
2. Each candidate λ tests H₀: "the error among verdicts with confidence ≥ λ exceeds α" with the exact binomial
   p-value P(Binomial(n_λ, α) ≤ errors_λ); H₀ is rejected when the p-value is at most δ.
3. Going down the sequence, the threshold is the last candidate rejected before the first one that is not:
   the family-wise error of the whole sequence is at most δ, so the error of the threshold picked exceeds α
   with probability at most δ. Its reported bound is the one-sided (1 − δ) Clopper–Pearson upper limit of the
   error among the verdicts it keeps, which is at most α exactly when step 2 rejects.

The guarantee assumes that the calibration judgments and the judgments the threshold is applied to are
exchangeable (drawn alike from the same pairs and judge).

When users repeat (a user with several judgments), a user's verdicts go right or wrong together and the binomial
p-value overstates what the kept verdicts show (bench/small_users.py: the guarantee broken in 6–7% of runs
against δ = 5%). Each candidate is then tested on its effective size: kept and errors divided by the design
effect 1 + (m̃ − 1) ρ, m̃ = Σ m_k² / Σ m_k over the kept verdicts' users (m_k: user k's kept verdicts) and ρ the
correlation of errors within users over all calibration judgments (the ANOVA estimator, within [0, 1]); the
binomial p-value and the Clopper–Pearson bound are read at these real-valued counts.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from prbj.analysis.small_samples import clopper_pearson

# Candidate thresholds closer than this share of the judgments are merged (see the module docstring).
MIN_STEP_SHARE = 0.01


def minimum_kept(target_error: float, delta: float) -> int:
    """The fewest kept verdicts with which zero errors could pass the test at level δ."""
    return max(1, math.ceil(math.log(delta) / math.log(1.0 - target_error)))


def half_target_kept(n: int, target_error: float, delta: float) -> int:
    """n_half: the fewest kept verdicts with which an error of half the target passes, else the fewest with
    which none does (see the module docstring)."""
    from scipy.stats import binom

    smallest = minimum_kept(target_error, delta)
    counts = np.arange(smallest, n + 1)
    passes = binom.cdf(np.floor(counts * target_error / 2), counts, target_error) <= delta
    return int(counts[np.argmax(passes)]) if passes.any() else smallest


# How many starts between n_min and n_half are weighed (geometrically spaced, both ends included).
START_OPTIONS = 6
# Below this probability an error count is dropped from the running distribution (keeps the arrays short).
_NEGLIGIBLE = 1e-12


def passing_errors(kept: np.ndarray, target_error: float, delta: float) -> np.ndarray:
    """The most errors among `kept` verdicts that still pass the test (−1 where none do)."""
    from scipy.stats import binom

    kept = np.asarray(kept, dtype=np.int64)
    first_at_delta = binom.ppf(delta, kept, target_error).astype(np.int64)
    return np.where(
        binom.cdf(first_at_delta, kept, target_error) <= delta, first_at_delta, first_at_delta - 1
    )


@dataclass(frozen=True)
class _Blocks:
    """Candidates in sequence, each with the most errors that pass its test and the distribution of the errors
    among the judgments it adds to the one before (binomial at the confidences' mean error: the model under
    which starts are compared)."""

    added: np.ndarray
    limits: np.ndarray
    steps: list[np.ndarray]

    @staticmethod
    def of(kept: np.ndarray, before: int, missed: np.ndarray, limits: np.ndarray) -> _Blocks:
        """`kept`: the candidates' kept counts, following one that kept `before`; `missed` and `limits`: the
        expected errors among the k surest and the most errors that pass among k, for every k (index k)."""
        added = np.diff(np.r_[before, kept])
        rates = np.clip(np.diff(missed[np.r_[before, kept]]) / np.maximum(added, 1), 0.0, 1.0)
        table = _binomial_rows(added, rates)
        steps = [row[: size + 1] for row, size in zip(table, added, strict=True)]
        return _Blocks(added, limits[kept], steps)


def _binomial_rows(sizes: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """P(Binomial(size, rate) = k) for k = 0 … the largest size, one row per (size, rate): scipy's special
    functions, whose calls cost microseconds where scipy.stats' cost a millisecond."""
    from scipy.special import gammaln, xlog1py, xlogy

    k = np.arange(int(sizes.max()) + 1 if sizes.size else 1)[None, :]
    size, rate = sizes[:, None].astype(np.float64), rates[:, None]
    inside = k <= size
    rest = np.where(inside, size - k, 0.0)
    log = gammaln(size + 1) - gammaln(k + 1) - gammaln(rest + 1) + xlogy(k, rate) + xlog1py(rest, -rate)
    return np.where(inside, np.exp(log), 0.0)


def _forward(blocks: _Blocks) -> tuple[float, np.ndarray, int]:
    """Through the blocks from the start: the expected judgments kept so far, and the distribution of the
    errors (alive[i]: low + i errors, every test passed)."""
    alive, low, total = np.ones(1), 0, 0.0
    for added, limit, step in zip(blocks.added, blocks.limits, blocks.steps, strict=True):
        alive = np.convolve(alive, step)[: max(int(limit) - low + 1, 0)]
        present = np.flatnonzero(alive > _NEGLIGIBLE)
        if present.size == 0:
            return total, np.zeros(0), 0
        low, alive = low + int(present[0]), alive[present[0] : present[-1] + 1]
        total += added * float(alive.sum())
    return total, alive, low


def _backward(blocks: _Blocks, passed_limit: int) -> np.ndarray:
    """value[e]: the judgments the blocks would add on average to a sequence that passed the candidate before
    them with e errors (e up to `passed_limit`)."""
    value = np.zeros(int(blocks.limits[-1]) + 1 if blocks.limits.size else passed_limit + 1)
    for index in range(blocks.added.size - 1, -1, -1):
        limit = int(blocks.limits[index])
        gained = np.zeros(max(limit + 1, 0))
        gained[: value.size] += value[: gained.size]
        gained += blocks.added[index]
        before = int(blocks.limits[index - 1]) if index else passed_limit
        step = blocks.steps[index]
        # value_before[e] = Σ_k step[k] · gained[e + k], gained being 0 past the limit.
        padded = np.zeros(max(before, 0) + step.size)
        padded[: min(gained.size, padded.size)] = gained[: padded.size]
        value = np.convolve(padded, step[::-1])[step.size - 1 : step.size - 1 + max(before + 1, 0)]
    return value


def sequence_start(ranked: np.ndarray, target_error: float, delta: float) -> int:
    """n₀, where the sequence of candidates starts (see the module docstring), from the confidences alone
    (`ranked`: from high to low). Every start's sequence ends in the same candidates (the multiples of the
    step past n_half), so the expected judgments they add are computed once, backwards."""
    n = ranked.size
    earliest = minimum_kept(target_error, delta)
    latest = half_target_kept(n, target_error, delta)
    if latest <= earliest:
        return latest
    options = np.unique(np.geomspace(earliest, latest, START_OPTIONS).round().astype(np.int64))
    missed = np.r_[0.0, np.cumsum(1.0 - ranked)]
    # The candidates every start's sequence ends in: from the first multiple of the step past n_half (the
    # junction) on; what they add to a sequence that passed the junction with e errors: value[e].
    _, shared = _candidates(ranked, latest)
    junction, shared = (int(shared[1]), shared[2:]) if shared.size > 1 else (n, shared[:0])
    heads = [kept[kept <= junction] for _, kept in (_candidates(ranked, int(start)) for start in options)]
    counts = np.unique(np.r_[junction, shared, *heads])
    limits = np.full(n + 1, -1, dtype=np.int64)
    limits[counts] = passing_errors(counts, target_error, delta)
    value = _backward(_Blocks.of(shared, junction, missed, limits), int(limits[junction]))
    means = []
    for head in heads:
        total, alive, low = _forward(_Blocks.of(head, 0, missed, limits))
        means.append(total + float(alive @ value[low : low + alive.size]))
    best = max(means)
    # The latest start among those (nearly) as good as the best: n_half when nothing is gained.
    return int(max(o for o, m in zip(options, means, strict=True) if m >= best - 1e-9 * max(1.0, best)))


def clopper_pearson_upper(errors: np.ndarray, kept: np.ndarray, delta: float) -> np.ndarray:
    """One-sided (1 − δ) upper confidence limit of an error rate from `errors` out of `kept`."""
    from scipy.stats import beta

    errors, kept = np.asarray(errors, dtype=np.float64), np.asarray(kept, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        upper = beta.ppf(1.0 - delta, errors + 1.0, np.maximum(kept - errors, 1e-12))
    return np.where(errors >= kept, 1.0, upper)


def error_correlation(wrong: np.ndarray, users: np.ndarray) -> float:
    """The intraclass correlation of errors within users (the one-way ANOVA estimator for unequal user sizes),
    clipped to [0, 1]: 0 when no user has two judgments, 1 when no user has two that differ but users do."""
    wrong = np.asarray(wrong, dtype=np.float64)
    _, labels = np.unique(np.asarray(users), return_inverse=True)
    sizes = np.bincount(labels).astype(np.float64)
    k, n = sizes.size, float(wrong.size)
    if k < 2 or n <= k:
        return 0.0
    means = np.bincount(labels, wrong) / sizes
    between = float(np.sum(sizes * (means - wrong.mean()) ** 2) / (k - 1))
    within = float(np.sum((wrong - means[labels]) ** 2) / (n - k))
    typical = (n - float(np.sum(sizes**2)) / n) / (k - 1)
    denominator = between + (typical - 1.0) * within
    if denominator <= 0:
        return 0.0
    return float(min(1.0, max(0.0, (between - within) / denominator)))


def kept_design_effects(ranked_users: np.ndarray, kept: np.ndarray, correlation: float) -> np.ndarray:
    """1 + (m̃ − 1) ρ for the surest `kept` judgments (`ranked_users`: each judgment's user, surest first), m̃
    = Σ m_k² / Σ m_k over the users among them."""
    _, labels = np.unique(np.asarray(ranked_users), return_inverse=True)
    # Each judgment's count of earlier judgments of its user: user k's m_k² grows by 2 m + 1 with each.
    by_user = np.argsort(labels, kind="stable")
    ordered = labels[by_user]
    starts = np.r_[0, np.flatnonzero(ordered[1:] != ordered[:-1]) + 1]
    lengths = np.diff(np.r_[starts, ordered.size])
    earlier = np.empty(labels.size, dtype=np.int64)
    earlier[by_user] = np.arange(ordered.size) - np.repeat(starts, lengths)
    squares = np.cumsum(2 * earlier + 1)
    kept = np.asarray(kept, dtype=np.int64)
    return 1.0 + (squares[kept - 1] / kept - 1.0) * correlation


def binomial_cdf(errors: np.ndarray, kept: np.ndarray, rate: float) -> np.ndarray:
    """P(Binomial(kept, rate) ≤ errors), at real-valued counts (effective sizes): I_(1−rate)(kept − errors,
    errors + 1), which is the binomial's CDF at whole numbers."""
    from scipy.special import betainc

    errors, kept = np.asarray(errors, dtype=np.float64), np.asarray(kept, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        below = betainc(np.maximum(kept - errors, 1e-300), errors + 1.0, 1.0 - rate)
    return np.where(errors >= kept, 1.0, below)


@dataclass(frozen=True, slots=True)
class Threshold:
    """What calibration picked: the threshold (None: no threshold meets the target), the verdicts it keeps of
    the calibration judgments, their error and its upper bound."""

    threshold: float | None
    n: int
    kept: int
    errors: int
    coverage: float
    error: float | None
    bound: float | None
    tested: int
    # Where users repeat: the kept verdicts' design effect (their counts are divided by it) and the errors'
    # correlation within users it comes from.
    design_effect: float | None = None
    correlation: float | None = None

    def as_dict(self) -> dict[str, Any]:
        row = asdict(self)
        for name in ("design_effect", "correlation"):
            if row[name] is None:
                del row[name]
        return row


def _candidates(sorted_confidence: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
    """(positions, kept counts) of the candidate thresholds, for confidences sorted from high to low: the
    first threshold keeping at least `start` judgments, then at least each multiple of the step above it
    (step: MIN_STEP_SHARE of them), then the lowest; a threshold always keeps a whole run of equal
    confidences."""
    n = sorted_confidence.size
    last = np.flatnonzero(np.r_[sorted_confidence[1:] != sorted_confidence[:-1], True])
    kept = last + 1
    step = max(1, math.ceil(MIN_STEP_SHARE * n))
    past = (start // step + 1) * step
    wanted = np.r_[start, np.arange(past, n + 1, step), n] if start <= n else np.empty(0, dtype=np.int64)
    picks = np.unique(np.searchsorted(kept, wanted, side="left"))
    return last[picks], kept[picks]


def learn_then_test(
    confidence: np.ndarray,
    correct: np.ndarray,
    *,
    target_error: float,
    delta: float,
    start: int | None = None,
    users: np.ndarray | None = None,
) -> Threshold:
    """The lowest confidence threshold whose kept error is ≤ target_error with probability ≥ 1 − delta; the
    sequence starts at `start` kept judgments (by default sequence_start's choice; any count fixed before the
    verdicts are seen keeps the guarantee). `users`: each judgment's user, when users repeat (each candidate
    is then tested on its effective size, see the module docstring)."""
    confidence = np.asarray(confidence, dtype=np.float64)
    wrong = 1.0 - np.asarray(correct, dtype=np.float64)
    n = confidence.size
    order = np.argsort(-confidence, kind="stable")
    ranked = confidence[order]
    errors_so_far = np.cumsum(wrong[order])
    if start is None:
        start = sequence_start(ranked, target_error, delta)
    positions, kept = _candidates(ranked, start)
    if positions.size == 0:
        return Threshold(None, n, 0, 0, 0.0, None, None, 0)
    errors = errors_so_far[positions]
    correlation = None if users is None else error_correlation(wrong, users)
    effects = (
        np.ones(kept.size)
        if users is None or correlation is None
        else kept_design_effects(np.asarray(users)[order], kept, correlation)
    )
    passed = binomial_cdf(errors / effects, kept / effects, target_error) <= delta
    # Fixed-sequence testing: every candidate up to the first failure counts, none after it.
    failed = np.flatnonzero(~passed)
    tested = int(failed[0]) + 1 if failed.size else positions.size
    accepted = int(failed[0]) if failed.size else positions.size
    if accepted == 0:
        return Threshold(None, n, 0, 0, 0.0, None, None, tested)
    last = accepted - 1
    k, e, effect = int(kept[last]), int(errors[last]), float(effects[last])
    return Threshold(
        threshold=float(ranked[positions[last]]),
        n=n,
        kept=k,
        errors=e,
        coverage=k / n,
        error=e / k,
        bound=float(clopper_pearson_upper(np.array(e / effect), np.array(k / effect), delta)),
        tested=tested,
        design_effect=None if correlation is None else effect,
        correlation=correlation,
    )


# The held-out check (apply_threshold) calls an error above the target more than chance when a true error of
# exactly the target would show as many errors with at most this probability; its interval is two-sided at
# 1 − HELD_OUT_LEVEL.
HELD_OUT_LEVEL = 0.05


def chance_of_as_many(errors: float, kept: float, target_error: float) -> float:
    """P(Binomial(kept, target_error) ≥ errors): how often a true error of exactly the target shows `errors` or
    more among `kept` verdicts (one-sided exact binomial test of "the error is at most the target"); at
    real-valued counts (effective sizes) I_target(errors, kept − errors + 1)."""
    if errors <= 0:
        return 1.0
    from scipy.special import betainc

    return float(betainc(errors, kept - errors + 1.0, target_error))


@dataclass(frozen=True, slots=True)
class Applied:
    """A threshold applied to judgments: what it kept, how right those were, and whether their error is within
    the target. A finite sample's error exceeds the target by chance even when the true error does not, so
    beside the error stand its Clopper–Pearson interval and the exact binomial test of "the true error is at
    most the target": `consistent` is False only when the errors are too many for chance
    (p ≤ HELD_OUT_LEVEL); `held` says only whether the observed error is at most the target."""

    n: int
    kept: int
    abstained: int
    coverage: float
    accuracy: float | None
    error: float | None
    target_error: float
    held: bool | None
    errors: int = 0
    error_ci_low: float | None = None
    error_ci_high: float | None = None
    p_value: float | None = None
    consistent: bool | None = None
    # Where users repeat: the kept verdicts' design effect, by which the interval and test divide the counts.
    design_effect: float | None = None

    def as_dict(self) -> dict[str, Any]:
        row = asdict(self)
        if row["design_effect"] is None:
            del row["design_effect"]
        return row

    def verdict(self) -> str:
        """The check in words: the error with its interval, against the target."""
        if self.error is None or self.error_ci_low is None or self.error_ci_high is None:
            return "none kept, target unchecked"
        error = (
            f"error {self.error:.1%} ({1 - HELD_OUT_LEVEL:.0%} CI {self.error_ci_low:.1%}–"
            f"{self.error_ci_high:.1%}) against the target {self.target_error:.1%}"
        )
        if self.held:
            return f"{error}: within it"
        if self.consistent:
            return (
                f"{error}: above it by no more than chance (p = {self.p_value:.2f}), consistent with the "
                "guarantee"
            )
        return f"{error}: above it beyond chance (p = {self.p_value:.3g}), the guarantee does not hold here"


def apply_threshold(
    confidence: np.ndarray,
    correct: np.ndarray,
    *,
    threshold: float,
    target_error: float,
    users: np.ndarray | None = None,
) -> Applied:
    """What the threshold keeps of these judgments and the check of the target on them; `users` (each
    judgment's user, when users repeat): the interval and the test at the kept verdicts' effective size."""
    confidence = np.asarray(confidence, dtype=np.float64)
    right = np.asarray(correct, dtype=bool)
    keep = confidence >= threshold
    kept = int(keep.sum())
    if kept == 0:
        return Applied(
            n=int(confidence.size),
            kept=0,
            abstained=int(confidence.size),
            coverage=0.0,
            accuracy=None,
            error=None,
            target_error=target_error,
            held=None,
        )
    errors = int(kept - right[keep].sum())
    effect = 1.0
    if users is not None:
        mine, wrong = np.asarray(users)[keep], ~right[keep]
        correlation = error_correlation(wrong, mine)
        effect = float(kept_design_effects(mine, np.array([kept]), correlation)[0])
    low, high = clopper_pearson(errors / effect, kept / effect, 1.0 - HELD_OUT_LEVEL)
    p_value = chance_of_as_many(errors / effect, kept / effect, target_error)
    return Applied(
        n=int(confidence.size),
        kept=kept,
        abstained=int(confidence.size - kept),
        coverage=kept / confidence.size,
        accuracy=1.0 - errors / kept,
        error=errors / kept,
        target_error=target_error,
        held=errors / kept <= target_error,
        errors=errors,
        error_ci_low=low,
        error_ci_high=high,
        p_value=p_value,
        consistent=p_value > HELD_OUT_LEVEL,
        design_effect=None if users is None else effect,
    )
