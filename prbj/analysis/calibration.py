"""How well a judge's confidence matches how often it is right, per judge × context (summary.json
`calibration`; docs/confidence.md "How sure is the judge?" states every definition).

- ECE (Guo et al. 2017): 10 bins of equal width over `confidence` with edges 0, 0.1, …, 1.0, each bin
  (low, high] (a confidence of exactly 0 falls in the first); ECE = Σ_b |B_b|/n · |acc(B_b) − conf(B_b)|.
- Brier score of `p_chosen`: mean (p_chosen − 1)², the chosen answer being the better one by construction.
- AUROC of `confidence` for correctness: the probability that a right verdict has a higher confidence than a
  wrong one (ties count one half); undefined when every verdict is right or every one is wrong.
- The accuracy–coverage curve: keep the verdicts at or above a confidence threshold, from the surest down;
  AURC is the mean over the judgments of the error among those kept when that judgment is (equal
  confidences are kept or dropped together, as a threshold must).

Each of ECE, Brier and AUROC has a 95% percentile bootstrap interval over judgments (the project's resample
count); the resamples are shared by the three figures and drawn as counts per judgment, in blocks, so that
thousands of judgments × many judges take a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import polars as pl

from prbj.analysis.confidence import CONFIDENCE, P_CHOSEN, SOURCE
from prbj.analysis.stats import BOOTSTRAP_RESAMPLES

ECE_BINS = 10
BIN_EDGES = np.linspace(0.0, 1.0, ECE_BINS + 1)
# Points of the accuracy–coverage curve kept in summary.json (the report draws them).
CURVE_POINTS = 20
# Resamples drawn at once: bounds the memory of a block (resamples × judgments counts).
_BLOCK = 200
# Judgments are resampled as groups of alike ones when there are at least this many judgments per group.
GROUPED_SHARE = 8


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
    wrong verdicts first, then the right ones, each by ascending confidence. One running sum of the weights
    down that layout then answers almost everything: a run of neighbouring positions sums to the difference of
    two of its rows. Each ECE bin is such a run in each half (its count of right verdicts: a difference; its sum
    of confidences: one dot product), and a right verdict beats the wrong ones above which it sits (their count:
    one row of the running sum), right verdicts with the same wrong ones below them counting as one run. So a
    block of resamples costs one running sum, one dot product per bin and a few rows, never a sort."""

    order: np.ndarray  # the layout: position i holds the judgment order[i] of the arrays given
    confidence: np.ndarray
    squared: np.ndarray  # (p_chosen − 1)²
    wrong: int  # how many wrong verdicts lead the layout
    segments: np.ndarray  # (start, end) of each non-empty run of one bin within one half
    segment_bins: np.ndarray  # the bin of each run
    segment_right: np.ndarray  # whether each run lies in the right half
    # Runs of right verdicts (start, end) with the same wrong verdicts below them (strictly, and with ties).
    right_runs: np.ndarray
    below: np.ndarray
    below_or_tied: np.ndarray

    @staticmethod
    def of(
        confidence: np.ndarray, correct: np.ndarray, p_chosen: np.ndarray, dtype: type = np.float32
    ) -> _Prepared:
        right = correct > 0.5
        order = np.r_[
            np.flatnonzero(~right)[np.argsort(confidence[~right], kind="stable")],
            np.flatnonzero(right)[np.argsort(confidence[right], kind="stable")],
        ]
        confidence, p_chosen, right = confidence[order], p_chosen[order], right[order]
        n, wrong = confidence.size, int((~right).sum())
        bins = bin_of(confidence)
        starts = np.flatnonzero(np.r_[True, (bins[1:] != bins[:-1]) | (right[1:] != right[:-1])])
        segments = np.c_[starts, np.r_[starts[1:], n]]
        wrong_confidence, right_confidence = confidence[:wrong], confidence[wrong:]
        below = np.searchsorted(wrong_confidence, right_confidence, side="left")
        below_or_tied = np.searchsorted(wrong_confidence, right_confidence, side="right")
        # No right verdict at all (every one wrong): no run of right ones to mark.
        changes = np.flatnonzero(
            np.r_[True, (below[1:] != below[:-1]) | (below_or_tied[1:] != below_or_tied[:-1])]
        )[: below.size]
        run_starts = wrong + changes
        return _Prepared(
            order,
            confidence.astype(dtype),
            ((p_chosen - 1.0) ** 2).astype(dtype),
            wrong,
            segments,
            bins[starts],
            right[starts],
            np.c_[run_starts, np.r_[run_starts[1:], n][: run_starts.size]],
            below[changes],
            below_or_tied[changes],
        )

    def figures(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ECE, Brier, AUROC) for each column of `weights` (positions in this layout × resamples): how many
        times each position counts in each resample."""
        n, columns = weights.shape
        running = np.zeros((n + 1, columns), dtype=np.float64 if weights.dtype == np.float64 else np.float32)
        np.cumsum(weights, axis=0, out=running[1:])
        total = running[n].astype(np.float64)
        hits = np.zeros((ECE_BINS, columns))
        sure = np.zeros((ECE_BINS, columns))
        squared = np.zeros(columns)
        # Per run, small dot products: one product over all positions would be no fewer operations, and
        # slower in BLAS's threads on a shared machine.
        for (start, end), bin_, in_right in zip(
            self.segments, self.segment_bins, self.segment_right, strict=True
        ):
            sure[bin_] += self.confidence[start:end] @ weights[start:end]
            squared += self.squared[start:end] @ weights[start:end]
            if in_right:
                hits[bin_] += running[end] - running[start]
        ece = np.abs(hits - sure).sum(axis=0) / total
        brier = squared / total
        wrong_total = running[self.wrong].astype(np.float64)
        right_total = (running[n] - running[self.wrong]).astype(np.float64)
        if self.right_runs.size:
            run_weights = running[self.right_runs[:, 1]] - running[self.right_runs[:, 0]]
            # Wrong verdicts below each run, a tie counting one half (running[k]: weight of the first k).
            beaten = (running[self.below] + running[self.below_or_tied]) * 0.5
            wins = np.einsum("ij,ij->j", run_weights.astype(np.float64), beaten.astype(np.float64))
        else:
            wins = np.zeros(columns)
        pairs = right_total * wrong_total
        with np.errstate(invalid="ignore", divide="ignore"):
            auroc = np.where(pairs > 0, wins / np.where(pairs > 0, pairs, 1.0), np.nan)
        return ece, brier, auroc


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


def calibrate(
    confidence: np.ndarray, correct: np.ndarray, p_chosen: np.ndarray, *, resamples: Resamples
) -> dict[str, Any]:
    """Every figure for one judge's judgments (arrays of equal length, at least one judgment)."""
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    p_chosen = np.asarray(p_chosen, dtype=np.float64)
    # The figures themselves in double precision; the resamples in single (exact counts, and ample for an
    # interval's percentiles).
    exact = _Prepared.of(confidence, correct, p_chosen, np.float64)
    ece, brier, auroc = (float(v[0]) for v in exact.figures(np.ones((confidence.size, 1))))
    alike, sizes = np.unique(np.c_[confidence, correct, p_chosen], axis=0, return_counts=True)
    if alike.shape[0] * GROUPED_SHARE <= confidence.size:
        grouped = _Prepared.of(alike[:, 0], alike[:, 1], alike[:, 2])
        # Groups differ in size: their counts are drawn in the layout's order, not the order given.
        draws = [grouped.figures(weights) for weights in resamples.grouped(sizes[grouped.order])]
    else:
        prepared = _Prepared.of(confidence, correct, p_chosen)
        draws = [prepared.figures(weights) for weights in resamples.blocks(confidence.size)]
    ece_ci, brier_ci, auroc_ci = (_interval(np.concatenate([d[i] for d in draws])) for i in range(3))
    return {
        "accuracy": float(correct.mean()),
        "mean_confidence": float(confidence.mean()),
        "ece": ece,
        "ece_ci_low": ece_ci[0],
        "ece_ci_high": ece_ci[1],
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


def calibration(frame: pl.DataFrame, *, seed: int) -> list[CalibrationRow]:
    """One row per judge × context whose judgments carry a probability (analysis.confidence)."""
    if CONFIDENCE not in frame.columns:
        return []
    resamples = Resamples(seed)
    rows = []
    for judge, context in frame.select("judge", "context").unique(maintain_order=True).iter_rows():
        mine = frame.filter(pl.col("judge") == judge, pl.col("context") == context, pl.col("status") == "ok")
        rated = mine.filter(pl.col(CONFIDENCE).is_not_null())
        if rated.height == 0:
            continue
        sources = dict(sorted(rated.group_by(SOURCE).len().iter_rows()))
        figures = calibrate(
            rated[CONFIDENCE].to_numpy(),
            rated["correct"].cast(pl.Float64).to_numpy(),
            rated[P_CHOSEN].to_numpy(),
            resamples=resamples,
        )
        rows.append(
            CalibrationRow(
                judge=judge, context=context, answered=mine.height, n=rated.height, sources=sources, **figures
            )
        )
    return rows
