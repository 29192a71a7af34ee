from __future__ import annotations

import pytest
from scipy import stats

from prbj.analysis.mcnemar import EXACT_BELOW, chi2_continuity_p, exact_two_sided_p, mcnemar, paired_test


@pytest.mark.parametrize("lost", range(0, 13))
@pytest.mark.parametrize("gained", [0, 1, 2, 5, 9, 12])
def test_exact_p_equals_scipy_binomtest(lost: int, gained: int) -> None:
    if lost + gained == 0:
        assert exact_two_sided_p(0, 0) == 1.0
        return
    expected = stats.binomtest(lost, lost + gained, 0.5, alternative="two-sided").pvalue
    assert exact_two_sided_p(lost, gained) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_exact_p_stays_exact_where_floats_would_underflow_a_naive_sum() -> None:
    expected = stats.binomtest(3, 400, 0.5).pvalue
    assert exact_two_sided_p(3, 397) == pytest.approx(expected, rel=1e-9)
    assert 0.0 < exact_two_sided_p(3, 397) < 1e-100


@pytest.mark.parametrize(("lost", "gained"), [(30, 10), (50, 45), (100, 60), (13, 13), (200, 150)])
def test_chi2_branch_is_the_continuity_corrected_statistic(lost: int, gained: int) -> None:
    statistic = max(abs(lost - gained) - 1, 0) ** 2 / (lost + gained)
    assert chi2_continuity_p(lost, gained) == pytest.approx(stats.chi2.sf(statistic, df=1), rel=1e-9)


@pytest.mark.parametrize(("lost", "gained"), [(40, 20), (70, 50), (120, 80)])
def test_chi2_branch_approximates_the_exact_test_for_many_discordant_items(lost: int, gained: int) -> None:
    exact = stats.binomtest(lost, lost + gained, 0.5).pvalue
    assert chi2_continuity_p(lost, gained) == pytest.approx(exact, rel=0.1)


def test_method_switches_at_the_threshold() -> None:
    below = mcnemar(EXACT_BELOW - 1, 0)
    at = mcnemar(EXACT_BELOW, 0)
    assert below.method == "exact" and at.method == "chi2"
    assert below.p_value == pytest.approx(stats.binomtest(EXACT_BELOW - 1, EXACT_BELOW - 1, 0.5).pvalue)


def test_paired_test_counts_only_items_both_runs_judged() -> None:
    baseline = {"a": True, "b": True, "c": False, "d": True, "only-base": True}
    current = {"a": False, "b": True, "c": True, "d": False, "only-new": False}
    paired, result = paired_test(baseline, current)
    assert paired == 4
    assert (result.lost, result.gained) == (2, 1)
    assert result.p_value == pytest.approx(stats.binomtest(2, 3, 0.5).pvalue)


def test_negative_counts_are_rejected() -> None:
    with pytest.raises(ValueError):
        mcnemar(-1, 3)


@pytest.mark.parametrize("n", [13, 30, 500])
def test_equal_discordant_counts_give_p_one_in_both_branches(n: int) -> None:
    # The continuity correction is clamped at zero (see chi2_continuity_p): lost = gained is no evidence at all.
    assert chi2_continuity_p(n, n) == 1.0
    assert chi2_continuity_p(n, n + 1) == 1.0
    assert exact_two_sided_p(n, n) == 1.0
    assert mcnemar(n, n).p_value == 1.0
