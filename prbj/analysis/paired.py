"""Paired right/wrong outcomes of two judgments of the same pairs: the interval of their accuracy difference,
from the bootstrap over pairs (so both sides of a pair always travel together), or over users (t over users
with the jackknife's standard error, prbj.analysis.clusters) when users repeat."""

from __future__ import annotations

import numpy as np

from prbj.analysis.clusters import PairedClusters, paired_cluster_interval
from prbj.analysis.stats import BOOTSTRAP_RESAMPLES, CONFIDENCE


def paired_difference_ci(
    first: np.ndarray,
    second: np.ndarray,
    *,
    seed: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(first) − mean(second) over paired 0/1 outcomes.

    A pair's difference is −1, 0 or +1, so resampling pairs with replacement is the same as drawing the
    three counts from a multinomial: exact, and cheap at any size."""
    a = np.asarray(first, dtype=np.float64)
    b = np.asarray(second, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError("paired outcomes must have the same length")
    n = a.size
    if n == 0:
        return (float("nan"), float("nan"))
    diff = a - b
    shares = [float(np.mean(diff == value)) for value in (-1.0, 0.0, 1.0)]
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, shares, size=resamples)
    means = (counts[:, 2] - counts[:, 0]) / n
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return (float(low), float(high))


def paired_ci(
    first: np.ndarray, second: np.ndarray, *, seed: int, clusters: PairedClusters | None = None
) -> tuple[float, float]:
    """The interval of mean(first) − mean(second): over users (with all their pairs) when `clusters` groups the
    pairs by user and some user has several, else resampling pairs."""
    if clusters is not None and clusters.repeat:
        return paired_cluster_interval(clusters, confidence=CONFIDENCE)
    return paired_difference_ci(first, second, seed=seed)
