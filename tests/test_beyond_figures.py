"""Figures beyond accuracy, on constructed data whose answers are known: power (closed form and simulation),
Holm, the paired bootstrap, juries by hand, slices' bins, the profile swap and the sample indices."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from prbj.analysis.compare import better_than, compare_judges, holm
from prbj.analysis.consistency import self_consistency
from prbj.analysis.jury import JurySpec, add_juries, parse_jury
from prbj.analysis.mcnemar import mcnemar
from prbj.analysis.paired import paired_difference_ci
from prbj.analysis.power import min_detectable_difference, pairs_needed, pairs_needed_exact
from prbj.analysis.reliance import profile_reliance
from prbj.analysis.slices import quantile_bins
from prbj.cli import main
from prbj.context.swap import swap_donors
from prbj.data.schema import Pair, ProfilePost, RubricAspect
from prbj.errors import ConfigError, LeakageError


def frame(rows: list[tuple[str, str, str, str, str | None]]) -> pl.DataFrame:
    """(pair_id, judge, context, status, verdict) rows as judgments."""
    return pl.DataFrame(
        {
            "pair_id": [r[0] for r in rows],
            "subset": ["S"] * len(rows),
            "judge": [r[1] for r in rows],
            "context": [r[2] for r in rows],
            "status": [r[3] for r in rows],
            "verdict": [r[4] for r in rows],
            "correct": [r[3] == "ok" and r[4] == "chosen" for r in rows],
            "tie": [r[3] == "ok" and r[4] == "tie" for r in rows],
            "chosen_words": [10] * len(rows),
            "rejected_words": [5] * len(rows),
        }
    )


def paired(judge_a: list[bool], judge_b: list[bool]) -> pl.DataFrame:
    rows = []
    for i, (a, b) in enumerate(zip(judge_a, judge_b, strict=True)):
        rows.append((f"p{i:04d}", "a", "none", "ok", "chosen" if a else "rejected"))
        rows.append((f"p{i:04d}", "b", "none", "ok", "chosen" if b else "rejected"))
    return frame(rows)


# --- power -------------------------------------------------------------------------------------------------


def test_pairs_needed_matches_the_closed_form_on_constructed_data() -> None:
    # 200 pairs: a alone right on 30, b alone right on 10, both right on 120, both wrong on 40.
    a = [True] * 30 + [False] * 10 + [True] * 120 + [False] * 40
    b = [False] * 30 + [True] * 10 + [True] * 120 + [False] * 40
    (comparison,) = compare_judges(paired(a, b), seed=1)
    assert (comparison.first_only, comparison.second_only, comparison.n) == (30, 10, 200)
    assert comparison.discordance == pytest.approx(0.2)
    assert comparison.difference == pytest.approx(0.1)
    # By hand: n = (1.959964 * sqrt(0.2) + 0.841621 * sqrt(0.2 - 0.05^2))^2 / 0.05^2
    z_a, z_b = 1.959963984540054, 0.8416212335729143
    by_hand = (z_a * math.sqrt(0.2) + z_b * math.sqrt(0.2 - 0.0025)) ** 2 / 0.0025
    assert by_hand == pytest.approx(625.55, abs=0.01)
    assert pairs_needed_exact(0.2, 0.05) == pytest.approx(by_hand, rel=1e-9)
    assert pairs_needed(0.2, 0.05) == math.ceil(by_hand)
    # The minimum detectable difference is the inverse: at n = 200 pairs needed(MDE) = 200.
    mde = comparison.min_detectable_difference
    assert mde is not None and 0.05 < mde < 0.2
    assert pairs_needed_exact(0.2, mde) == pytest.approx(200, rel=1e-6)
    # A difference larger than the discordance can never happen: no number of pairs.
    assert pairs_needed(0.2, 0.3) is None
    assert min_detectable_difference(0.01, 10) is None


def test_pairs_needed_reaches_the_promised_power_in_simulation() -> None:
    discordance, delta = 0.3, 0.08
    n = pairs_needed(discordance, delta)
    assert n is not None
    rng = np.random.default_rng(7)
    # Each pair: first-only right with p (ψ+δ)/2, second-only right with p (ψ−δ)/2, else concordant.
    shares = [(discordance + delta) / 2, (discordance - delta) / 2, 1 - discordance]
    trials = 1500
    counts = rng.multinomial(n, shares, size=trials)
    rejected = sum(mcnemar(int(c[1]), int(c[0])).p_value < 0.05 for c in counts)
    assert rejected / trials == pytest.approx(0.80, abs=0.04)
    # And the level: with no true difference the test rejects about 5% of the time.
    null = rng.multinomial(n, [discordance / 2, discordance / 2, 1 - discordance], size=trials)
    false_alarms = sum(mcnemar(int(c[1]), int(c[0])).p_value < 0.05 for c in null)
    assert false_alarms / trials < 0.08
    assert NormalDist().inv_cdf(0.8) == pytest.approx(0.8416, abs=1e-4)


def test_holm_adjusts_step_down_and_stays_monotone() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])


def test_a_clearly_better_judge_is_significantly_better_after_correction() -> None:
    n = 300
    a = [True] * 240 + [False] * 60
    b = [True] * 150 + [False] * 150
    wins = better_than(compare_judges(paired(a, b), seed=3))
    assert wins == {"a · none": ["b · none"], "b · none": []}
    assert len(a) == n


def test_paired_bootstrap_of_identical_outcomes_is_exactly_zero() -> None:
    outcomes = np.array([1, 0, 1, 1, 0], dtype=float)
    assert paired_difference_ci(outcomes, outcomes, seed=0) == (0.0, 0.0)
    low, high = paired_difference_ci(np.ones(50), np.zeros(50), seed=0)
    assert low == high == 1.0


# --- profile reliance ------------------------------------------------------------------------------------------


def test_reliance_is_the_paired_drop_on_shared_pairs() -> None:
    rows = []
    for i in range(20):
        rows.append((f"p{i}", "j", "profile", "ok", "chosen" if i < 15 else "rejected"))
        rows.append((f"p{i}", "j", "swapped-profile", "ok", "chosen" if i < 5 else "rejected"))
        rows.append((f"p{i}", "j", "none", "ok", "chosen" if i < 10 else "rejected"))
    (row,) = profile_reliance(frame(rows), seed=0)
    assert (row.n, row.accuracy_profile, row.accuracy_swapped, row.accuracy_none) == (20, 0.75, 0.25, 0.5)
    assert row.reliance == pytest.approx(0.5)
    assert row.ci_low is not None and row.ci_high is not None and 0 < row.ci_low <= 0.5 <= row.ci_high


# --- juries --------------------------------------------------------------------------------------------------


def test_jury_verdict_is_the_majority_computed_by_hand() -> None:
    votes = {
        # pair: three members' (status, verdict); expected jury (status, verdict)
        "p1": ([("ok", "chosen"), ("ok", "chosen"), ("ok", "rejected")], ("ok", "chosen")),
        "p2": ([("ok", "rejected"), ("ok", "chosen"), ("ok", "rejected")], ("ok", "rejected")),
        "p3": ([("ok", "chosen"), ("api_error", None), ("ok", "rejected")], ("ok", "tie")),
        "p4": ([("parse_error", None), ("api_error", None), ("ok", "chosen")], ("ok", "chosen")),
        "p5": (
            [("api_error", None), ("parse_error", None), ("skipped_budget", None)],
            ("skipped_budget", None),
        ),
        "p6": ([("ok", "tie"), ("ok", "chosen"), ("ok", "inconsistent")], ("ok", "chosen")),
    }
    rows = [
        (pair, member, "none", status, verdict)
        for pair, (members, _) in votes.items()
        for member, (status, verdict) in zip(("m1", "m2", "m3"), members, strict=True)
    ]
    juried, (stats,) = add_juries(frame(rows), [parse_jury("trio=m1,m2,m3")])
    jury = juried.filter(pl.col("judge") == "trio").sort("pair_id")
    got = dict(zip(jury["pair_id"], zip(jury["status"], jury["verdict"], strict=True), strict=True))
    assert got == {pair: expected for pair, (_, expected) in votes.items()}
    assert jury["correct"].to_list() == [True, False, False, True, False, True]
    assert (stats.n, stats.ties, stats.member_failures, stats.no_member_answered) == (6, 1, 6, 1)
    assert stats.context == "none"


def test_jury_of_judges_in_different_contexts_is_mixed_and_bad_specs_are_refused() -> None:
    rows = [("p1", "a", "none", "ok", "chosen"), ("p1", "b", "profile", "ok", "chosen")]
    _, (stats,) = add_juries(frame(rows), [JurySpec("duo", ("a", "b"))])
    assert stats.context == "mixed"
    with pytest.raises(ConfigError):
        parse_jury("solo=a")
    with pytest.raises(ConfigError):
        add_juries(frame(rows), [JurySpec("duo", ("a", "zzz"))])


# --- self-consistency ------------------------------------------------------------------------------------------


def test_agreement_and_majority_accuracy_from_sample_verdicts() -> None:
    data = frame([(f"p{i}", "j", "profile", "ok", "chosen") for i in range(4)]).with_columns(
        pl.Series(
            "sample_verdicts",
            [
                "chosen|chosen|chosen",
                "chosen|rejected|chosen",
                "rejected|rejected|chosen",
                "chosen|api_error|rejected",
            ],
        )
    )
    (row,) = self_consistency(data)
    assert (row.samples, row.n, row.n_all_answered) == (3, 4, 3)
    assert row.agreement == pytest.approx(1 / 3)  # only p0 is unanimous among the fully answered
    assert row.majority_accuracy == pytest.approx(2 / 4)  # p0, p1 right; p2 wrong; p3 an even split


# --- slices --------------------------------------------------------------------------------------------------


def test_quantile_bins_cover_every_value_without_splitting_equal_values() -> None:
    assert quantile_bins([3, 3, 5, 5]) == [(3.0, 3.0), (5.0, 5.0)]
    values = list(range(1, 101))
    bins = quantile_bins(values)
    assert len(bins) == 4 and bins[0][0] == 1 and bins[-1][1] == 100
    covered = [v for v in values if any(lo <= v <= hi for lo, hi in bins)]
    assert covered == values
    assert all(a[1] < b[0] for a, b in itertools.pairwise(bins))


# --- the profile swap ------------------------------------------------------------------------------------------


def pair(i: int, subset: str, owner: int | None = None) -> Pair:
    owner = i if owner is None else owner
    return Pair(
        id=f"t-{i:03d}",
        category=subset,
        question="q",
        profile=(ProfilePost(f"u{owner}", "c", f"PROFILE-OWNER-{owner}"),),
        narrative="SECRET",
        rubric_aspects=(RubricAspect("SECRET", "e", "r"),),
        chosen="c",
        rejected="r",
        user_id=f"u{owner}",
    )


def test_donors_come_from_another_user_of_the_same_subset_deterministically() -> None:
    pairs = [pair(i, "A" if i <= 5 else "B") for i in range(1, 11)] + [pair(11, "A", owner=1)]
    donors = swap_donors(pairs, seed=42)
    by_id = {p.id: p for p in pairs}
    for pair_id, donor in donors.items():
        assert donor != pair_id
        assert by_id[donor].category == by_id[pair_id].category
        assert by_id[donor].profile != by_id[pair_id].profile  # never the same user's own profile
    assert swap_donors(list(reversed(pairs)), seed=42) == donors
    # A narrower selection that still holds a pair's donor keeps it (cached swapped judgments stay valid).
    kept = [p for p in pairs if p.category == "A"]
    assert swap_donors(kept, seed=42) == {p.id: donors[p.id] for p in kept}
    assert swap_donors(pairs, seed=7) != donors


def test_a_swapped_view_shows_the_donor_profile_and_never_the_scoring_standard() -> None:
    mine, donor = pair(1, "A"), pair(2, "A")
    view = mine.view("swapped-profile", swapped_profile=donor.user_profile)
    assert view.profile == donor.profile and view.context == "swapped-profile"
    with pytest.raises(LeakageError):
        _ = view.narrative
    with pytest.raises(LeakageError):
        _ = view.rubric_aspects
    with pytest.raises(ValueError):
        mine.view("swapped-profile")
    with pytest.raises(ValueError):
        mine.view("profile", swapped_profile=donor.user_profile)


def test_a_single_user_cannot_be_swapped() -> None:
    with pytest.raises(ConfigError):
        swap_donors([pair(1, "A"), pair(2, "A", owner=1)], seed=0)


def test_prbj_power_prints_pairs_needed_from_the_runs_discordance(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "reports"
    judged = runner.invoke(
        main, ["judge", "--no-progress", "-p", "random", "-p", "length", "--out", str(out)]
    )
    assert judged.exit_code == 0, judged.output
    (run_dir,) = out.iterdir()
    result = runner.invoke(main, ["power", "--baseline", str(run_dir), "--delta", "0.05", "--format", "json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["pairs"]
    assert row["n"] == 60 and row["delta"] == 0.05
    assert row["pairs_needed"] == math.ceil(pairs_needed_exact(row["discordance"], 0.05))
    assert pairs_needed_exact(row["discordance"], row["min_detectable_difference"]) == pytest.approx(
        60, rel=1e-6
    )
    table = runner.invoke(main, ["power", "--baseline", str(run_dir)])
    assert table.exit_code == 0 and "pairs needed" in table.output
