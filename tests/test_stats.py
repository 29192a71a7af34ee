from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from prbj.analysis.stats import ALL_SUBSETS, bootstrap_ci, summarize


def test_bootstrap_ci_matches_resampling_items() -> None:
    outcomes = np.array([1] * 37 + [0] * 23, dtype=float)
    low, high = bootstrap_ci(outcomes, seed=0, resamples=20000)
    rng = np.random.default_rng(1)
    means = outcomes[rng.integers(0, outcomes.size, size=(20000, outcomes.size))].mean(axis=1)
    ref_low, ref_high = np.quantile(means, [0.025, 0.975])
    assert low == pytest.approx(ref_low, abs=0.02)
    assert high == pytest.approx(ref_high, abs=0.02)
    assert low < outcomes.mean() < high


def test_bootstrap_ci_is_seeded_and_narrows_with_more_items() -> None:
    small = np.array([1, 0] * 10, dtype=float)
    large = np.array([1, 0] * 500, dtype=float)
    assert bootstrap_ci(small, seed=5) == bootstrap_ci(small, seed=5)
    s_low, s_high = bootstrap_ci(small, seed=5)
    l_low, l_high = bootstrap_ci(large, seed=5)
    assert (l_high - l_low) < (s_high - s_low) / 3


def _frame(rows):
    return pl.DataFrame(
        rows,
        schema=[
            "pair_id",
            "subset",
            "judge",
            "context",
            "status",
            "verdict",
            "correct",
            "tie",
            "chosen_words",
            "rejected_words",
        ],
        orient="row",
    )


def test_summary_counts_ties_and_failures_apart() -> None:
    frame = _frame(
        [
            ("1", "A", "j", "none", "ok", "chosen", True, False, 10, 5),
            ("2", "A", "j", "none", "ok", "tie", False, True, 10, 5),
            ("3", "B", "j", "none", "ok", "rejected", False, False, 5, 10),
            ("4", "B", "j", "none", "parse_error", None, False, False, 5, 10),
            ("5", "B", "j", "none", "api_error", None, False, False, 5, 10),
        ]
    )
    rows = {r.subset: r for r in summarize(frame, seed=0)}
    overall = rows[ALL_SUBSETS]
    assert (overall.n, overall.n_ok, overall.correct, overall.ties) == (5, 3, 1, 1)
    assert (overall.parse_errors, overall.api_errors) == (1, 1)
    assert overall.accuracy == pytest.approx(1 / 3)
    assert overall.tie_rate == pytest.approx(1 / 3)
    assert rows["A"].accuracy == 0.5 and rows["B"].accuracy == 0.0


def test_length_controlled_accuracy_exposes_a_length_bias() -> None:
    # A judge that always picks the longer answer, on a set where chosen is longer in 3 of 4 pairs:
    # raw accuracy 75%, but length-controlled 50%.
    frame = _frame(
        [
            ("1", "A", "len", "none", "ok", "chosen", True, False, 20, 10),
            ("2", "A", "len", "none", "ok", "chosen", True, False, 20, 10),
            ("3", "A", "len", "none", "ok", "chosen", True, False, 20, 10),
            ("4", "A", "len", "none", "ok", "rejected", False, False, 10, 20),
        ]
    )
    overall = summarize(frame, seed=0)[0]
    assert overall.accuracy == 0.75
    assert overall.picked_longer == 1.0
    assert overall.length_controlled_accuracy == 0.5


def test_tie_risk_counts_decided_pairs_with_a_margin_under_1e6() -> None:
    frame = _frame(
        [
            ("1", "A", "j", "none", "ok", "chosen", True, False, 10, 5),
            ("2", "A", "j", "none", "ok", "rejected", False, False, 10, 5),
            ("3", "A", "j", "none", "ok", "tie", False, True, 10, 5),
            ("4", "A", "j", "none", "ok", "chosen", True, False, 10, 5),
            ("5", "A", "j", "none", "planner_error", None, False, False, 10, 5),
        ]
    ).with_columns(pl.Series("margin", [4e-7, -9e-7, 0.0, 0.5, None]))
    overall = summarize(frame, seed=0)[0]
    # An exact tie is a tie, not a risk; a planner failure is counted apart from parse errors.
    assert overall.tie_risk == 2 and overall.ties == 1
    assert (overall.planner_errors, overall.parse_errors) == (1, 0)
    assert (
        summarize(_frame([("1", "A", "j", "none", "ok", "chosen", True, False, 1, 2)]), seed=0)[0].tie_risk
        is None
    )
