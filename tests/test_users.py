"""Figures per user: user accuracy against a hand computation, per-group and seen/unseen rows, the cluster
bootstrap against resampling users one by one, user figures that coincide with pair figures when every user has
one pair, and the clustered paired test of two judges (compare, check, diff, power)."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from user_rows import (
    GROUP_PAIR_ACCURACY,
    GROUP_USER_ACCURACY,
    PAIR_ACCURACY,
    SUBSET,
    USER_ACCURACY,
    per_user_rows,
)

from prbj.analysis import user_counts as counts_module
from prbj.analysis.baseline import baseline_from_run
from prbj.analysis.check import CheckSettings, check_run
from prbj.analysis.clusters import PairedClusters, cluster_intervals, clustered_mcnemar, design_effect
from prbj.analysis.compare import compare_judges, power_rows
from prbj.analysis.headline import Headline
from prbj.analysis.mcnemar import clustered_test, mcnemar
from prbj.analysis.power import pairs_needed_exact, users_needed
from prbj.analysis.stats import ALL_SUBSETS, bootstrap_ci, summarize
from prbj.analysis.user_counts import UserCounts, users_repeat
from prbj.analysis.users import users_section
from prbj.cli import main
from prbj.data.card_protocol import ScoringProtocol
from prbj.runs import rundir
from run_dirs import judgment, write_run_dir


def frame_of(rows: list[dict]) -> pl.DataFrame:
    schema = {"user_seen": pl.Boolean}
    return pl.DataFrame(rows, schema_overrides=schema, infer_schema_length=None)


# --- user accuracy by hand --------------------------------------------------------------------------------


def test_summary_json_holds_user_accuracy_exactly_as_computed_by_hand(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path / "run", per_user_rows())
    summary = json.loads((run_dir / "summary.json").read_text())
    (overall,) = [r for r in summary["results"] if r["subset"] == ALL_SUBSETS]
    assert overall["user_accuracy"] == USER_ACCURACY  # exactly: one rounding of the exact mean
    assert overall["accuracy"] == PAIR_ACCURACY
    assert (overall["n_users"], overall["n_users_decided"]) == (5, 3)
    assert overall["user_ci_low"] <= overall["user_accuracy"] <= overall["user_ci_high"]
    assert overall["ci_low"] <= overall["accuracy"] <= overall["ci_high"]
    # Failures and the withheld verdict are counted as for pair accuracy.
    assert (overall["n"], overall["n_ok"], overall["ties"], overall["abstained"]) == (10, 7, 1, 1)
    assert summary["users"]["n_users"] == 5 and summary["users"]["max_pairs_per_user"] == 3
    assert summary["users"]["resampled"] == "users"


def test_per_group_and_seen_rows_hold_pair_and_user_accuracy(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path / "run", per_user_rows())
    section = json.loads((run_dir / "summary.json").read_text())["users"]
    groups = {row["value"]: row for row in section["groups"]}
    assert set(groups) == {"18-24", "25-34"} and {row["group"] for row in groups.values()} == {"age"}
    for value, row in groups.items():
        assert row["user_accuracy"] == GROUP_USER_ACCURACY[value]
        assert row["accuracy"] == GROUP_PAIR_ACCURACY[value]
    assert groups["18-24"]["ci_low"] <= groups["18-24"]["accuracy"] <= groups["18-24"]["ci_high"]
    assert (groups["25-34"]["n_users"], groups["25-34"]["n_users_decided"]) == (3, 1)
    # One decided user shows no spread between users: no interval (the bootstrap printed [0.0, 0.0]).
    assert [groups["25-34"][f] for f in ("ci_low", "ci_high", "user_ci_low", "user_ci_high")] == [None] * 4
    seen = {row["value"]: row for row in section["seen"]}
    assert seen["seen"]["user_accuracy"] == GROUP_USER_ACCURACY["18-24"]
    assert seen["unseen"]["user_accuracy"] == 0.0 and seen["unseen"]["group"] == "user_seen"


def test_a_user_with_no_decided_pair_is_counted_but_left_out_of_the_mean() -> None:
    rows = per_user_rows()
    # Only failures: no user has a decided judgment, so there is no user accuracy and no interval.
    failed = [row | {"status": "api_error", "correct": False, "verdict": None} for row in rows]
    (overall, _subset) = summarize(frame_of(failed), seed=0)
    assert overall.user_accuracy is None and overall.user_ci_low is None
    assert (overall.n_users, overall.n_users_decided) == (5, 0)


def test_a_failed_row_marked_correct_counts_for_nothing() -> None:
    """A failed judgment is out of its user's count even when a writer left `correct` true on it (issue 44
    item 10: user_counts counted it)."""
    rows = [
        judgment("p1", SUBSET, "j", correct=False) | {"user_id": "u1"},
        judgment("p2", SUBSET, "j", status="api_error") | {"user_id": "u1", "correct": True},
        judgment("p3", SUBSET, "j") | {"user_id": "u2"},
        judgment("p4", SUBSET, "j") | {"user_id": "u2"},
    ]
    counts = UserCounts.of(frame_of(rows))
    assert sorted(zip(counts.correct.tolist(), counts.decided.tolist(), strict=True)) == [(0, 1), (2, 2)]
    (overall, _subset) = summarize(frame_of(rows), seed=0)
    assert overall.user_accuracy == 0.5 and overall.accuracy == 2 / 3


def test_group_rows_of_one_pair_per_user_count_only_decided_users() -> None:
    """One pair per user (users do not repeat), with groups: a user whose only judgment failed is among the
    group's users, not among its decided users (issue 44 item 10: the count ignored the status)."""
    rows = [
        judgment(f"p{i}", SUBSET, "j", status="ok" if i < 3 else "parse_error")
        | {"user_id": f"p{i}", "group:age": "18-24"}
        for i in range(5)
    ]
    section = users_section(frame_of(rows), seed=0)
    assert section is not None and section["resampled"] == "pairs"
    (row,) = section["groups"]
    assert (row["n_users"], row["n_users_decided"], row["n_ok"]) == (5, 3, 3)


# --- cluster bootstrap ------------------------------------------------------------------------------------


def _naive_cluster_bootstrap(
    correct: np.ndarray, decided: np.ndarray, resamples: int
) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(123)
    picks = rng.integers(0, correct.size, size=(resamples, correct.size))
    pooled = correct[picks].sum(axis=1) / decided[picks].sum(axis=1)
    mean = (correct / decided)[picks].mean(axis=1)
    return tuple(np.quantile(v, [0.025, 0.975]) for v in (pooled, mean))


def test_the_cluster_bootstrap_matches_resampling_users_one_by_one() -> None:
    """Against resampling users one by one, to within the resampling error of 20,000 resamples (about 0.002 on
    each end here): a 90% interval labelled 95% (ends about 0.012 inside) cannot pass."""
    rng = np.random.default_rng(0)
    decided = rng.integers(1, 12, size=60)
    skill = rng.beta(4, 2, size=60)
    correct = rng.binomial(decided, skill)
    found = cluster_intervals(correct, decided, seed=7, resamples=20000, confidence=0.95)
    assert found is not None
    pooled, mean = _naive_cluster_bootstrap(correct, decided, 20000)
    assert found.pooled == pytest.approx(tuple(pooled), abs=0.005)
    assert found.mean_of_clusters == pytest.approx(tuple(mean), abs=0.005)
    narrower = cluster_intervals(correct, decided, seed=7, resamples=20000, confidence=0.90)
    assert narrower is not None
    assert min(narrower.pooled[0] - pooled[0], pooled[1] - narrower.pooled[1]) > 0.01


def test_cluster_intervals_are_seeded_and_do_not_depend_on_row_order(tmp_path: Path) -> None:
    frame = frame_of(per_user_rows() * 1)
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=3)
    first, again, reordered = (summarize(f, seed=11)[0] for f in (frame, frame, shuffled))
    assert first == again == reordered
    assert users_section(frame, seed=11) == users_section(shuffled, seed=11)


def test_with_one_pair_per_user_user_figures_are_the_pair_figures_without_a_second_bootstrap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(5)
    outcomes = rng.uniform(size=(3, 997)) < rng.uniform(0.3, 0.9, size=(3, 1))
    for row in outcomes:
        rows = [
            judgment(f"p{i:04d}", SUBSET, "j", correct=bool(c)) | {"user_id": f"u{i:04d}"}
            for i, c in enumerate(row)
        ]
        frame = frame_of(rows)
        # The point estimate: the mean over users, computed its own way, is the pair accuracy to the last bit.
        (overall, _subset) = summarize(frame, seed=1)
        assert UserCounts.of(frame).mean_accuracy() == overall.accuracy
        # The intervals: given once, from the pair bootstrap, never resampled over users again.
        monkeypatch.setattr(counts_module, "accuracy_intervals", _refuse)
        figures = counts_module.user_figures(
            frame, accuracy=overall.accuracy, pair_interval=(0.1, 0.9), confidence=0.95
        )
        assert (figures.user_accuracy, figures.user_ci_low, figures.user_ci_high) == (
            overall.accuracy,
            0.1,
            0.9,
        )
        assert (figures.ci_low, figures.ci_high) == (0.1, 0.9)
        monkeypatch.undo()
        # ...which is what resampling one-pair users would give, within the resampling error.
        ones = np.ones(row.size, dtype=int)
        found = cluster_intervals(row.astype(int), ones, seed=2, resamples=20000, confidence=0.95)
        assert found is not None
        pair = bootstrap_ci(row.astype(float), seed=2, resamples=20000)
        assert found.pooled == pytest.approx(pair, abs=0.006)
        assert found.mean_of_clusters == found.pooled
        # Nothing per user is written: a PRB-shaped run keeps its summary.json.
        assert not users_repeat(frame) and users_section(frame.drop("user_id"), seed=1) is None
        assert "user_accuracy" not in overall.as_dict()


def _refuse(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("resampled over users although every user has one pair")


def test_the_prb_sample_writes_no_user_figures_and_says_they_coincide(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["judge", "--no-progress", "--out", str(tmp_path)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert "one pair per user, so user accuracy = pair accuracy" in " ".join(result.output.split())
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert "users" not in summary
    assert all("user_accuracy" not in row for row in summary["results"])
    run = rundir.load_run(run_dir)
    for row in run.results:
        mine = run.judgments.filter(pl.col("judge") == row.judge, pl.col("context") == row.context)
        if row.subset != ALL_SUBSETS:
            mine = mine.filter(pl.col("subset") == row.subset)
        assert UserCounts.of(mine).mean_accuracy() == row.accuracy
    report = (run_dir / "report.md").read_text()
    assert "One pair per user here: user accuracy equals pair accuracy." in report
    assert "users % (95% CI)" not in report


# --- two judges, paired, over users ----------------------------------------------------------------------


def test_obuchowski_statistic_by_hand_and_the_plain_test_for_one_pair_per_user() -> None:
    # Users: (first right, second right) per pair.
    first = np.array([1, 1, 1, 0, 1, 0, 1, 1, 0, 1], dtype=float)
    second = np.array([0, 0, 1, 0, 1, 1, 0, 0, 0, 1], dtype=float)
    users = np.array(["a", "a", "a", "b", "b", "b", "c", "c", "d", "d"])
    grouped = PairedClusters.from_pairs(first, second, users)
    # D per user: a 2, b -1, c 2, d 0; K = 4.
    assert grouped.differences.tolist() == [2, -1, 2, 0]
    expected = 3 / 4 * (2 - 1 + 2 + 0) ** 2 / (4 + 1 + 4 + 0)
    test = clustered_mcnemar(grouped)
    assert test.statistic == pytest.approx(expected)
    assert test.p_value == pytest.approx(math.erfc(math.sqrt(expected / 2)))
    assert design_effect(grouped) == pytest.approx(max(1.0, 4 / 3 * 9 / 5))
    # One pair per user: the plain McNemar, exact figures unchanged.
    singles = np.array([f"s{i}" for i in range(first.size)])
    lost, gained = int(((second == 1) & (first == 0)).sum()), int(((second == 0) & (first == 1)).sum())
    assert (lost, gained) == (1, 4)
    assert clustered_test(second, first, singles) == mcnemar(lost, gained)


def _two_judges(rows_per_user: int, users: int, *, shared_flip: bool, seed: int = 0) -> pl.DataFrame:
    """Judge a right on every pair; judge b wrong on every pair of a few users (all of theirs at once when
    `shared_flip`), else on the same number of pairs spread over users."""
    rng = np.random.default_rng(seed)
    rows = []
    flipped_users = set(rng.choice(users, size=max(1, users // 10), replace=False).tolist())
    for u in range(users):
        for k in range(rows_per_user):
            pair = f"p{u:03d}-{k}"
            wrong = (u in flipped_users) if shared_flip else (k == 0 and u % rows_per_user == 0)
            for judge, right in (("a", True), ("b", not wrong)):
                rows.append(judgment(pair, SUBSET, judge, correct=right) | {"user_id": f"u{u:03d}"})
    return frame_of(rows)


def test_compare_judges_resamples_users_and_widens_what_pairs_alone_would_claim() -> None:
    clustered = _two_judges(10, 60, shared_flip=True)
    (comparison,) = compare_judges(clustered, seed=0)
    assert comparison.method == "clustered" and comparison.users == 60
    assert comparison.design_effect is not None and comparison.design_effect > 5
    # The same outcomes without user ids: independent pairs, a narrower interval and a smaller p.
    (naive,) = compare_judges(clustered.drop("user_id"), seed=0)
    assert naive.method in ("exact", "chi2") and naive.users is None
    assert (comparison.ci_high - comparison.ci_low) > 2 * (naive.ci_high - naive.ci_low)
    assert comparison.p_value > naive.p_value
    assert comparison.difference == naive.difference
    (row,) = power_rows([comparison], delta=0.05)
    plain = math.ceil(pairs_needed_exact(comparison.discordance, 0.05))
    assert comparison.design_effect_upper is not None
    expected = users_needed(
        comparison.discordance, 0.05, design_effect=comparison.design_effect_upper, pairs_per_user=10
    )
    assert expected is not None and row["users_needed"] == expected and row["pairs_needed"] == expected * 10
    assert row["pairs_needed"] > plain and row["design_effect"] == comparison.design_effect
    assert "design_effect" not in power_rows([naive], delta=0.05)[0]


def test_check_fails_a_drop_on_too_few_users_to_test_and_says_so(tmp_path: Path) -> None:
    """Four users, every pair of one of them now wrong: 10 lost, 0 gained. The pair-level test would call it
    significant; over users, no outcome of 4 users can reach p < 0.05, so the test cannot decide. The check
    says "too few users to test" and fails the drop on the tolerance alone (it used to pass it as WARN)."""
    users = [f"u{u}" for u in range(4)]
    base_rows = [
        judgment(f"p{u}-{k}", SUBSET, "j") | {"user_id": users[u]} for u in range(4) for k in range(10)
    ]
    run_rows = [
        row | {"correct": False, "verdict": "rejected"} if row["user_id"] == "u0" else row
        for row in base_rows
    ]
    # Gated on pair accuracy, as a card whose headline is pairs has it (the default is user accuracy, whose gate
    # tests/test_headline.py checks).
    pairs = Headline(ScoringProtocol(unit="pairs"))
    baseline = baseline_from_run(rundir.load_run(write_run_dir(tmp_path / "base", base_rows, headline=pairs)))
    run = rundir.load_run(write_run_dir(tmp_path / "new", run_rows, headline=pairs))
    report = check_run(run, baseline, CheckSettings(tolerance_points=2.0), baseline_path="b.json")
    overall = next(g for g in report.groups if g.subset == ALL_SUBSETS)
    assert overall.test == "sign-flip" and (overall.lost, overall.gained) == (10, 0)
    assert overall.status == "fail" and overall.p_value == 1.0
    assert mcnemar(10, 0).p_value < 0.05  # what the pair-level test would have said
    assert "too few users to test (on these 4 users" in overall.reasons[0]
    assert "fails on the tolerance alone" in overall.reasons[0]
    assert not report.passed
    # Within the tolerance nothing fails, too few users or not.
    lenient = check_run(run, baseline, CheckSettings(tolerance_points=30.0), baseline_path="b.json")
    assert lenient.passed


def test_check_gates_on_the_sign_flip_test_from_six_users_with_a_difference(tmp_path: Path) -> None:
    """Eight users, six of whom lost one pair of their five: the exact sign-flip test gives 2 / 2^6 = 0.031 and
    fails the drop (under 50 users the chi-square reference of Obuchowski's statistic is not used). On per-user
    data the gate is the headline, user accuracy (prbj.analysis.check_headline): the six users who changed are
    tested, the two who did not flip to themselves."""
    base_rows = [
        judgment(f"p{u}-{k}", SUBSET, "j") | {"user_id": f"u{u}"} for u in range(8) for k in range(5)
    ]
    run_rows = [
        row | {"correct": False, "verdict": "rejected"}
        if row["pair_id"].endswith("-0") and int(row["user_id"][1:]) < 6
        else row
        for row in base_rows
    ]
    baseline = baseline_from_run(rundir.load_run(write_run_dir(tmp_path / "base", base_rows)))
    run = rundir.load_run(write_run_dir(tmp_path / "new", run_rows))
    report = check_run(run, baseline, CheckSettings(tolerance_points=2.0), baseline_path="b.json")
    overall = next(g for g in report.groups if g.subset == ALL_SUBSETS)
    assert overall.test == "sign-flip" and overall.p_value == pytest.approx(2 / 2**6)
    assert overall.status == "fail" and "sign-flip test over 6 users (exact) p=0.0312" in overall.reasons[0]


def test_diff_gives_the_change_with_its_interval_over_users(tmp_path: Path) -> None:
    before = _two_judges(5, 30, shared_flip=True).filter(pl.col("judge") == "b")
    after = before.with_columns(pl.lit(True).alias("correct"), pl.lit("chosen").alias("verdict"))
    run_a = write_run_dir(tmp_path / "a", before.to_dicts())
    run_b = write_run_dir(tmp_path / "b", after.to_dicts())
    result = CliRunner().invoke(
        main, ["diff", str(run_a), str(run_b), "--limit", "1"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "b · none: 90.0% → 100.0% on 150 pairs answered in both: +10.0 pts" in text
    # Three of 30 users gained all their pairs: the exact sign-flip test over users, 2 / 2^3.
    assert "over 30 users); sign-flip test over 30 users (exact) p=0.25 (0 lost, 15 gained)" in text


def test_show_names_each_judgments_user_and_gives_user_beside_pair_accuracy(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path / "run", per_user_rows())
    result = CliRunner().invoke(main, ["show", str(run_dir), "--only", "correct", "--limit", "2"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "p01 · chatbot_arena · judge-x · profile · user u1" in text
    # Over the whole selection (every outcome), not only the judgments shown.
    assert f"judge-x · profile: pair accuracy {100 * PAIR_ACCURACY:.1f}% over 7 decided pairs" in text
    assert f"user accuracy {100 * USER_ACCURACY:.1f}% over 3 users" in text


def test_the_every_eval_ever_export_carries_user_accuracy_with_its_interval_over_users(
    tmp_path: Path,
) -> None:
    run_dir = write_run_dir(tmp_path / "run", per_user_rows())
    result = CliRunner().invoke(
        main, ["export", str(run_dir), "--format", "eee", "--out", str(tmp_path / "eee")]
    )
    assert result.exit_code == 0, result.output
    (aggregate,) = sorted((tmp_path / "eee").glob("data/*/*/*/*.json"))
    results = json.loads(aggregate.read_text())["evaluation_results"]
    (users,) = [
        r for r in results if r["evaluation_result_id"] == f"prbj.user_accuracy:profile:{ALL_SUBSETS}"
    ]
    assert users["score_details"]["score"] == USER_ACCURACY
    uncertainty = users["score_details"]["uncertainty"]
    assert uncertainty["num_samples"] == 3  # users with a decided judgment
    summary = json.loads((run_dir / "summary.json").read_text())["results"][0]
    interval = uncertainty["confidence_interval"]
    assert (interval["lower"], interval["upper"]) == (summary["user_ci_low"], summary["user_ci_high"])


def test_a_summary_whose_user_accuracy_is_not_a_number_is_one_line_naming_the_field(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path / "run", per_user_rows())
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["results"][0]["user_accuracy"] = "0.9"
    (run_dir / "summary.json").write_text(json.dumps(summary))
    result = CliRunner().invoke(main, ["report", str(run_dir)])
    assert result.exit_code == 2
    assert "field 'results[0].user_accuracy': expected a number or null" in " ".join(result.output.split())


def test_the_report_shows_user_accuracy_beside_pair_accuracy_and_a_users_section(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path / "run", per_user_rows())
    result = CliRunner().invoke(main, ["report", str(run_dir)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    # The terminal leaderboard has the user figure too (stacked or not, as the width allows).
    assert f"{100 * USER_ACCURACY:.1f}" in result.output
    report = (run_dir / "report.md").read_text()
    leaderboard = report.split("## Leaderboard", 1)[1].split("\n## ", 1)[0]
    # User accuracy is the headline where users repeat and no card says otherwise: its column is the bold one.
    assert (
        f"| {100 * PAIR_ACCURACY:.1f} (" in leaderboard and f"| **{100 * USER_ACCURACY:.1f} (" in leaderboard
    )
    assert "One pair per user here" not in report and "intervals, over users" in report
    users = report.split("## Users", 1)[1].split("\n## ", 1)[0]
    for value, accuracy in GROUP_USER_ACCURACY.items():
        pairs = GROUP_PAIR_ACCURACY[value]
        assert (
            f"| age | {value} |" in users
            and f"{100 * pairs:.1f} (" in users
            and f"{100 * accuracy:.1f} (" in users
        )
    assert "| user_seen | unseen |" in users


def _by_hand(judgments: pl.DataFrame) -> float:
    """The mean over users of each user's correct / decided, from the rows themselves, in exact fractions."""
    per_user: dict[str, list[int]] = {}
    for row in judgments.iter_rows(named=True):
        if row["status"] == "ok":
            counts = per_user.setdefault(row["user_id"], [0, 0])
            counts[0] += bool(row["correct"])
            counts[1] += 1
    return float(sum(Fraction(c, n) for c, n in per_user.values()) / len(per_user))


@pytest.mark.parametrize("benchmark", ["personal-reward-bench", "prism", "persona-feedback"])
def test_a_run_on_a_per_user_sample_holds_user_accuracy_and_groups_as_computed_by_hand(
    benchmark: str, tmp_path: Path
) -> None:
    result = CliRunner().invoke(
        main, ["judge", "--benchmark", benchmark, "--no-progress", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    judgments = pl.read_parquet(run_dir / "judgments.parquet")
    assert users_repeat(judgments) and summary["users"]["resampled"] == "users"
    for row in summary["results"]:
        mine = judgments.filter(pl.col("judge") == row["judge"], pl.col("context") == row["context"])
        if row["subset"] != ALL_SUBSETS:
            mine = mine.filter(pl.col("subset") == row["subset"])
        assert row["user_accuracy"] == _by_hand(mine)
        assert row["user_ci_low"] <= row["user_accuracy"] <= row["user_ci_high"]
    groups = [c.removeprefix("group:") for c in judgments.columns if c.startswith("group:")]
    assert groups, "the sample has groups"
    rows = summary["users"]["groups"]
    for key in groups:
        values = set(judgments[f"group:{key}"].drop_nulls().unique().to_list())
        assert {r["value"] for r in rows if r["group"] == key} == values
    for row in rows:
        part = judgments.filter(
            pl.col("judge") == row["judge"],
            pl.col("context") == row["context"],
            pl.col(f"group:{row['group']}") == row["value"],
        )
        assert row["user_accuracy"] == _by_hand(part)
    if "user_seen" in judgments.columns:
        names = {True: "seen", False: "unseen"}
        for row in summary["users"]["seen"]:
            flag = next(k for k, v in names.items() if v == row["value"])
            part = judgments.filter(
                pl.col("judge") == row["judge"],
                pl.col("context") == row["context"],
                pl.col("user_seen") == flag,
            )
            assert row["user_accuracy"] == _by_hand(part)
        present = {names[v] for v in judgments["user_seen"].drop_nulls().unique().to_list()}
        assert {row["value"] for row in summary["users"]["seen"]} == present
