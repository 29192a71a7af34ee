"""Selective judging with a guarantee: the lowest confidence threshold whose error among the verdicts it keeps
is at most a target α with probability at least 1 − δ (`prbj calibrate`), and what a threshold then does on
other judgments (`prbj judge --selective`).

The procedure is Learn-then-Test (Angelopoulos et al. 2021) with fixed-sequence testing:

1. Candidate thresholds are confidences of the calibration judgments, from the highest down: the first that
   keeps at least n₀ + j·s judgments for j = 0, 1, … (s = 1% of the judgments, so that the sequence has no
   more than about a hundred places to stop by chance), then the lowest, which keeps them all. The sequence
   starts at n₀, the fewest kept judgments at which an error of half the target could pass the test (with
   fewer, a single unlucky error among the surest verdicts would end the sequence at once); when no count up
   to all of them allows that, at n_min = ⌈log δ / log(1 − α)⌉, the fewest at which no error at all could
   pass. A threshold keeps every judgment at least as confident, ties included. The sequence depends on the
   number of judgments and their confidences only, never on which verdicts were right.
2. Each candidate λ tests H₀: "the error among verdicts with confidence ≥ λ exceeds α" with the exact binomial
   p-value P(Binomial(n_λ, α) ≤ errors_λ); H₀ is rejected when the p-value is at most δ.
3. Going down the sequence, the threshold is the last candidate rejected before the first one that is not:
   the family-wise error of the whole sequence is at most δ, so the error of the threshold picked exceeds α
   with probability at most δ. Its reported bound is the one-sided (1 − δ) Clopper–Pearson upper limit of the
   error among the verdicts it keeps, which is at most α exactly when step 2 rejects.

The guarantee assumes that the calibration judgments and the judgments the threshold is applied to are
exchangeable (drawn alike from the same pairs and judge).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import beta, binom

# Candidate thresholds closer than this share of the judgments are merged (see the module docstring).
MIN_STEP_SHARE = 0.01


def minimum_kept(target_error: float, delta: float) -> int:
    """The fewest kept verdicts with which zero errors could pass the test at level δ."""
    return max(1, math.ceil(math.log(delta) / math.log(1.0 - target_error)))


def first_kept(n: int, target_error: float, delta: float) -> int:
    """Where the sequence of candidates starts (see the module docstring): the fewest kept verdicts with which
    an error of half the target passes, else the fewest with which none does."""
    smallest = minimum_kept(target_error, delta)
    counts = np.arange(smallest, n + 1)
    passes = binom.cdf(np.floor(counts * target_error / 2), counts, target_error) <= delta
    return int(counts[np.argmax(passes)]) if passes.any() else smallest


def clopper_pearson_upper(errors: np.ndarray, kept: np.ndarray, delta: float) -> np.ndarray:
    """One-sided (1 − δ) upper confidence limit of an error rate from `errors` out of `kept`."""
    errors, kept = np.asarray(errors, dtype=np.float64), np.asarray(kept, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        upper = beta.ppf(1.0 - delta, errors + 1.0, np.maximum(kept - errors, 1e-12))
    return np.where(errors >= kept, 1.0, upper)


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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _candidates(sorted_confidence: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
    """(positions, kept counts) of the candidate thresholds, for confidences sorted from high to low: the
    first threshold keeping at least start + j·step judgments for j = 0, 1, … (step: MIN_STEP_SHARE of them),
    then the lowest; a threshold always keeps a whole run of equal confidences."""
    n = sorted_confidence.size
    last = np.flatnonzero(np.r_[sorted_confidence[1:] != sorted_confidence[:-1], True])
    kept = last + 1
    step = max(1, math.ceil(MIN_STEP_SHARE * n))
    wanted = np.r_[np.arange(start, n + 1, step), n] if start <= n else np.empty(0, dtype=np.int64)
    picks = np.unique(np.searchsorted(kept, wanted, side="left"))
    return last[picks], kept[picks]


def learn_then_test(
    confidence: np.ndarray, correct: np.ndarray, *, target_error: float, delta: float
) -> Threshold:
    """The lowest confidence threshold whose kept error is ≤ target_error with probability ≥ 1 − delta."""
    confidence = np.asarray(confidence, dtype=np.float64)
    wrong = 1.0 - np.asarray(correct, dtype=np.float64)
    n = confidence.size
    order = np.argsort(-confidence, kind="stable")
    ranked = confidence[order]
    errors_so_far = np.cumsum(wrong[order])
    positions, kept = _candidates(ranked, first_kept(n, target_error, delta))
    if positions.size == 0:
        return Threshold(None, n, 0, 0, 0.0, None, None, 0)
    errors = errors_so_far[positions]
    passed = binom.cdf(errors, kept, target_error) <= delta
    # Fixed-sequence testing: every candidate up to the first failure counts, none after it.
    failed = np.flatnonzero(~passed)
    tested = int(failed[0]) + 1 if failed.size else positions.size
    accepted = int(failed[0]) if failed.size else positions.size
    if accepted == 0:
        return Threshold(None, n, 0, 0, 0.0, None, None, tested)
    last = accepted - 1
    k, e = int(kept[last]), int(errors[last])
    return Threshold(
        threshold=float(ranked[positions[last]]),
        n=n,
        kept=k,
        errors=e,
        coverage=k / n,
        error=e / k,
        bound=float(clopper_pearson_upper(np.array(e), np.array(k), delta)),
        tested=tested,
    )


# The held-out check (apply_threshold) calls an error above the target more than chance when a true error of
# exactly the target would show as many errors with at most this probability; its interval is two-sided at
# 1 − HELD_OUT_LEVEL.
HELD_OUT_LEVEL = 0.05


def clopper_pearson(errors: int, kept: int, level: float) -> tuple[float, float]:
    """The two-sided Clopper–Pearson interval of an error rate from `errors` out of `kept` (kept ≥ 1), at
    confidence `level`: exact, never narrower than the binomial allows."""
    from scipy.stats import beta

    tail = (1.0 - level) / 2.0
    low = 0.0 if errors == 0 else float(beta.ppf(tail, errors, kept - errors + 1))
    high = 1.0 if errors == kept else float(beta.ppf(1.0 - tail, errors + 1, kept - errors))
    return low, high


def chance_of_as_many(errors: int, kept: int, target_error: float) -> float:
    """P(Binomial(kept, target_error) ≥ errors): how often a true error of exactly the target shows `errors` or
    more among `kept` verdicts (one-sided exact binomial test of "the error is at most the target")."""
    from scipy.stats import binom

    return float(binom.sf(errors - 1, kept, target_error))


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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

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
    confidence: np.ndarray, correct: np.ndarray, *, threshold: float, target_error: float
) -> Applied:
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
    low, high = clopper_pearson(errors, kept, 1.0 - HELD_OUT_LEVEL)
    p_value = chance_of_as_many(errors, kept, target_error)
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
    )
