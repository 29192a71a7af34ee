"""How well a judge's confidence matches how often it is right, per judge × context (summary.json
`calibration`; docs/confidence.md "How sure is the judge?" states every definition).

A verdict that took no side (a tie, or an inconsistent pair in both orders) has confidence 0.5 and counts as
half right, the expected correctness of a coin flip, in every figure here: in its ECE bin and the reliability
diagram, on the accuracy–coverage curve, and in AUROC as a right verdict of weight ½ and a wrong one of weight
½. (Counted wrong, such verdicts alone kept ECE above half their share.)

- ECE (Guo et al. 2017): 10 bins of equal width over `confidence` with edges 0, 0.1, …, 1.0, each bin
  (low, high] (a confidence of exactly 0 falls in the first); ECE = Σ_b |B_b|/n · |acc(B_b) − conf(B_b)|.
  This plug-in figure exceeds the true ECE by the noise in each bin; `ece_debiased` removes the bias the
  bootstrap measures (Kumar et al. 2019), and the interval (BinGaps) holds the true ECE at its stated 95%
  whatever the gaps, 0 included.
- Brier score of `p_chosen`: mean (p_chosen − 1)², the chosen answer being the better one by construction.
- AUROC of `confidence` for correctness: the probability that a right verdict has a higher confidence than a
  wrong one (ties count one half); undefined when every verdict is right or every one is wrong.
- The accuracy–coverage curve: keep the verdicts at or above a confidence threshold, from the surest down;
  AURC is the mean over the judgments of the error among those kept when that judgment is (equal
  confidences are kept or dropped together, as a threshold must).

Brier and AUROC have 95% percentile bootstrap intervals over judgments (the project's resample count); the
resamples are shared by every figure and drawn as counts per judgment, in blocks, so that thousands of
judgments × many judges take a fraction of a second. Where users repeat (a user with several judgments of the
judge), every resample draws users with replacement and each judgment counts as often as its user was drawn
(the judgments of one user go right or wrong together), and the ECE interval's standard errors are taken over
users (BinGaps).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
import polars as pl

from prbj.analysis.confidence import CONFIDENCE, P_CHOSEN, SOURCE
from prbj.analysis.stats import BOOTSTRAP_RESAMPLES
from prbj.analysis.user_counts import USER_KEY, user_expr, users_repeat

ECE_BINS = 10
BIN_EDGES = np.linspace(0.0, 1.0, ECE_BINS + 1)
# Points of the accuracy–coverage curve kept in summary.json (the report draws them).
CURVE_POINTS = 20
# Resamples drawn at once: bounds the memory of a block (resamples × judgments counts).
_BLOCK = 200
# Judgments are resampled as groups of alike ones when there are at least this many judgments per group.
GROUPED_SHARE = 8
# How right a verdict that took no side (a tie or an inconsistent pair, confidence 0.5) counts: a coin flip's
# expected correctness; and the share counted right of each group of the layout (wrong, right, no side).
NO_SIDE = 0.5
_RIGHT_SHARE = np.array([0.0, 1.0, NO_SIDE])
# The ECE interval (BinGaps.interval) covers the true ECE with this probability; GAP_RISK of the risk it leaves
# is spent on the lower limits of the bins' gaps.
INTERVAL_LEVEL = 0.95
GAP_RISK = 0.005


@dataclass(frozen=True, slots=True)
class ReliabilityBin:
    low: float
    high: float
    n: int
    accuracy: float | None
    confidence: float | None


@dataclass(frozen=True, slots=True)
class CurvePoint:
    threshold: float
    coverage: float
    accuracy: float


@dataclass(frozen=True, slots=True)
class CalibrationRow:
    judge: str
    context: str
    # Answered judgments, and those of them with a probability (the figures are over the latter).
    answered: int
    n: int
    sources: dict[str, int]
    accuracy: float | None
    mean_confidence: float | None
    ece: float | None
    ece_debiased: float | None
    ece_ci_low: float | None
    ece_ci_high: float | None
    brier: float | None
    brier_ci_low: float | None
    brier_ci_high: float | None
    auroc: float | None
    auroc_ci_low: float | None
    auroc_ci_high: float | None
    aurc: float | None
    bins: list[ReliabilityBin] = field(default_factory=list)
    curve: list[CurvePoint] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def bin_of(confidence: np.ndarray) -> np.ndarray:
    """The ECE bin of each confidence: bin b holds (BIN_EDGES[b], BIN_EDGES[b + 1]], 0 in the first."""
    return np.clip(np.searchsorted(BIN_EDGES, confidence, side="left") - 1, 0, ECE_BINS - 1)


@dataclass(frozen=True)
class _Prepared:
    """One judge's judgments, laid out once for every figure and every resample.

    Bootstrap weights are independent counts per position, so the judgments may sit in any fixed order: the
    wrong verdicts first, then the right ones, then those that took no side (half right), each group by
    ascending confidence. One running sum of the weights down that layout then answers almost everything: a
    run of neighbouring positions sums to the difference of two of its rows. Each ECE bin is such a run in each
    group (its weight and its right share: differences; its sum of confidences: one dot product), and a right
    verdict beats the wrong ones above which it sits (their count: one row of the running sum), right verdicts
    with the same wrong ones below them counting as one run. A verdict that took no side counts one half on
    each side. So a block of resamples costs one running sum, one dot product per bin and a few rows, never a
    sort."""

    order: np.ndarray  # the layout: position i holds the judgment order[i] of the arrays given
    confidence: np.ndarray
    squared: np.ndarray  # (p_chosen − 1)²
    wrong: int  # how many wrong verdicts lead the layout
    right_end: int  # where the right verdicts end and those that took no side begin
    segments: np.ndarray  # (start, end) of each non-empty run of one bin within one group
    in_bin: np.ndarray  # (bins × segments) the right share of each run, in its bin's row
    segment_bin: np.ndarray  # (bins × segments) 1 in the row of each run's bin
    segment_bins: np.ndarray  # the bin of each run
    # Runs (start, end) of right-side judgments with the same wrong-side ones below them, each with the share
    # of its judgments that counts as right (1, or one half for no side), and where the wrong verdicts and
    # the no-side judgments below them end (strictly, and with ties).
    runs: np.ndarray
    run_share: np.ndarray
    below: np.ndarray
    below_or_tied: np.ndarray
    half_below: np.ndarray
    half_below_or_tied: np.ndarray

    @staticmethod
    def of(
        confidence: np.ndarray, correct: np.ndarray, p_chosen: np.ndarray, dtype: type = np.float32
    ) -> _Prepared:
        group = np.select([correct == 0.0, correct == 1.0], [0, 1], 2)
        order = np.lexsort((confidence, group))
        confidence, p_chosen, group = confidence[order], p_chosen[order], group[order]
        n = confidence.size
        wrong, right_end = (int(v) for v in np.searchsorted(group, [1, 2], side="left"))
        bins = bin_of(confidence)
        starts = np.flatnonzero(np.r_[True, (bins[1:] != bins[:-1]) | (group[1:] != group[:-1])])
        segments = np.c_[starts, np.r_[starts[1:], n]]
        rows = np.zeros((ECE_BINS, starts.size))
        rows[bins[starts], np.arange(starts.size)] = 1.0
        share = _RIGHT_SHARE[group]
        wrong_confidence, half_confidence = confidence[:wrong], confidence[right_end:]
        sided = confidence[wrong:]
        below = np.searchsorted(wrong_confidence, sided, side="left")
        below_or_tied = np.searchsorted(wrong_confidence, sided, side="right")
        half_below = right_end + np.searchsorted(half_confidence, sided, side="left")
        half_below_or_tied = right_end + np.searchsorted(half_confidence, sided, side="right")
        keys = np.c_[below, below_or_tied, half_below, half_below_or_tied, group[wrong:]]
        # Nothing on the right side at all (every verdict wrong): no run to mark.
        changes = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)])[: sided.size]
        run_starts = wrong + changes
        return _Prepared(
            order,
            confidence.astype(dtype),
            ((p_chosen - 1.0) ** 2).astype(dtype),
            wrong,
            right_end,
            segments,
            rows * share[starts],
            rows,
            bins[starts],
            np.c_[run_starts, np.r_[run_starts[1:], n][: run_starts.size]],
            share[run_starts],
            below[changes],
            below_or_tied[changes],
            half_below[changes],
            half_below_or_tied[changes],
        )

    def figures(self, weights: np.ndarray, shift: np.ndarray | None = None) -> Draws:
        """(ECE, Brier, AUROC) for each column of `weights` (positions in this layout × resamples): how many
        times each position counts in each resample; with `shift` (one per bin), also the ECE of each resample
        with every bin's calibration gap moved by it (see BinGaps)."""
        n, columns = weights.shape
        running = np.zeros((n + 1, columns), dtype=np.float64 if weights.dtype == np.float64 else np.float32)
        np.cumsum(weights, axis=0, out=running[1:])
        total = running[n].astype(np.float64)
        counts = (running[self.segments[:, 1]] - running[self.segments[:, 0]]).astype(np.float64)
        hits = self.in_bin @ counts
        sure = np.zeros((ECE_BINS, columns))
        squared = np.zeros(columns)
        # Per run, small dot products: one product over all positions would be no fewer operations, and
        # slower in BLAS's threads on a shared machine.
        for (start, end), bin_ in zip(self.segments, self.segment_bins, strict=True):
            sure[bin_] += self.confidence[start:end] @ weights[start:end]
            squared += self.squared[start:end] @ weights[start:end]
        gap = hits - sure
        ece = np.abs(gap).sum(axis=0) / total
        shifted = None
        if shift is not None:
            shifted = np.abs(gap + (self.segment_bin @ counts) * shift[:, None]).sum(axis=0) / total
        brier = squared / total
        half_total = (running[n] - running[self.right_end]).astype(np.float64)
        wrong_total = running[self.wrong].astype(np.float64) + 0.5 * half_total
        right_total = (running[self.right_end] - running[self.wrong]).astype(np.float64) + 0.5 * half_total
        if self.runs.size:
            run_weights = (running[self.runs[:, 1]] - running[self.runs[:, 0]]).astype(np.float64)
            # Wrong-side weight below each run, a tie counting one half (running[k]: weight of the first k),
            # a judgment that took no side counting one half of its weight.
            beaten = (running[self.below] + running[self.below_or_tied]).astype(np.float64)
            if self.right_end < n:
                start = running[self.right_end].astype(np.float64)
                beaten += 0.5 * (running[self.half_below] + running[self.half_below_or_tied] - 2.0 * start)
            beaten *= 0.5
            wins = np.einsum("ij,ij->j", run_weights * self.run_share[:, None], beaten)
        else:
            wins = np.zeros(columns)
        pairs = right_total * wrong_total
        with np.errstate(invalid="ignore", divide="ignore"):
            auroc = np.where(pairs > 0, wins / np.where(pairs > 0, pairs, 1.0), np.nan)
        return Draws(ece, brier, auroc, shifted)


@dataclass(frozen=True, slots=True)
class Draws:
    """Figures of resamples: one value per resample."""

    ece: np.ndarray
    brier: np.ndarray
    auroc: np.ndarray
    # The ECE of each resample with every bin's gap moved by BinGaps' shift (None when none was asked for).
    shifted: np.ndarray | None = None

    @staticmethod
    def joined(draws: list[Draws]) -> Draws:
        shifted = [d.shifted for d in draws if d.shifted is not None]
        return Draws(
            np.concatenate([d.ece for d in draws]),
            np.concatenate([d.brier for d in draws]),
            np.concatenate([d.auroc for d in draws]),
            np.concatenate(shifted) if len(shifted) == len(draws) and shifted else None,
        )


@dataclass(frozen=True)
class BinGaps:
    """The calibration gap of each ECE bin, d_b = mean(correct − confidence) over its judgments, with the
    bin's share p_b of the judgments and the gap's standard error s_b; ECE = Σ p_b |d_b|.

    The plug-in ECE is biased upwards (|d̂_b| exceeds |d_b| on average by the noise in d̂_b: about 0.03 for a
    perfectly calibrated judge on 500 judgments), so a percentile interval around it misses a small true ECE
    almost always. The interval here covers the true ECE at any size of the gaps:

    - upper limit: for the signs σ_b of the true gaps, ECE_plug-in = Σ p̂_b |d̂_b| ≥ Σ p̂_b σ_b d̂_b, a mean of
      n independent terms σ_b(i)·(correct_i − confidence_i) whose expectation is the true ECE and whose
      variance is at most mean (correct − confidence)²; so ECE ≤ ECE_plug-in + z_(1−α/2) · spread.
    - lower limit (Berger and Boos 1994): ECE_plug-in − ECE is larger when the true gaps are smaller, so its
      upper quantile is taken where the gaps are the smallest the data allow, each bin's |d_b| at its lower
      limit max(0, |d̂_b| − z_(1−γ/B) s_b) (jointly at 1 − γ over the B bins); the recentred bootstrap gives
      that quantile (resamples' gaps d̂*_b − d̂_b + the lower limit), at 1 − α/2 + γ, so that both steps
      together spend α/2.

    Normal approximations within bins assumed; bins with a judgment or two have their standard error from a
    smoothed accuracy so that no gap is taken as exact."""

    share: np.ndarray
    gap: np.ndarray
    error: np.ndarray
    spread: float

    @staticmethod
    def of(confidence: np.ndarray, correct: np.ndarray, users: np.ndarray | None = None) -> BinGaps:
        """`users`: each judgment's user (0 … K − 1) when users repeat; the standard errors are then taken over
        users (never below what independent judgments would give)."""
        bins = bin_of(confidence)
        residual = correct - confidence
        counts = np.bincount(bins, minlength=ECE_BINS).astype(np.float64)
        filled = np.maximum(counts, 1.0)
        gap = np.bincount(bins, residual, minlength=ECE_BINS) / filled
        squares = np.bincount(bins, residual**2, minlength=ECE_BINS)
        with np.errstate(invalid="ignore", divide="ignore"):
            variance = np.where(counts > 1, (squares - counts * gap**2) / (counts - 1.0), 0.0)
        # A bin of few judgments may show no spread at all: a smoothed accuracy bounds its variance below.
        smoothed = (np.bincount(bins, correct, minlength=ECE_BINS) + 1.0) / (counts + 2.0)
        variance = np.maximum(variance, smoothed * (1.0 - smoothed))
        n = max(confidence.size, 1)
        error = np.sqrt(variance / filled)
        spread = float(np.sqrt(np.mean(residual**2) / n)) if confidence.size else 0.0
        if users is not None and confidence.size:
            error = np.maximum(error, _bin_errors_over_users(bins, residual - gap[bins], users, filled))
            # The upper limit's terms σ_b r_i (BinGaps' docstring), with each bin's sign as observed.
            signed = np.where(gap[bins] < 0, -residual, residual)
            spread = max(spread, _mean_error_over_users(signed, users))
        return BinGaps(counts / n, gap, error, spread)

    def shift(self) -> np.ndarray:
        """How far each bin's gap moves to the smallest |d_b| the data allow (see the class docstring)."""
        bins = max(int((self.share > 0).sum()), 1)
        z = NormalDist().inv_cdf(1.0 - GAP_RISK / bins)
        least = np.sign(self.gap) * np.maximum(0.0, np.abs(self.gap) - z * self.error)
        return least - self.gap

    def interval(self, ece: float, shifted: np.ndarray) -> tuple[float, float]:
        """The interval for the true ECE from the plug-in ECE and the resamples' ECE with shifted gaps."""
        tail = (1.0 - INTERVAL_LEVEL) / 2.0
        least = float((self.share * np.abs(self.gap + self.shift())).sum())
        excess = float(np.quantile(shifted - least, 1.0 - tail + GAP_RISK))
        high = ece + NormalDist().inv_cdf(1.0 - tail) * self.spread
        return max(0.0, ece - excess), min(1.0, high)


def _over_users(values: np.ndarray, users: np.ndarray) -> float:
    """Σ_k (Σ_{i of user k} values_i)² · K / (K − 1), K the users with a value: the cluster-robust sum of
    squares of centred values (0 for one user)."""
    sums = np.bincount(users, values)
    present = np.bincount(users) > 0
    k = int(present.sum())
    return float(np.sum(sums[present] ** 2) * k / (k - 1)) if k > 1 else 0.0


def _mean_error_over_users(values: np.ndarray, users: np.ndarray) -> float:
    """The standard error over users of the mean of `values`."""
    return float(np.sqrt(_over_users(values - values.mean(), users)) / values.size)


def _bin_errors_over_users(
    bins: np.ndarray, centred: np.ndarray, users: np.ndarray, filled: np.ndarray
) -> np.ndarray:
    """Per bin, the standard error over users of the bin's mean residual (`centred`: residual minus its bin's
    gap)."""
    return np.array(
        [np.sqrt(_over_users(centred[bins == b], users[bins == b])) / filled[b] for b in range(ECE_BINS)]
    )


class Resamples:
    """Bootstrap resamples as counts per judgment position, drawn once per number of judgments and seed and
    shared by every judge with that many (each judge would draw the very same counts from the same seed).

    Judgments that are all alike (the same confidence, correctness and p_chosen, as both orders and samples
    give: a handful of distinct values) are one position weighted by how many they are: resampling judgments
    then is drawing each group's count from a multinomial, the same distribution at a fraction of the work."""

    def __init__(self, seed: int, resamples: int = BOOTSTRAP_RESAMPLES) -> None:
        self.seed = seed
        self.resamples = resamples
        self._drawn: dict[int, list[np.ndarray]] = {}

    def blocks(self, n: int) -> list[np.ndarray]:
        found = self._drawn.get(n)
        if found is None:
            found = self._drawn[n] = list(self._draw(n))
        return found

    def grouped(self, sizes: np.ndarray) -> list[np.ndarray]:
        """Resampled counts of groups of alike judgments (`sizes`: how many each group holds)."""
        rng = np.random.default_rng(self.seed)
        n = int(sizes.sum())
        counts = rng.multinomial(n, sizes / n, size=self.resamples)
        return [
            np.ascontiguousarray(counts[start : start + _BLOCK].T, dtype=np.float32)
            for start in range(0, self.resamples, _BLOCK)
        ]

    def over_users(self, users: np.ndarray) -> list[np.ndarray]:
        """Resampled counts per judgment position when users repeat (`users`: each position's user, 0 … K − 1):
        each resample draws K users with replacement, and a judgment counts as often as its user was drawn."""
        k = int(users.max()) + 1
        rng = np.random.default_rng(self.seed)
        blocks = []
        for start in range(0, self.resamples, _BLOCK):
            drawn = rng.multinomial(k, np.full(k, 1.0 / k), size=min(_BLOCK, self.resamples - start))
            blocks.append(np.ascontiguousarray(drawn.T[users], dtype=np.float32))
        return blocks

    def _draw(self, n: int) -> Iterator[np.ndarray]:
        rng = np.random.default_rng(self.seed)
        done = 0
        while done < self.resamples:
            rows = min(_BLOCK, self.resamples - done)
            drawn = rng.integers(0, n, size=(rows, n)) + (np.arange(rows) * n)[:, None]
            counts = np.bincount(drawn.ravel(), minlength=rows * n).reshape(rows, n)
            # Judgments down the rows (see _Prepared.figures); float32 holds every count exactly and halves
            # the memory the sums walk through.
            yield np.ascontiguousarray(counts.T, dtype=np.float32)
            done += rows


def _interval(values: np.ndarray) -> tuple[float | None, float | None]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None, None
    low, high = np.quantile(finite, [0.025, 0.975])
    return float(low), float(high)


def _number(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def reliability_bins(confidence: np.ndarray, correct: np.ndarray) -> list[ReliabilityBin]:
    index = bin_of(confidence)
    bins = []
    for b in range(ECE_BINS):
        mine = index == b
        count = int(mine.sum())
        bins.append(
            ReliabilityBin(
                low=float(BIN_EDGES[b]),
                high=float(BIN_EDGES[b + 1]),
                n=count,
                accuracy=float(correct[mine].mean()) if count else None,
                confidence=float(confidence[mine].mean()) if count else None,
            )
        )
    return bins


def risk_coverage(confidence: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(thresholds, coverage, accuracy) at each distinct confidence, surest first: keeping every judgment
    whose confidence is at least the threshold."""
    order = np.argsort(-confidence, kind="stable")
    ranked, right = confidence[order], correct[order]
    last_of_group = np.r_[ranked[1:] != ranked[:-1], True]
    kept = np.arange(1, ranked.size + 1)[last_of_group]
    accuracy = np.cumsum(right)[last_of_group] / kept
    return ranked[last_of_group], kept / ranked.size, accuracy


def aurc(confidence: np.ndarray, correct: np.ndarray) -> float | None:
    if confidence.size == 0:
        return None
    _, coverage, accuracy = risk_coverage(confidence, correct)
    group_sizes = np.diff(np.r_[0.0, coverage]) * confidence.size
    return float(((1.0 - accuracy) * group_sizes).sum() / confidence.size)


def _curve(confidence: np.ndarray, correct: np.ndarray) -> list[CurvePoint]:
    thresholds, coverage, accuracy = risk_coverage(confidence, correct)
    if thresholds.size > CURVE_POINTS:
        # Evenly spaced in coverage, the full coverage always last.
        wanted = np.linspace(coverage[0], 1.0, CURVE_POINTS)
        picks = np.unique(np.searchsorted(coverage, wanted - 1e-12))
        thresholds, coverage, accuracy = thresholds[picks], coverage[picks], accuracy[picks]
    return [
        CurvePoint(float(t), float(c), float(a))
        for t, c, a in zip(thresholds, coverage, accuracy, strict=True)
    ]


def resampled_figures(
    confidence: np.ndarray,
    correct: np.ndarray,
    p_chosen: np.ndarray,
    resamples: Resamples,
    users: np.ndarray | None = None,
) -> tuple[Draws, Draws, BinGaps]:
    """The figures of the judgments themselves, of every resample, and the bins' gaps (arrays of float64).
    `users`: each judgment's user (0 … K − 1) when users repeat: then users are resampled."""
    # The figures themselves in double precision; the resamples in single (exact counts, and ample for an
    # interval's percentiles).
    whole = _Prepared.of(confidence, correct, p_chosen, np.float64).figures(np.ones((confidence.size, 1)))
    gaps = BinGaps.of(confidence, correct, users)
    shift = gaps.shift()
    if users is not None:
        prepared = _Prepared.of(confidence, correct, p_chosen)
        blocks = resamples.over_users(users[prepared.order])
        return whole, Draws.joined([prepared.figures(weights, shift) for weights in blocks]), gaps
    alike, sizes = np.unique(np.c_[confidence, correct, p_chosen], axis=0, return_counts=True)
    if alike.shape[0] * GROUPED_SHARE <= confidence.size:
        grouped = _Prepared.of(alike[:, 0], alike[:, 1], alike[:, 2])
        # Groups differ in size: their counts are drawn in the layout's order, not the order given.
        draws = [grouped.figures(weights, shift) for weights in resamples.grouped(sizes[grouped.order])]
    else:
        prepared = _Prepared.of(confidence, correct, p_chosen)
        draws = [prepared.figures(weights, shift) for weights in resamples.blocks(confidence.size)]
    return whole, Draws.joined(draws), gaps


def calibrate(
    confidence: np.ndarray,
    correct: np.ndarray,
    p_chosen: np.ndarray,
    *,
    resamples: Resamples,
    users: np.ndarray | None = None,
) -> dict[str, Any]:
    """Every figure for one judge's judgments (arrays of equal length, at least one judgment). `correct` is 1
    for a right verdict, 0 for a wrong one and 0.5 for one that took no side (a tie or an inconsistent pair).
    `users`: each judgment's user label when users repeat (the intervals then resample users)."""
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    p_chosen = np.asarray(p_chosen, dtype=np.float64)
    if not np.isin(correct, (0.0, NO_SIDE, 1.0)).all():
        raise ValueError("correct must be 0, 0.5 (no side taken) or 1")
    labels = None
    if users is not None:
        _, labels = np.unique(np.asarray(users), return_inverse=True)
        labels = labels.astype(np.int64) if labels.size > np.unique(labels).size else None
    whole, drawn, gaps = resampled_figures(confidence, correct, p_chosen, resamples, labels)
    ece, brier, auroc = float(whole.ece[0]), float(whole.brier[0]), float(whole.auroc[0])
    assert drawn.shifted is not None
    ece_low, ece_high = gaps.interval(ece, drawn.shifted)
    # Bias-corrected by the resamples' own excess over the plug-in figure (as Kumar et al. 2019 debias the
    # ℓ1 ECE): never above the plug-in figure (|mean| ≤ mean |·|: its bias is never negative), never below
    # the interval.
    debiased = min(max(2.0 * ece - float(np.mean(drawn.ece)), ece_low), ece)
    brier_ci, auroc_ci = _interval(drawn.brier), _interval(drawn.auroc)
    return {
        "accuracy": float(correct.mean()),
        "mean_confidence": float(confidence.mean()),
        "ece": ece,
        "ece_debiased": debiased,
        "ece_ci_low": ece_low,
        "ece_ci_high": ece_high,
        "brier": brier,
        "brier_ci_low": brier_ci[0],
        "brier_ci_high": brier_ci[1],
        "auroc": _number(auroc),
        "auroc_ci_low": auroc_ci[0],
        "auroc_ci_high": auroc_ci[1],
        "aurc": aurc(confidence, correct),
        "bins": reliability_bins(confidence, correct),
        "curve": _curve(confidence, correct),
    }


def scored_correct() -> pl.Expr:
    """Correctness as the calibration figures count it: 1 right, 0 wrong, 0.5 for a verdict that took no side
    (a tie or an inconsistent pair, whose confidence is 0.5: a coin flip is right half the time)."""
    sided = pl.col("verdict").is_in(["chosen", "rejected"])
    return pl.when(sided).then(pl.col("correct").cast(pl.Float64)).otherwise(NO_SIDE).alias("correct")


def calibration(frame: pl.DataFrame, *, seed: int) -> list[CalibrationRow]:
    """One row per judge × context whose judgments carry a probability (analysis.confidence)."""
    if CONFIDENCE not in frame.columns:
        return []
    resamples = Resamples(seed)
    repeat = users_repeat(frame)
    rows = []
    for judge, context in frame.select("judge", "context").unique(maintain_order=True).iter_rows():
        mine = frame.filter(pl.col("judge") == judge, pl.col("context") == context, pl.col("status") == "ok")
        rated = mine.filter(pl.col(CONFIDENCE).is_not_null())
        if rated.height == 0:
            continue
        sources = dict(sorted(rated.group_by(SOURCE).len().iter_rows()))
        figures = calibrate(
            rated[CONFIDENCE].to_numpy(),
            rated.select(scored_correct()).to_series().to_numpy(),
            rated[P_CHOSEN].to_numpy(),
            resamples=resamples,
            users=rated.select(user_expr(rated))[USER_KEY].to_numpy() if repeat else None,
        )
        rows.append(
            CalibrationRow(
                judge=judge, context=context, answered=mine.height, n=rated.height, sources=sources, **figures
            )
        )
    return rows
