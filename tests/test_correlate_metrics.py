"""Every correlation metric against values worked out by hand and, where scipy has the metric, against scipy."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from scipy import stats

from prbj.analysis.correlate import (
    METRICS,
    all_metrics,
    bootstrap_over_items,
    bootstrap_over_rms,
    kendall_tau_b,
    metric_functions,
    ndcg,
    pearson,
    rank_biased_overlap,
    spearman,
    weighted_kendall_tau,
)

INCREASING = np.array([1.0, 2.0, 3.0, 4.0])


def _scipy(name: str, x: np.ndarray, y: np.ndarray) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on constant input and returns NaN, as we do
        if name == "spearman":
            return float(stats.spearmanr(x, y).statistic)
        if name == "kendall_tau":
            return float(stats.kendalltau(x, y, variant="b").statistic)
        if name == "weighted_tau":
            return float(stats.weightedtau(x, y).statistic)
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            return math.nan
        return float(stats.pearsonr(x, y).statistic)


def test_identical_orders_score_one_everywhere() -> None:
    values = all_metrics(INCREASING, 10 * INCREASING)
    assert values == pytest.approx(dict.fromkeys(METRICS, 1.0))


def test_fully_reversed_rankings() -> None:
    reversed_scores = INCREASING[::-1].copy()
    for metric in (spearman, kendall_tau_b, weighted_kendall_tau, pearson):
        assert metric(INCREASING, reversed_scores) == pytest.approx(-1.0)
    # NDCG: the benchmark puts the RMs in the order of gains 1, 2, 3, 4; the ideal order is 4, 3, 2, 1.
    dcg = 1 / math.log2(2) + 2 / math.log2(3) + 3 / math.log2(4) + 4 / math.log2(5)
    ideal = 4 / math.log2(2) + 3 / math.log2(3) + 2 / math.log2(4) + 1 / math.log2(5)
    assert ndcg(INCREASING[::-1], INCREASING) == pytest.approx(dcg / ideal)
    # RBO of (a, b, c, d) vs (d, c, b, a), p = 0.9: overlaps X_d = 0, 0, 2, 4.
    # (1 − p)/p · (0 + 0 + 2/3 · 0.9^3 + 4/4 · 0.9^4) + 0.9^4 = 0.1269 + 0.6561
    assert rank_biased_overlap(INCREASING, reversed_scores) == pytest.approx(0.7830, abs=1e-12)


def test_rbo_three_reversed_by_hand() -> None:
    # X_d = 0, 1, 3: (0.1/0.9) · (0.5 · 0.81 + 1 · 0.729) + 0.729 = 0.126 + 0.729
    assert rank_biased_overlap([3, 2, 1], [1, 2, 3]) == pytest.approx(0.855, abs=1e-12)
    # A smaller p weighs the top more, where these lists disagree completely.
    assert rank_biased_overlap([3, 2, 1], [1, 2, 3], p=0.5) < 0.855


def test_kendall_and_spearman_with_ties_by_hand() -> None:
    x, y = np.array([1.0, 2.0, 2.0, 3.0]), np.array([1.0, 3.0, 2.0, 4.0])
    # 6 pairs: 5 concordant, none discordant, one tied in x only: 5 / sqrt((6 − 1) · 6).
    assert kendall_tau_b(x, y) == pytest.approx(5 / math.sqrt(30))
    # Average ranks (1, 2.5, 2.5, 4) and (1, 3, 2, 4): Σdxdy = 4.5, Σdx² = 4.5, Σdy² = 5.
    assert spearman(x, y) == pytest.approx(4.5 / math.sqrt(4.5 * 5))


def test_weighted_tau_by_hand() -> None:
    # Benchmark order a > b > c, downstream order a > c > b. Under either importance rank the pair weights
    # (hyperbolic, additive) are C: 1 + 1/2 and 1 + 1/3, D: 1/2 + 1/3, total 11/3: τ = (3/2 + 4/3 − 5/6) / (11/3).
    value = weighted_kendall_tau([3.0, 2.0, 1.0], [3.0, 1.0, 2.0])
    assert value == pytest.approx(6 / 11)
    assert value == pytest.approx(stats.weightedtau([3.0, 2.0, 1.0], [3.0, 1.0, 2.0]).statistic)
    # The weighting matters: the same one swap, at the bottom, costs less than at the top.
    assert weighted_kendall_tau([4, 3, 2, 1], [4, 3, 1, 2]) > weighted_kendall_tau([4, 3, 2, 1], [3, 4, 2, 1])


@pytest.mark.parametrize("name", ["spearman", "kendall_tau", "weighted_tau", "pearson"])
def test_matches_scipy_on_random_rankings_with_ties(name: str) -> None:
    rng = np.random.default_rng(7)
    metric = METRICS[name]
    for _ in range(400):
        n = int(rng.integers(2, 12))
        # Few distinct values: ties in x, in y and in both are common; constant columns happen too.
        x = rng.integers(0, 4, n).astype(float)
        y = rng.integers(0, 4, n).astype(float)
        ours, theirs = float(metric(x, y)), _scipy(name, x, y)
        if math.isnan(theirs):
            assert math.isnan(ours), (x, y)
        else:
            assert ours == pytest.approx(theirs, abs=1e-12), (x, y)


def test_matches_scipy_on_continuous_scores() -> None:
    rng = np.random.default_rng(11)
    x, y = rng.normal(size=25), rng.normal(size=25)
    for name in ("spearman", "kendall_tau", "weighted_tau", "pearson"):
        assert float(METRICS[name](x, y)) == pytest.approx(_scipy(name, x, y), abs=1e-12)


def test_ndcg_averages_over_tie_orders_by_hand() -> None:
    # Benchmark: a first, b and c tied. Gains a = 1, b = 3, c = 0.
    tied_discount = (1 / math.log2(3) + 1 / math.log2(4)) / 2
    expected = (1 * 1 + 3 * tied_discount + 0 * tied_discount) / (3 + 1 / math.log2(3))
    assert ndcg([2.0, 1.0, 1.0], [1.0, 3.0, 0.0]) == pytest.approx(expected)


def test_rbo_averages_over_tie_orders_by_hand() -> None:
    # S = a, {b, c}; T = a, b, c. Tie order a, b, c gives 1; a, c, b gives X_d = 1, 1, 3.
    other_order = (0.1 / 0.9) * (1 * 0.9 + 0.5 * 0.81 + 1 * 0.729) + 0.729
    assert rank_biased_overlap([2.0, 1.0, 1.0], [3.0, 2.0, 1.0]) == pytest.approx((1.0 + other_order) / 2)


def _descending_orders(values: np.ndarray) -> list[tuple[int, ...]]:
    return [
        order
        for order in itertools.permutations(range(len(values)))
        if all(values[order[i]] >= values[order[i + 1]] for i in range(len(order) - 1))
    ]


def _plain_rbo(s: tuple[int, ...], t: tuple[int, ...], p: float) -> float:
    """RBO_ext of two complete lists without ties, straight from the formula."""
    n = len(s)
    head = sum(len(set(s[:d]) & set(t[:d])) / d * p**d for d in range(1, n + 1))
    return (1 - p) / p * head + p**n


def test_tie_handling_equals_the_mean_over_every_tie_order() -> None:
    """Brute force: enumerate every order of the ties and average plain NDCG / RBO over them."""
    rng = np.random.default_rng(3)
    p = 0.8
    for _ in range(60):
        n = int(rng.integers(2, 6))
        x = rng.integers(0, 3, n).astype(float)
        y = rng.integers(0, 3, n).astype(float)
        discount = 1 / np.log2(np.arange(n) + 2)
        if y.sum() > 0:
            ideal = (np.sort(y)[::-1] * discount).sum()
            mean_ndcg = np.mean([(y[list(o)] * discount).sum() / ideal for o in _descending_orders(x)])
            assert ndcg(x, y) == pytest.approx(mean_ndcg)

        mean_rbo = np.mean(
            [_plain_rbo(s, t, p) for s in _descending_orders(x) for t in _descending_orders(y)]
        )
        assert rank_biased_overlap(x, y, p=p) == pytest.approx(mean_rbo)


def test_ndcg_refuses_negative_gains_and_is_undefined_for_zero_gains() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        ndcg([1.0, 2.0, 3.0], [0.5, -0.1, 0.2])
    assert math.isnan(ndcg([1.0, 2.0, 3.0], [0.0, 0.0, 0.0]))


def test_constant_side_gives_nan_for_correlations() -> None:
    for metric in (spearman, kendall_tau_b, weighted_kendall_tau, pearson):
        assert math.isnan(metric([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))


def test_batched_call_equals_row_by_row() -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(0, 4, (6, 7)).astype(float)
    y = rng.random((6, 7))
    for name, metric in metric_functions(0.7).items():
        rows = [float(metric(x[i], y[i])) for i in range(6)]
        np.testing.assert_allclose(metric(x, y), rows, equal_nan=True, err_msg=name)


def test_bootstrap_over_rms_is_seeded_and_skips_degenerate_resamples() -> None:
    x = np.array([0.55, 0.61, 0.70, 0.72, 0.80])
    y = np.array([0.30, 0.35, 0.33, 0.50, 0.52])
    first = bootstrap_over_rms(x, y, metric_functions(), seed=1, resamples=500)
    again = bootstrap_over_rms(x, y, metric_functions(), seed=1, resamples=500)
    other = bootstrap_over_rms(x, y, metric_functions(), seed=2, resamples=500)
    assert first == again
    assert first["spearman"] != other["spearman"]
    point = spearman(x, y)
    assert first["spearman"].low <= point <= first["spearman"].high
    # With 5 RMs, some resamples draw one RM five times: a constant column, dropped and counted.
    assert 0 < first["spearman"].used < 500
    assert first["ndcg"].used == 500


def test_bootstrap_intervals_are_95_percent_two_sided() -> None:
    """Issue 31 (a mutation the suite let through): the percentile interval's ends are the 2.5% and 97.5%
    quantiles of the resamples, not 5% and 95%. The resampled mean of 200 evenly spread RM scores is normal to
    a good approximation: its ends sit 1.96 standard errors from the mean (1.645 for a 90% interval)."""
    x = np.arange(200, dtype=np.float64)
    y = x[::-1].copy()
    result = bootstrap_over_rms(x, y, {"mean": lambda a, b: a.mean(axis=-1)}, seed=3, resamples=20_000)
    interval = result["mean"]
    assert interval.low is not None and interval.high is not None
    error = x.std() / math.sqrt(x.size)
    assert (x.mean() - interval.low) / error == pytest.approx(1.96, abs=0.08)
    assert (interval.high - x.mean()) / error == pytest.approx(1.96, abs=0.08)


def test_bootstrap_over_items_recomputes_accuracy_per_resample() -> None:
    rng = np.random.default_rng(0)
    items = 400
    # Three RMs far apart in accuracy whose downstream order agrees: every resample keeps the order.
    correct = (rng.random((items, 3)) < np.array([0.9, 0.6, 0.3])).astype(float)
    judged = np.ones_like(correct)
    downstream = np.array([3.0, 2.0, 1.0])
    separated = bootstrap_over_items(correct, judged, downstream, metric_functions(), seed=0, resamples=300)
    assert (separated["spearman"].low, separated["spearman"].high) == (1.0, 1.0)
    # Two RMs with nearly equal accuracy: resamples flip them, so the interval opens up.
    close = (rng.random((items, 3)) < np.array([0.61, 0.60, 0.3])).astype(float)
    loose = bootstrap_over_items(close, judged, downstream, metric_functions(), seed=0, resamples=300)
    assert loose["spearman"].low < 1.0


def test_item_bootstrap_leaves_failed_items_out_of_the_accuracy() -> None:
    items = 50
    correct = np.zeros((items, 3))
    judged = np.ones((items, 3))
    correct[:, 0] = 1.0
    judged[::2, 0] = 0.0  # RM 0 failed half the items but was right on all it judged: accuracy 1.0
    correct[:40, 1] = 1.0  # 0.8
    correct[:10, 2] = 1.0  # 0.2
    downstream = np.array([3.0, 2.0, 1.0])
    result = bootstrap_over_items(correct, judged, downstream, {"pearson": pearson}, seed=0, resamples=200)
    # If failures counted as wrong, RM 0 would sit at 0.5, below RM 1, and r would drop in many resamples.
    assert result["pearson"].low > 0.9
