"""Each claim's verdict on constructed runs where the claim holds, where it fails, and where the pairs (or RMs)
are too few to tell, plus "not tested" when the experiment lacks its inputs."""

from __future__ import annotations

import numpy as np
import pytest

from prbj.analysis.power import pairs_needed
from prbj.experiments.claims import (
    PRBJ_COLUMN,
    oracle_gap,
    planner_helps,
    profile_helps,
    ranks_closer,
    size_trend,
)
from prbj.experiments.figures import Outcomes, SizePoint, size_figure
from prbj.experiments.schema import ClaimSettings

SETTINGS = ClaimSettings(smallest_effect=0.02, oracle_gap=0.10, meaningful_rho=0.5)
SEED = 42


def outcomes(entry: str, context: str, correct: np.ndarray) -> Outcomes:
    return Outcomes(entry, context, {f"p{i:05d}": bool(c) for i, c in enumerate(correct)})


def share(n: int, right: int, *, offset: int = 0) -> np.ndarray:
    """n outcomes with `right` of them correct, the correct ones starting at `offset` (wrapping)."""
    values = np.zeros(n, dtype=bool)
    values[(np.arange(right) + offset) % n] = True
    return values


# --- (a) far below the oracle ---------------------------------------------------------------------------------


def test_oracle_gap_supported_when_the_best_judge_is_far_below() -> None:
    claim = oracle_gap(
        [outcomes("j", "profile", share(400, 240)), outcomes("j", "oracle", share(400, 380))],
        SETTINGS,
        seed=SEED,
    )
    assert claim.verdict == "supported"
    assert claim.value == pytest.approx(0.35)
    assert claim.ci_low is not None and claim.ci_low > 0.10


def test_oracle_gap_contradicted_when_the_oracle_is_barely_better() -> None:
    claim = oracle_gap(
        [outcomes("j", "profile", share(2000, 1200)), outcomes("j", "oracle", share(2000, 1240))],
        SETTINGS,
        seed=SEED,
    )
    assert claim.verdict == "contradicted"
    assert claim.ci_high is not None and claim.ci_high < 0.10


def test_oracle_gap_inconclusive_on_few_pairs_says_how_many_would_settle_it() -> None:
    best, oracle = share(20, 12), share(20, 15)
    claim = oracle_gap([outcomes("j", "none", best), outcomes("j", "oracle", oracle)], SETTINGS, seed=SEED)
    assert claim.verdict == "inconclusive"
    discordance = float(np.mean(best != oracle))
    assert claim.pairs_needed == pairs_needed(discordance, 0.10)


def test_oracle_gap_compares_the_best_fair_setting_with_its_own_oracle() -> None:
    claim = oracle_gap(
        [
            outcomes("weak", "profile", share(400, 200)),
            outcomes("strong", "none", share(400, 300)),
            outcomes("strong", "oracle", share(400, 390)),
            outcomes(
                "strong", "swapped-profile", share(400, 399)
            ),  # a control, never "the best fair setting"
        ],
        SETTINGS,
        seed=SEED,
    )
    assert "strong · none" in claim.detail and claim.value == pytest.approx(0.225)


def test_oracle_gap_not_tested_without_an_oracle_run() -> None:
    claim = oracle_gap([outcomes("j", "profile", share(50, 30))], SETTINGS, seed=SEED)
    assert claim.verdict == "not tested" and "oracle" in claim.missing


# --- (b) size ---------------------------------------------------------------------------------------------------


def sizes(accuracies: list[float]) -> list[SizePoint]:
    return [SizePoint(f"rm{i}", "none", 0.5 * 2**i, a) for i, a in enumerate(accuracies)]


def test_size_claim_contradicted_when_accuracy_grows_with_size() -> None:
    claim = size_trend(size_figure(sizes([0.50 + 0.02 * i for i in range(12)]), seed=SEED), SETTINGS)
    assert claim.verdict == "contradicted"
    assert claim.value == pytest.approx(1.0)


def test_size_claim_supported_when_accuracy_falls_with_size() -> None:
    claim = size_trend(size_figure(sizes([0.80 - 0.02 * i for i in range(12)]), seed=SEED), SETTINGS)
    assert claim.verdict == "supported"
    assert claim.ci_high is not None and claim.ci_high < 0.5


def test_size_claim_inconclusive_on_a_few_models() -> None:
    claim = size_trend(size_figure(sizes([0.6, 0.55, 0.7, 0.65]), seed=SEED), SETTINGS)
    assert claim.verdict == "inconclusive"
    assert claim.ci_low is not None and claim.ci_high is not None and claim.ci_low < 0 < 0.5 < claim.ci_high


def test_size_claim_not_tested_below_three_sizes() -> None:
    claim = size_trend(size_figure(sizes([0.6, 0.7]), seed=SEED), SETTINGS)
    assert claim.verdict == "not tested" and "at least 3" in claim.missing


# --- (c) the raw profile does not help; (d) planner aspects help ------------------------------------------------


def contexts(
    context: str, with_context: np.ndarray, without: np.ndarray, *, judges: int = 2
) -> list[Outcomes]:
    found = []
    for judge in range(judges):
        found.append(outcomes(f"j{judge}", context, with_context))
        found.append(outcomes(f"j{judge}", "none", without))
    return found


def test_profile_claim_supported_when_the_profile_changes_nothing() -> None:
    none = share(2000, 1200)
    profile = none.copy()
    profile[:10] = ~profile[:10]  # a handful of flips both ways
    claim = profile_helps(contexts("profile", profile, none), SETTINGS, seed=SEED)
    assert claim.verdict == "supported"
    assert claim.ci_high is not None and claim.ci_high < 0.02


def test_profile_claim_contradicted_when_the_profile_helps() -> None:
    claim = profile_helps(contexts("profile", share(500, 350), share(500, 250)), SETTINGS, seed=SEED)
    assert claim.verdict == "contradicted"
    assert claim.value == pytest.approx(0.2)


def test_profile_claim_inconclusive_on_few_pairs() -> None:
    claim = profile_helps(contexts("profile", share(30, 17), share(30, 16, offset=5)), SETTINGS, seed=SEED)
    assert claim.verdict == "inconclusive" and claim.pairs_needed is not None and claim.pairs_needed > 30


def test_planner_claim_supported_when_aspects_help() -> None:
    claim = planner_helps(contexts("planner", share(500, 350), share(500, 250)), SETTINGS, seed=SEED)
    assert claim.verdict == "supported"


def test_planner_claim_contradicted_when_aspects_do_not_help() -> None:
    claim = planner_helps(contexts("planner", share(2000, 1000), share(2000, 1010)), SETTINGS, seed=SEED)
    assert claim.verdict == "contradicted"


def test_planner_claim_inconclusive_on_few_pairs() -> None:
    claim = planner_helps(contexts("planner", share(30, 18), share(30, 16, offset=7)), SETTINGS, seed=SEED)
    assert claim.verdict == "inconclusive" and claim.pairs_needed is not None


def test_context_claims_not_tested_without_both_contexts() -> None:
    only_profile = [outcomes("j", "profile", share(40, 20))]
    assert profile_helps(only_profile, SETTINGS, seed=SEED).verdict == "not tested"
    assert "[planner]" in planner_helps(only_profile, SETTINGS, seed=SEED).missing


# --- (e) closer to downstream than other benchmarks ------------------------------------------------------------


def comparison(benchmark: str, values: list[float], downstream: list[float]) -> dict[str, object]:
    return {
        "source": "bon",
        "subset": "all",
        "k": 8,
        "benchmark": benchmark,
        "rms": [
            {"rm": f"rm{i}", "benchmark": b, "downstream": d}
            for i, (b, d) in enumerate(zip(values, downstream, strict=True))
        ],
    }


def test_ranks_closer_supported_when_this_benchmark_orders_rms_like_downstream() -> None:
    downstream = [float(i) for i in range(30)]
    claim = ranks_closer(
        [
            comparison(PRBJ_COLUMN, [0.5 + 0.01 * i for i in range(30)], downstream),
            comparison("Other", [0.9 - 0.01 * i for i in range(30)], downstream),
        ],
        seed=SEED,
    )
    assert claim.verdict == "supported"
    assert claim.value == pytest.approx(2.0)


def test_ranks_closer_contradicted_when_another_benchmark_does_better() -> None:
    downstream = [float(i) for i in range(30)]
    claim = ranks_closer(
        [
            comparison(PRBJ_COLUMN, [0.9 - 0.01 * i for i in range(30)], downstream),
            comparison("Other", [0.5 + 0.01 * i for i in range(30)], downstream),
        ],
        seed=SEED,
    )
    assert claim.verdict == "contradicted" and "Other" in claim.detail


def test_ranks_closer_inconclusive_on_four_rms() -> None:
    downstream = [1.0, 2.0, 3.0, 4.0]
    claim = ranks_closer(
        [
            comparison(PRBJ_COLUMN, [0.5, 0.6, 0.55, 0.7], downstream),
            comparison("Other", [0.6, 0.5, 0.7, 0.65], downstream),
        ],
        seed=SEED,
    )
    assert claim.verdict == "inconclusive"


def test_ranks_closer_not_tested_without_another_benchmark() -> None:
    claim = ranks_closer([comparison(PRBJ_COLUMN, [0.5, 0.6, 0.7], [1.0, 2.0, 3.0])], seed=SEED)
    assert claim.verdict == "not tested"
