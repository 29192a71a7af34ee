"""Figures that keep their promise with few users (issue 43): no interval from one user, Clopper–Pearson on the
effective size at 0% and 100%, Korn–Graubard over users under 50, the paired interval with few users, the exact
sign-flip test against an enumeration written here, "too few users to test", Learn-then-Test and the ECE over
users, power planned in users, group contrasts and slices over users. Each figure is checked against a
computation of its own in this file (scipy.stats, itertools), never against prbj's helpers."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from scipy import stats

from prbj.analysis import sign_flip
from prbj.analysis.calibration import calibration
from prbj.analysis.clusters import PairedClusters, upper_design_effect
from prbj.analysis.compare import compare_judges
from prbj.analysis.group_contrasts import between_users, within_users
from prbj.analysis.mcnemar import clustered_test
from prbj.analysis.selective import error_correlation, learn_then_test
from prbj.analysis.sign_flip import sign_flip_test
from prbj.analysis.slices import slice_accuracy
from prbj.analysis.stats import ALL_SUBSETS, summarize
from prbj.analysis.users import users_section
from prbj.cli import main
from run_dirs import judgment, write_run_dir

SUBSET = "chatbot_arena"


def rows_of(outcomes: dict[str, list[bool]], judge: str = "j", **extra: object) -> list[dict]:
    """Judgments of `judge`: per user, one pair per outcome."""
    return [
        judgment(f"{user}-p{k}", SUBSET, judge, correct=right) | {"user_id": user} | extra
        for user, results in outcomes.items()
        for k, right in enumerate(results)
    ]


def overall(rows: list[dict]) -> object:
    (row, _subset) = summarize(pl.DataFrame(rows), seed=3)
    assert row.subset == ALL_SUBSETS
    return row


def clopper_pearson(successes: float, trials: float, level: float = 0.95) -> tuple[float, float]:
    tail = (1 - level) / 2
    low = 0.0 if successes == 0 else stats.beta.ppf(tail, successes, trials - successes + 1)
    high = 1.0 if successes == trials else stats.beta.ppf(1 - tail, successes + 1, trials - successes)
    return float(low), float(high)


# --- item 1: user accuracy and pair accuracy with few users ----------------------------------------------------


def test_one_decided_user_has_no_interval() -> None:
    """One user at 4 of 5 printed [0.800, 0.800]: one user shows no spread between users."""
    rows = rows_of({"u1": [True, True, True, True, False]})
    rows += [judgment("u2-p0", SUBSET, "j", status="api_error") | {"user_id": "u2"}]
    row = overall(rows)
    assert (row.user_accuracy, row.n_users, row.n_users_decided) == (0.8, 2, 1)
    assert (row.user_ci_low, row.user_ci_high, row.ci_low, row.ci_high) == (None, None, None, None)


def test_every_user_right_gives_clopper_pearson_on_the_effective_size() -> None:
    """All right printed [1.0, 1.0]. User accuracy: Clopper–Pearson at K users; pair accuracy: at the effective
    size (Σm)² / Σm² (the largest design effect the users' sizes allow)."""
    sizes = {"u1": 1, "u2": 3, "u3": 6, "u4": 2}
    row = overall(rows_of({user: [True] * m for user, m in sizes.items()}))
    assert row.user_accuracy == row.accuracy == 1.0
    k = len(sizes)
    assert (row.user_ci_low, row.user_ci_high) == pytest.approx(clopper_pearson(k, k), abs=1e-12)
    effective = sum(sizes.values()) ** 2 / sum(m * m for m in sizes.values())
    assert (row.ci_low, row.ci_high) == pytest.approx(clopper_pearson(effective, effective), abs=1e-12)
    assert row.ci_low < 0.6  # 12 pairs of 4 users are worth about 2.8 independent ones
    # And every user wrong: the mirror image.
    wrong = overall(rows_of({user: [False] * m for user, m in sizes.items()}))
    assert (wrong.user_ci_low, wrong.user_ci_high) == pytest.approx(clopper_pearson(0, k), abs=1e-12)


def test_one_pair_per_user_uses_clopper_pearson_under_fifty_and_at_the_edges() -> None:
    """PRB-shaped data (users are pairs): 1 pair has no interval; 10 pairs all right get Clopper–Pearson (the
    bootstrap gave [1.0, 1.0]); 20 pairs with 13 right too; from 50 pairs the percentile bootstrap."""
    one = overall([judgment("p0", SUBSET, "j")])
    assert (one.ci_low, one.ci_high) == (None, None)
    right = overall([judgment(f"p{i}", SUBSET, "j") for i in range(10)])
    assert (right.ci_low, right.ci_high) == pytest.approx(clopper_pearson(10, 10), abs=1e-12)
    some = overall([judgment(f"p{i}", SUBSET, "j", correct=i < 13) for i in range(20)])
    assert (some.ci_low, some.ci_high) == pytest.approx(clopper_pearson(13, 20), abs=1e-9)
    many = overall([judgment(f"p{i}", SUBSET, "j", correct=i % 3 > 0) for i in range(60)])
    assert (many.ci_low, many.ci_high) != pytest.approx(clopper_pearson(40, 60), abs=1e-6)


def _korn_graubard(estimate: float, variance: float, units: int, most: float) -> tuple[float, float]:
    effective = min(estimate * (1 - estimate) / variance, most)
    trials = effective * (stats.norm.ppf(0.975) / stats.t.ppf(0.975, units - 1)) ** 2
    return clopper_pearson(estimate * trials, trials)


def test_few_users_get_korn_graubards_interval_over_users() -> None:
    """Under 50 users: Clopper–Pearson at the effective size p(1 − p) / variance, the variance over users (the
    jackknife's), shrunk by (z / t_(K−1))², written out here independently."""
    outcomes = {
        "u1": [True, True, False],
        "u2": [True] * 7 + [False],
        "u3": [False, False],
        "u4": [True],
        "u5": [True, False, True, True, False],
        "u6": [True] * 12 + [False] * 3,
    }
    row = overall(rows_of(outcomes))
    correct = np.array([sum(v) for v in outcomes.values()], float)
    sizes = np.array([len(v) for v in outcomes.values()], float)
    k = len(outcomes)
    shares = correct / sizes
    mean = shares.mean()
    assert row.user_accuracy == pytest.approx(mean)
    user = _korn_graubard(mean, shares.var(ddof=1) / k, k, k**2 / np.sum(1 / sizes))
    assert (row.user_ci_low, row.user_ci_high) == pytest.approx(user, abs=1e-9)
    pooled = correct.sum() / sizes.sum()
    leave_one_out = np.array(
        [(correct.sum() - c) / (sizes.sum() - m) for c, m in zip(correct, sizes, strict=True)]
    )
    jackknife = (k - 1) / k * np.sum((leave_one_out - leave_one_out.mean()) ** 2)
    pair = _korn_graubard(pooled, jackknife, k, sizes.sum())
    assert (row.ci_low, row.ci_high) == pytest.approx(pair, abs=1e-9)


def test_few_users_intervals_hold_where_the_bootstrap_did_not() -> None:
    """5 users of 1–8 pairs, accuracy varying between users: the interval holds the true user accuracy in at
    least 93% of 300 seeded runs (the percentile bootstrap: about 85%, bench/small_users.py)."""
    rng = np.random.default_rng(11)
    hits = 0
    truth = 0.7
    for _ in range(300):
        skill = rng.beta(7, 3, size=5)  # mean 0.7
        outcomes = {f"u{u}": (rng.uniform(size=rng.integers(1, 9)) < skill[u]).tolist() for u in range(5)}
        row = overall(rows_of(outcomes))
        hits += row.user_ci_low is not None and row.user_ci_low <= truth <= row.user_ci_high
    assert hits / 300 >= 0.93


def test_group_rows_carry_the_same_intervals_and_mark_few_users() -> None:
    rows = rows_of({"u1": [True, True], "u2": [True, False, True], "u3": [False]}, **{"group:age": "18-24"})
    rows += rows_of({"u4": [True] * 4}, **{"group:age": "25-34"})
    section = users_section(pl.DataFrame(rows), seed=0)
    assert section is not None
    groups = {row["value"]: row for row in section["groups"]}
    assert groups["25-34"]["user_ci_low"] is None and groups["25-34"]["few_users"]
    young = overall([r for r in rows if r["group:age"] == "18-24"])
    interval = (groups["18-24"]["user_ci_low"], groups["18-24"]["user_ci_high"])
    assert interval == pytest.approx((young.user_ci_low, young.user_ci_high), abs=1e-12)


# --- item 2: the paired interval with few users -----------------------------------------------------------------


def _paired_frame(first: dict[str, list[bool]], second: dict[str, list[bool]]) -> pl.DataFrame:
    return pl.DataFrame(rows_of(first, judge="a") + rows_of(second, judge="b"))


def test_the_paired_interval_with_few_users_is_t_over_users() -> None:
    first = {"u1": [True, True, False], "u2": [True] * 5, "u3": [False, True], "u4": [True, True, True, True]}
    second = {"u1": [False, True, False], "u2": [True, False, True, False, True], "u3": [True, True]}
    second["u4"] = [True, False, True, False]
    (c,) = compare_judges(_paired_frame(first, second), seed=0)
    d = np.array([sum(first[u]) - sum(second[u]) for u in first], float)
    n = np.array([len(first[u]) for u in first], float)
    k = d.size
    estimate = d.sum() / n.sum()
    leave_one_out = (d.sum() - d) / (n.sum() - n)
    se = math.sqrt((k - 1) / k * np.sum((leave_one_out - leave_one_out.mean()) ** 2))
    half = stats.t.ppf(0.975, k - 1) * se
    assert c.difference == pytest.approx(estimate)
    assert (c.ci_low, c.ci_high) == pytest.approx((estimate - half, min(1.0, estimate + half)), abs=1e-12)
    assert c.method == "sign-flip"


def test_the_paired_interval_without_any_disagreement_is_not_zero_width() -> None:
    """Two judges that agree on every pair: the bootstrap said [0, 0]; now ± the Clopper–Pearson upper limit of
    a discordance of 0 on the effective size."""
    same = {"u1": [True, False], "u2": [True] * 4, "u3": [False]}
    (c,) = compare_judges(_paired_frame(same, same), seed=0)
    effective = 7**2 / (4 + 16 + 1)
    upper = clopper_pearson(0, effective)[1]
    assert (c.ci_low, c.ci_high) == pytest.approx((-upper, upper), abs=1e-12)


# --- item 3: the sign-flip test -----------------------------------------------------------------------------------


def enumerated_p(differences: list[int]) -> float:
    """Two-sided sign-flip p-value by listing all 2^K sign vectors."""
    observed = abs(sum(differences))
    flips = list(itertools.product((1, -1), repeat=len(differences)))
    extreme = sum(
        abs(sum(s * d for s, d in zip(signs, differences, strict=True))) >= observed for signs in flips
    )
    return extreme / len(flips)


@pytest.mark.parametrize(
    "differences",
    [
        [3, 1, 2, 1, 1, 4],
        [2, -1, 0, 3, -2, 1, 1, 0],
        [5, 5, -5, 1],
        [1, 1, 1, 1, 1],
        [7, -3, 2, 2, -1, 4, 1, 3, -2, 6],
    ],
)
def test_the_sign_flip_p_value_matches_an_exact_enumeration(differences: list[int]) -> None:
    found = sign_flip_test(np.array(differences))
    assert found.method == "exact"
    assert found.p_value == pytest.approx(enumerated_p(differences), abs=1e-12)
    users = sum(1 for d in differences if d)
    assert found.floor == pytest.approx(2.0 / 2**users) and found.users == users


def test_the_sign_flip_test_draws_seeded_sign_vectors_above_its_exact_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    differences = np.array([7, -3, 2, 2, -1, 4, 1, 3, -2, 6])
    monkeypatch.setattr(sign_flip, "EXACT_CELLS", 10)
    monkeypatch.setattr(sign_flip, "MONTE_CARLO_DRAWS", 20_000)
    drawn = sign_flip_test(differences, seed=4)
    assert drawn.method == "monte carlo" and drawn.draws == 20_000
    assert drawn == sign_flip_test(differences, seed=4)
    exact = enumerated_p(differences.tolist())
    assert abs(drawn.p_value - exact) < 4 * math.sqrt(exact * (1 - exact) / 20_000) + 1e-4
    result = clustered_test(np.ones(3), np.zeros(3), np.array(["a", "a", "b"]))
    assert result.method == "sign-flip"


def test_fractional_differences_are_enumerated_then_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's change in their own accuracy (the headline gate's differences) is no whole number: the sign
    vectors are listed up to EXACT_USERS users, drawn (seeded) above; both against an enumeration written here."""
    differences = [0.5, -0.25, 0.2, 0.75, 1 / 3, 0.1, -0.4]
    exact = enumerated_p(differences)
    listed = sign_flip_test(np.array(differences))
    assert listed.method == "exact" and listed.p_value == pytest.approx(exact, abs=1e-12)
    assert listed.floor == pytest.approx(2.0 / 2**7)
    monkeypatch.setattr(sign_flip, "EXACT_USERS", 3)
    drawn = sign_flip_test(np.array(differences), seed=2)
    assert drawn.method == "monte carlo" and drawn == sign_flip_test(np.array(differences), seed=2)
    assert abs(drawn.p_value - exact) < 4 * math.sqrt(exact * (1 - exact) / drawn.draws) + 1e-4  # type: ignore[operator]


def _users_lost(users: int, lost: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`users` users of 4 pairs, right before; now the first `lost` users lost one pair each."""
    labels = np.repeat(np.arange(users), 4)
    before = np.ones(labels.size)
    after = before.copy()
    after[np.arange(lost) * 4] = 0.0
    return before, after, labels


def test_the_test_over_users_rejects_from_six_users_and_says_when_it_cannot() -> None:
    """Obuchowski's chi-square cannot reject at 4 users (X² ≤ K − 1) and barely under 20; the sign-flip test
    rejects six users who all lost a pair (p = 2/64) and knows that five cannot reach 0.05."""
    six = clustered_test(*_users_lost(8, 6))
    assert six.method == "sign-flip" and six.p_value == pytest.approx(2 / 64) and six.can_reject(0.05)
    five = clustered_test(*_users_lost(8, 5))
    assert five.p_value == pytest.approx(2 / 32) and not five.can_reject(0.05)
    assert "sign-flip test over 8 users (exact)" in six.describe()
    # From 50 users, Obuchowski's test as before.
    many = clustered_test(*_users_lost(60, 12))
    assert many.method == "clustered" and many.floor is None


# --- item 4: calibration and Learn-then-Test over users ------------------------------------------------------------


def _clustered_confidences(seed: int = 0) -> pl.DataFrame:
    """12 users of 25 judgments each; a user's verdicts are all right or all wrong, confidences alike."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(12):
        right = u % 4 != 0
        for k in range(25):
            confidence = float(rng.uniform(0.6, 0.99))
            rows.append(
                judgment(f"u{u}-{k}", SUBSET, "j", correct=right, context="profile")
                | {
                    "user_id": f"u{u}",
                    "p_chosen": confidence if right else 1 - confidence,
                    "confidence": confidence,
                    "confidence_source": "scores",
                }
            )
    return pl.DataFrame(rows)


def test_calibration_intervals_resample_users_when_users_repeat() -> None:
    frame = _clustered_confidences()
    (clustered,) = calibration(frame, seed=1)
    (independent,) = calibration(frame.drop("user_id"), seed=1)
    assert clustered.brier == independent.brier and clustered.ece == independent.ece
    width = clustered.brier_ci_high - clustered.brier_ci_low
    assert width > 2.5 * (independent.brier_ci_high - independent.brier_ci_low)
    # The ECE interval's lower limit comes from resamples of users too.
    assert clustered.ece_ci_low != independent.ece_ci_low


def test_error_correlation_within_users_by_hand() -> None:
    # Every user all right or all wrong: the correlation is 1; alternating within every user: 0 (clipped).
    users = np.repeat(np.arange(6), 5)
    assert error_correlation(np.repeat([1, 0, 0, 1, 0, 0], 5), users) == pytest.approx(1.0)
    assert error_correlation(np.tile([1, 0, 1, 0, 1], 6), users) == 0.0
    # The ANOVA estimator written out.
    wrong = np.array([1, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0], float)
    labels = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 3, 3, 3])
    sizes = np.bincount(labels).astype(float)
    means = np.bincount(labels, wrong) / sizes
    k, n = sizes.size, wrong.size
    msb = np.sum(sizes * (means - wrong.mean()) ** 2) / (k - 1)
    msw = np.sum((wrong - means[labels]) ** 2) / (n - k)
    m0 = (n - np.sum(sizes**2) / n) / (k - 1)
    assert error_correlation(wrong, labels) == pytest.approx(max(0.0, (msb - msw) / (msb + (m0 - 1) * msw)))


def test_learn_then_test_bounds_at_the_effective_size_when_users_repeat() -> None:
    """Errors bunched in users: the threshold found ignoring users keeps more than the one tested at the
    effective size, whose bound is Clopper–Pearson at kept and errors divided by the design effect."""
    rng = np.random.default_rng(5)
    users = np.repeat(np.arange(40), 15)
    bad_user = rng.uniform(size=40) < 0.12
    correct = np.where(
        bad_user[users], rng.uniform(size=users.size) < 0.5, rng.uniform(size=users.size) < 0.97
    )
    confidence = np.where(correct, rng.uniform(0.6, 1.0, users.size), rng.uniform(0.5, 0.9, users.size))
    plain = learn_then_test(confidence, correct, target_error=0.1, delta=0.05)
    clustered = learn_then_test(confidence, correct, target_error=0.1, delta=0.05, users=users)
    assert plain.threshold is not None and plain.design_effect is None
    assert clustered.design_effect is not None and clustered.design_effect > 1.5
    assert clustered.kept < plain.kept
    assert clustered.threshold is not None
    effect = clustered.design_effect
    # Clopper–Pearson at the effective counts, written out: the (1 − δ) quantile of Beta(e + 1, n − e).
    kept, errors = clustered.kept / effect, clustered.errors / effect
    assert clustered.bound == pytest.approx(float(stats.beta.ppf(0.95, errors + 1, kept - errors)))


def test_calibrate_on_a_per_user_run_says_it_tested_at_the_effective_size(tmp_path: Path) -> None:
    frame = _clustered_confidences()
    run_dir = write_run_dir(tmp_path / "run", frame.to_dicts())
    written = pl.read_parquet(run_dir / "judgments.parquet")
    numbers = written.with_columns(pl.col("p_chosen", "confidence").cast(pl.Float64))
    numbers.write_parquet(run_dir / "judgments.parquet")  # the probabilities as numbers
    result = CliRunner().invoke(
        main,
        [
            "calibrate",
            str(run_dir),
            "--target-error",
            "0.3",
            "--delta",
            "0.2",
            "--out",
            str(tmp_path / "s.json"),
        ],
    )
    text = " ".join(result.output.split())
    assert "users have several pairs here: each threshold was tested on its effective size" in text
    if result.exit_code == 0:
        (entry,) = json.loads((tmp_path / "s.json").read_text())["thresholds"]
        assert entry["design_effect"] > 1 and entry["correlation"] > 0.5


# --- item 6: power in users ---------------------------------------------------------------------------------------


def test_the_upper_design_effect_is_the_80th_percentile_over_user_resamples() -> None:
    rng = np.random.default_rng(2)
    labels = np.repeat(np.arange(30), rng.integers(1, 12, size=30))
    first = (rng.uniform(size=labels.size) < 0.8).astype(float)
    second = (
        rng.uniform(size=labels.size) < np.repeat(rng.uniform(0.4, 0.9, 30), np.bincount(labels))
    ).astype(float)
    clusters = PairedClusters.from_pairs(first, second, labels)
    found = upper_design_effect(clusters, seed=0, resamples=20_000)
    d, disc, k = clusters.differences.astype(float), clusters.discordant.astype(float), clusters.count
    picks = np.random.default_rng(9).integers(0, k, size=(20_000, k))
    naive = k / (k - 1) * (d[picks] ** 2).sum(axis=1) / disc[picks].sum(axis=1)
    assert found == pytest.approx(float(np.quantile(naive, 0.8)), rel=0.02)


def test_prbj_power_plans_in_users_where_users_repeat(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    first, second = {}, {}
    for u in range(30):
        m = int(rng.integers(2, 8))
        first[f"u{u:02d}"] = (rng.uniform(size=m) < 0.8).tolist()
        second[f"u{u:02d}"] = (rng.uniform(size=m) < (0.4 if u % 3 == 0 else 0.8)).tolist()
    run_dir = write_run_dir(tmp_path / "run", _paired_frame(first, second).to_dicts())
    result = CliRunner().invoke(
        main, ["power", "--baseline", str(run_dir), "--delta", "0.05", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["pairs"]
    assert row["users_needed"] is not None and row["users_needed"] >= 2
    assert row["pairs_needed"] == math.ceil(row["users_needed"] * row["pairs_per_user"])
    text = " ".join(
        CliRunner().invoke(main, ["power", "--baseline", str(run_dir), "--delta", "0.05"]).output.split()
    )
    assert "Users needed to detect" in text and "Assumed: new users are drawn like these" in text


# --- item 7: groups -----------------------------------------------------------------------------------------------


def test_a_group_that_differs_from_the_rest_is_found_by_the_test_with_holm() -> None:
    outcomes = {}
    ages = {}
    rng = np.random.default_rng(0)
    for u in range(36):
        age = ("18-24", "25-34", "35-44")[u % 3]
        rate = 0.3 if age == "18-24" else 0.85
        outcomes[f"u{u}"] = (rng.uniform(size=6) < rate).tolist()
        ages[f"u{u}"] = age
    rows = [r | {"group:age": ages[r["user_id"]]} for r in rows_of(outcomes)]
    section = users_section(pl.DataFrame(rows), seed=0)
    assert section is not None
    groups = {row["value"]: row for row in section["groups"]}
    young = groups["18-24"]
    assert young["vs_rest_figure"] == "user accuracy" and young["vs_rest"] < -0.3
    assert young["vs_rest_p_holm"] < 0.01 and not young["few_users"]
    raw = [groups[v]["vs_rest_p"] for v in ("18-24", "25-34", "35-44")]
    holm = sorted(raw)
    # Holm: the smallest p times 3, and never below an adjusted p before it.
    assert young["vs_rest_p_holm"] == pytest.approx(min(1.0, 3 * holm[0]))
    assert all(groups[v]["vs_rest_p_holm"] >= groups[v]["vs_rest_p"] for v in groups)


def test_a_pair_level_group_is_compared_within_users() -> None:
    """Tiers vary within users: pair accuracy, tiers permuted among each user's pairs."""
    rows = []
    for u in range(20):
        for k in range(6):
            hard = k % 2 == 0
            right = (k % 4 != 0) if hard else True
            rows.append(
                judgment(f"u{u}-{k}", SUBSET, "j", correct=right)
                | {"user_id": f"u{u}", "group:tier": "hard" if hard else "easy"}
            )
    section = users_section(pl.DataFrame(rows), seed=0)
    assert section is not None
    hard = next(r for r in section["groups"] if r["value"] == "hard")
    assert hard["vs_rest_figure"] == "pair accuracy" and hard["vs_rest_p_holm"] < 0.01


# --- item 8: slices -----------------------------------------------------------------------------------------------


def test_slice_intervals_resample_users_when_users_repeat() -> None:
    outcomes = {f"u{u}": [u % 2 == 0] * 10 for u in range(60)}
    rows = rows_of(outcomes)
    clustered = slice_accuracy(pl.DataFrame(rows), ["subset"], seed=0)
    independent = slice_accuracy(pl.DataFrame(rows).drop("user_id"), ["subset"], seed=0)
    (c,), (i,) = clustered, independent
    assert c.accuracy == i.accuracy == 0.5
    assert (c.ci_high - c.ci_low) > 2.5 * (i.ci_high - i.ci_low)
    (row, _subset) = summarize(pl.DataFrame(rows), seed=0)
    assert (c.ci_low, c.ci_high) == (row.ci_low, row.ci_high)


def _exact_permutation_p(values: np.ndarray, correct: np.ndarray, groups: list[np.ndarray]) -> float:
    """The two-sided permutation p-value of value 1 against the rest, listing every distinct arrangement of the
    values within each group of positions."""

    def statistic(v: np.ndarray) -> float:
        return float(correct[v == 1].mean() - correct[v != 1].mean())

    observed = abs(statistic(values))
    hits = []
    for parts in itertools.product(
        *(sorted(set(itertools.permutations(values[g].tolist()))) for g in groups)
    ):
        arranged = values.copy()
        for g, part in zip(groups, parts, strict=True):
            arranged[g] = part
        hits.append(abs(statistic(arranged)) >= observed - 1e-12)
    return float(np.mean(hits))


def test_the_within_user_permutation_p_value_matches_an_enumeration() -> None:
    users = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2])
    values = np.array([0, 1, 1, 0, 1, 0, 1, 0, 1])
    correct = np.array([1, 0, 0, 1, 0, 1, 1, 1, 0], dtype=float)
    exact = _exact_permutation_p(values, correct, [np.flatnonzero(users == u) for u in range(3)])
    p_value = within_users(values, correct, users, seed=1)[1][1]
    assert abs(p_value - exact) < 0.03  # 1,000 permutations: a standard error under 0.01


def test_the_between_user_permutation_p_value_matches_an_enumeration() -> None:
    values = np.array([1, 1, 1, 0, 0, 0, 2, 2])
    accuracy = np.array([0.2, 0.4, 0.5, 0.9, 1.0, 0.7, 0.8, 0.6])
    exact = _exact_permutation_p(values, accuracy, [np.arange(values.size)])
    p_value = between_users(values, accuracy, seed=2)[1][1]
    assert abs(p_value - exact) < 0.03
