"""How well one ordering of reward models predicts another: rank correlations, NDCG and rank-biased overlap,
with bootstrap intervals over reward models and over benchmark items.

Every metric takes `benchmark` (the score that orders RMs, e.g. accuracy on this benchmark) and `downstream`
(the outcome we want predicted, e.g. best-of-k gold score) as arrays whose last axis runs over RMs. Leading axes
are a batch: the bootstrap evaluates thousands of resamples in one call instead of a Python loop. The value is
NaN when the metric is undefined for the input (a constant column for the correlations, all-zero gains for
NDCG); bootstraps drop such resamples and report how many they kept.

Formulas (n RMs; ties handled as stated per metric; docs/correlation.md has the long form):
- Spearman ρ: Pearson r of the average ranks (ties share the mean of the ranks they span).
- Kendall τ-b: (C − D) / sqrt((P − Tx)(P − Ty)) over the P = n(n−1)/2 pairs; Tx, Ty count pairs tied in x, y.
- weighted Kendall τ: Vigna's additive hyperbolic τ_h, as `scipy.stats.weightedtau` computes it by default.
- Pearson r: covariance over the product of standard deviations.
- NDCG: RMs ordered by benchmark score, gain = downstream score, discount 1/log2(position + 1), divided by
  the DCG of the order by downstream score; ties in the benchmark score are averaged over all their orders.
- RBO: Webber et al.'s extrapolated RBO_ext with persistence p; ties averaged over all orders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from prbj.analysis.stats import BOOTSTRAP_RESAMPLES, CONFIDENCE

DEFAULT_RBO_P = 0.9
# Resamples evaluated at once are capped so that the (batch, n, n) pair matrices stay a few tens of MB.
_PAIR_CELLS_PER_CHUNK = 4_000_000

Metric = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _pair(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"benchmark and downstream scores differ in shape: {x.shape} vs {y.shape}")
    if x.shape[-1] < 2:
        raise ValueError("a correlation needs at least two reward models")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("scores must be finite numbers")
    return x, y


def _scalar_or_batch(values: np.ndarray) -> np.ndarray:
    return values[()] if values.ndim == 0 else values


def _signs(v: np.ndarray) -> np.ndarray:
    """sign(v_j − v_i) for every ordered pair (i, j): shape (..., n, n)."""
    return np.sign(v[..., None, :] - v[..., :, None])


def average_ranks(v: np.ndarray) -> np.ndarray:
    """1-based ranks along the last axis, ascending; tied values share the mean of the ranks they span."""
    v = np.asarray(v, dtype=np.float64)
    below = (v[..., None, :] < v[..., :, None]).sum(axis=-1)
    equal = (v[..., None, :] == v[..., :, None]).sum(axis=-1)
    return below + (equal + 1) / 2.0


def _positions_taken(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ordering by v descending: how many items rank strictly above each item, and the size of its tie
    group (itself included). A tie group of size g starting after a items occupies positions a .. a+g−1."""
    above = (v[..., None, :] > v[..., :, None]).sum(axis=-1)
    tied = (v[..., None, :] == v[..., :, None]).sum(axis=-1)
    return above, tied


def pearson(benchmark: np.ndarray, downstream: np.ndarray) -> np.ndarray:
    """Pearson's r; NaN when either side is constant."""
    x, y = _pair(benchmark, downstream)
    return _scalar_or_batch(_pearson(x, y))


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    dx = x - x.mean(axis=-1, keepdims=True)
    dy = y - y.mean(axis=-1, keepdims=True)
    constant = (np.ptp(x, axis=-1) == 0) | (np.ptp(y, axis=-1) == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (dx * dy).sum(axis=-1) / np.sqrt((dx * dx).sum(axis=-1) * (dy * dy).sum(axis=-1))
    return np.where(constant, np.nan, np.clip(r, -1.0, 1.0))


def spearman(benchmark: np.ndarray, downstream: np.ndarray) -> np.ndarray:
    """Spearman's ρ: Pearson's r of the average ranks (so ties are handled as scipy.stats.spearmanr does)."""
    x, y = _pair(benchmark, downstream)
    return _scalar_or_batch(_pearson(average_ranks(x), average_ranks(y)))


def kendall_tau_b(benchmark: np.ndarray, downstream: np.ndarray) -> np.ndarray:
    """Kendall's τ-b = (C − D) / sqrt((P − Tx)(P − Ty)); NaN when either side is constant."""
    x, y = _pair(benchmark, downstream)
    sx, sy = _signs(x), _signs(y)
    # Summing over all ordered pairs counts each unordered pair twice on every side of the ratio.
    concordance = (sx * sy).sum(axis=(-2, -1))
    untied_x = np.abs(sx).sum(axis=(-2, -1))
    untied_y = np.abs(sy).sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = concordance / np.sqrt(untied_x * untied_y)
    return _scalar_or_batch(np.clip(tau, -1.0, 1.0))


def _importance_rank(primary: np.ndarray, secondary: np.ndarray) -> np.ndarray:
    """0-based rank by (primary, secondary) decreasing lexicographically; 0 = most important. Items tied on
    both get distinct ranks by position; which one gets which does not change τ_h, because tied items pair
    with every other item with the same signs."""
    n = primary.shape[-1]
    p_i, p_j = primary[..., :, None], primary[..., None, :]
    s_i, s_j = secondary[..., :, None], secondary[..., None, :]
    earlier = np.arange(n)[None, :] < np.arange(n)[:, None]
    ahead = (p_j > p_i) | ((p_j == p_i) & (s_j > s_i)) | ((p_j == p_i) & (s_j == s_i) & earlier)
    return ahead.sum(axis=-1)


def _weighted_tau_given_rank(x: np.ndarray, y: np.ndarray, rank: np.ndarray) -> np.ndarray:
    weight = 1.0 / (rank + 1.0)
    pair_weight = weight[..., :, None] + weight[..., None, :]
    sx, sy = _signs(x), _signs(y)
    numerator = (pair_weight * sx * sy).sum(axis=(-2, -1))
    untied_x = (pair_weight * np.abs(sx)).sum(axis=(-2, -1))
    untied_y = (pair_weight * np.abs(sy)).sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return numerator / np.sqrt(untied_x * untied_y)


def weighted_kendall_tau(benchmark: np.ndarray, downstream: np.ndarray) -> np.ndarray:
    """Vigna's additive hyperbolic weighted τ (scipy.stats.weightedtau with its defaults).

    A pair (i, j) weighs 1/(r_i + 1) + 1/(r_j + 1), where r is the 0-based importance rank; the statistic is
    the τ-b-like ratio of weighted concordance to weighted untied pairs. With no external importance, the
    value is the mean of the statistic under the rank by (benchmark, downstream) and under the rank by
    (downstream, benchmark), both decreasing: disagreements among the top RMs of either ordering cost most.
    """
    x, y = _pair(benchmark, downstream)
    tau = (
        _weighted_tau_given_rank(x, y, _importance_rank(x, y))
        + _weighted_tau_given_rank(x, y, _importance_rank(y, x))
    ) / 2.0
    return _scalar_or_batch(np.clip(tau, -1.0, 1.0))


def _discounts(n: int) -> np.ndarray:
    """Discount of 0-based position q: 1 / log2(q + 2), i.e. 1 / log2(position + 1) for 1-based positions."""
    return 1.0 / np.log2(np.arange(n) + 2.0)


def ndcg(benchmark: np.ndarray, downstream: np.ndarray) -> np.ndarray:
    """NDCG of the order by benchmark score, with the downstream score as gain:

        DCG  = Σ_i g_i · E[1 / log2(pos_i + 1)],  pos_i = 1-based position of RM i when sorted by benchmark
               score descending; the expectation is over the orders of RMs tied on benchmark score, so a tie
               group spanning positions a+1 .. a+m gives each member the mean discount of those positions;
        IDCG = Σ_q g_(q) / log2(q + 1) with the gains sorted descending;
        NDCG = DCG / IDCG  (NaN when every gain is 0).

    Gains must be non-negative: with negative gains the ratio is no longer bounded by [0, 1]. Shift them first
    (the correlate command subtracts the smallest downstream score when any is negative, and says so).
    """
    x, gains = _pair(benchmark, downstream)
    if (gains < 0).any():
        raise ValueError("NDCG needs non-negative gains; shift the downstream scores first")
    n = x.shape[-1]
    discount = _discounts(n)
    cumulative = np.concatenate([[0.0], np.cumsum(discount)])
    above, tied = _positions_taken(x)
    mean_discount = (cumulative[above + tied] - cumulative[above]) / tied
    dcg = (gains * mean_discount).sum(axis=-1)
    ideal = (-np.sort(-gains, axis=-1) * discount).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.where(ideal > 0, dcg / ideal, np.nan)
    return _scalar_or_batch(value)


def rank_biased_overlap(
    benchmark: np.ndarray, downstream: np.ndarray, p: float = DEFAULT_RBO_P
) -> np.ndarray:
    """Extrapolated rank-biased overlap (Webber, Moffat & Zobel 2010, eq. 32) of the two descending orders of
    the same n RMs:

        RBO_ext = (X_n / n) · p^n + (1 − p)/p · Σ_{d=1..n} (X_d / d) · p^d,

    where X_d is the number of RMs in the top d of both orders (X_n = n). Ties are averaged over all orders,
    independently in the two lists: an RM in a tie group of size m that starts after a RMs is in the top d
    with probability clip(d − a, 0, m) / m, and X_d is replaced by its expectation Σ_i P_S(i, d) · P_T(i, d)
    (RBO_ext is linear in X_d, so this is the exact mean over tie orders). Identical orders give 1.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"RBO persistence p must be in (0, 1), got {p}")
    x, y = _pair(benchmark, downstream)
    n = x.shape[-1]
    depths = np.arange(1, n + 1, dtype=np.float64)
    in_top_x = _probability_in_top(x, depths)
    in_top_y = _probability_in_top(y, depths)
    overlap = (in_top_x * in_top_y).sum(axis=-2)  # (..., depth)
    agreement = overlap / depths
    weights = p**depths
    value = (1.0 - p) / p * (agreement * weights).sum(axis=-1) + agreement[..., -1] * p**n
    return _scalar_or_batch(value)


def _probability_in_top(v: np.ndarray, depths: np.ndarray) -> np.ndarray:
    """P(item i is among the first d of the descending order) under a uniformly random order of ties:
    shape (..., item, depth)."""
    above, tied = _positions_taken(v)
    inside = np.clip(depths - above[..., :, None], 0.0, tied[..., :, None])
    return inside / tied[..., :, None]


METRICS: dict[str, Metric] = {
    "spearman": spearman,
    "kendall_tau": kendall_tau_b,
    "weighted_tau": weighted_kendall_tau,
    "pearson": pearson,
    "ndcg": ndcg,
    "rbo": rank_biased_overlap,
}
METRIC_LABELS: dict[str, str] = {
    "spearman": "Spearman ρ",
    "kendall_tau": "Kendall τ-b",
    "weighted_tau": "weighted τ",
    "pearson": "Pearson r",
    "ndcg": "NDCG",
    "rbo": "RBO",
}


def metric_functions(rbo_p: float = DEFAULT_RBO_P) -> dict[str, Metric]:
    functions = dict(METRICS)
    functions["rbo"] = lambda x, y: rank_biased_overlap(x, y, p=rbo_p)
    return functions


def all_metrics(
    benchmark: np.ndarray, downstream: np.ndarray, *, rbo_p: float = DEFAULT_RBO_P
) -> dict[str, float]:
    return {name: float(fn(benchmark, downstream)) for name, fn in metric_functions(rbo_p).items()}


@dataclass(frozen=True, slots=True)
class Interval:
    """A percentile bootstrap interval; `used` of `resamples` were defined (the rest had a constant side)."""

    low: float | None
    high: float | None
    used: int
    resamples: int

    def as_dict(self) -> dict[str, float | int | None]:
        return {"low": self.low, "high": self.high, "used": self.used, "resamples": self.resamples}


def _interval(values: np.ndarray, confidence: float) -> Interval:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return Interval(None, None, 0, values.size)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(finite, [alpha, 1.0 - alpha])
    return Interval(float(low), float(high), int(finite.size), int(values.size))


def _chunk_size(n: int) -> int:
    return max(1, _PAIR_CELLS_PER_CHUNK // max(1, n * n))


def bootstrap_over_rms(
    benchmark: np.ndarray,
    downstream: np.ndarray,
    metrics: Mapping[str, Metric],
    *,
    seed: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> dict[str, Interval]:
    """Resample RMs with replacement (the same resamples for every metric) and take percentile intervals.
    A duplicated RM is a separate item tied with its copy on both sides."""
    x, y = _pair(benchmark, downstream)
    n = x.shape[-1]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n, size=(resamples, n))
    values = {name: np.empty(resamples) for name in metrics}
    step = _chunk_size(n)
    for start in range(0, resamples, step):
        chunk = picks[start : start + step]
        for name, fn in metrics.items():
            values[name][start : start + step] = fn(x[chunk], y[chunk])
    return {name: _interval(v, confidence) for name, v in values.items()}


def bootstrap_over_items(
    correct: np.ndarray,
    judged: np.ndarray,
    downstream: np.ndarray,
    metrics: Mapping[str, Metric],
    *,
    seed: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> dict[str, Interval]:
    """Resample benchmark items with replacement (the same items for every RM: a paired bootstrap), recompute
    each RM's accuracy = correct / judged over the resample, and recompute the metric against the fixed
    downstream scores. `correct` and `judged` are (items × RMs) 0/1 arrays; an item an RM failed on counts in
    neither, as in the accuracy of summary.json."""
    correct = np.asarray(correct, dtype=np.float64)
    judged = np.asarray(judged, dtype=np.float64)
    y = np.asarray(downstream, dtype=np.float64)
    items, n = correct.shape
    if judged.shape != correct.shape or y.shape != (n,):
        raise ValueError("correct, judged and downstream disagree on the number of items or RMs")
    rng = np.random.default_rng(seed)
    uniform = np.full(items, 1.0 / items)
    values = {name: np.empty(resamples) for name in metrics}
    # Draws per chunk bounded by both the (chunk × items) count matrix and the (chunk × n × n) pair matrices.
    step = max(1, min(_chunk_size(n), _PAIR_CELLS_PER_CHUNK // max(1, items)))
    for start in range(0, resamples, step):
        size = min(step, resamples - start)
        counts = rng.multinomial(items, uniform, size=size).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            accuracy = (counts @ correct) / (counts @ judged)
        usable = np.isfinite(accuracy).all(axis=-1)
        safe = np.where(usable[:, None], accuracy, 0.0)
        targets = np.broadcast_to(y, safe.shape)
        for name, fn in metrics.items():
            values[name][start : start + size] = np.where(usable, fn(safe, targets), np.nan)
    return {name: _interval(v, confidence) for name, v in values.items()}
