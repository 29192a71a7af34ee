from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from scipy import stats

from prbj.cli import main
from run_dirs import judgment, outcomes, write_run_dir

ART = "Art_and_Entertainment"
SOCIETY = "Society_and_Culture"


def _invoke(*args: str) -> Result:
    # Wide enough that each warning and failure stays on one line (prbj wraps its output at COLUMNS).
    return CliRunner(env={"COLUMNS": "400"}).invoke(main, list(args), catch_exceptions=False)


def _only_run_dir(out: Path) -> Path:
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


def _baseline(run_dir: Path, path: Path) -> Path:
    result = _invoke("check", str(run_dir), "--baseline", str(path), "--update-baseline")
    assert result.exit_code == 0, result.output
    return path


def _two_judges(flips_on_art: int, *, n: int = 40, judge: str = "steady") -> list[dict]:
    """`judge` right on every Art pair but the first `flips_on_art`; an untouched second judge; and a
    Society subset the judge gets 3 in 4 right on."""
    art = [i >= flips_on_art for i in range(n)]
    society = [i % 4 != 0 for i in range(n)]
    return [
        *outcomes(judge, ART, art, prefix="art"),
        *outcomes(judge, SOCIETY, society, prefix="soc"),
        *outcomes("other", ART, [True] * n, prefix="art"),
        *outcomes("other", SOCIETY, society, prefix="soc"),
    ]


def test_identical_rerun_of_prbj_judge_passes(small_dataset: Path, tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        result = _invoke("judge", "--no-progress", "--dataset", str(small_dataset), "--out", str(out))
        assert result.exit_code == 0, result.output
        runs.append(_only_run_dir(out))
    baseline = _baseline(runs[0], tmp_path / "baselines" / "base.json")
    result = _invoke("check", str(runs[1]), "--baseline", str(baseline))
    assert result.exit_code == 0, result.output
    assert "passed" in result.output and "FAIL" not in result.output
    document = json.loads(baseline.read_text())
    # Four offline judges × (all + three subsets), and every pair's outcome for every judge.
    assert len(document["results"]) == 16
    assert len(document["items"]) == 6
    assert {o["judge"] for o in document["outcomes"]} == {"random", "length", "bm25-profile", "embed-profile"}


def test_many_flipped_items_fail_with_exit_1_naming_judge_and_subset(tmp_path: Path) -> None:
    base_run = write_run_dir(tmp_path / "base", _two_judges(0))
    new_run = write_run_dir(tmp_path / "new", _two_judges(12))
    baseline = _baseline(base_run, tmp_path / "base.json")
    result = _invoke("check", str(new_run), "--baseline", str(baseline))
    assert result.exit_code == 1, result.output
    fail_lines = [line for line in result.output.splitlines() if line.startswith("FAIL:")]
    assert any("'steady'" in line and f"'{ART}'" in line for line in fail_lines), result.output
    assert any("'steady'" in line and "'all'" in line for line in fail_lines)
    # The untouched judge and the untouched subset must not be blamed.
    assert not any("'other'" in line or SOCIETY in line for line in fail_lines)
    assert "regression" in result.output


def test_json_output_carries_the_paired_test(tmp_path: Path) -> None:
    baseline = _baseline(write_run_dir(tmp_path / "base", _two_judges(0)), tmp_path / "base.json")
    new_run = write_run_dir(tmp_path / "new", _two_judges(12))
    result = _invoke("check", str(new_run), "--baseline", str(baseline), "--format", "json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["passed"] is False and report["exit_code"] == 1
    group = next(g for g in report["groups"] if g["judge"] == "steady" and g["subset"] == ART)
    assert group["status"] == "fail"
    assert (group["lost"], group["gained"], group["paired_items"]) == (12, 0, 40)
    assert group["delta_points"] == pytest.approx(-30.0)
    assert group["p_value"] == pytest.approx(stats.binomtest(12, 12, 0.5).pvalue)
    assert group["test"] == "exact"
    other = next(g for g in report["groups"] if g["judge"] == "other" and g["subset"] == ART)
    assert other["status"] == "pass" and other["lost"] == 0
    assert any("steady" in f and ART in f for f in report["failures"])


def test_small_drop_that_is_not_significant_passes_with_a_warning(tmp_path: Path) -> None:
    baseline = _baseline(write_run_dir(tmp_path / "base", _two_judges(0)), tmp_path / "base.json")
    # Two flips out of 40 on Art: 5 points down, beyond a 2-point tolerance, but p = 0.5.
    new_run = write_run_dir(tmp_path / "new", _two_judges(2))
    result = _invoke("check", str(new_run), "--baseline", str(baseline))
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert any("'steady'" in w and ART in w and "not significant" in w for w in warnings), result.output
    assert "passed" in result.output


def test_a_drop_within_tolerance_is_not_even_a_warning(tmp_path: Path) -> None:
    baseline = _baseline(write_run_dir(tmp_path / "base", _two_judges(0)), tmp_path / "base.json")
    result = _invoke(
        "check",
        str(write_run_dir(tmp_path / "new", _two_judges(2))),
        "--baseline",
        str(baseline),
        "--tolerance",
        "10",
        "--format",
        "json",
    )
    report = json.loads(result.output)
    assert result.exit_code == 0 and report["warnings"] == []


def test_a_significant_but_tolerated_drop_passes_and_alpha_is_honoured(tmp_path: Path) -> None:
    baseline = _baseline(write_run_dir(tmp_path / "base", _two_judges(0)), tmp_path / "base.json")
    new_run = str(write_run_dir(tmp_path / "new", _two_judges(12)))
    assert _invoke("check", new_run, "--baseline", str(baseline), "--tolerance", "40").exit_code == 0
    # p for 12 of 12 is about 0.0005: an alpha below it turns the failure into a warning.
    assert _invoke("check", new_run, "--baseline", str(baseline), "--alpha", "0.0001").exit_code == 0


def test_error_rate_above_the_bound_fails(tmp_path: Path) -> None:
    rows = _two_judges(0)
    baseline = _baseline(write_run_dir(tmp_path / "base", rows), tmp_path / "base.json")
    broken = [
        judgment(r["pair_id"], r["subset"], r["judge"], status="parse_error", error="no verdict")
        if r["judge"] == "other" and r["subset"] == SOCIETY and r["pair_id"] < "soc-008"
        else r
        for r in rows
    ]
    new_run = str(write_run_dir(tmp_path / "new", broken))
    result = _invoke("check", new_run, "--baseline", str(baseline), "--format", "json")
    report = json.loads(result.output)
    assert result.exit_code == 1
    assert any("'other'" in f and SOCIETY in f and "failed" in f for f in report["failures"])
    assert _invoke("check", new_run, "--baseline", str(baseline), "--max-error-rate", "0.5").exit_code == 0


def test_cost_bound_counts_only_calls_not_served_from_the_cache(tmp_path: Path) -> None:
    def priced(cached: bool) -> list[dict]:
        return [{**r, "cost_usd": 0.01, "cached": cached} for r in _two_judges(0)]

    baseline = _baseline(write_run_dir(tmp_path / "base", priced(False)), tmp_path / "base.json")
    paid = str(write_run_dir(tmp_path / "paid", priced(False)))
    replay = str(write_run_dir(tmp_path / "replay", priced(True)))
    result = _invoke("check", paid, "--baseline", str(baseline), "--max-cost", "0.5", "--format", "json")
    assert result.exit_code == 1
    assert json.loads(result.output)["spent_usd"] == pytest.approx(1.6)
    assert _invoke("check", replay, "--baseline", str(baseline), "--max-cost", "0").exit_code == 0


def test_max_cost_without_recorded_cost_warns(tmp_path: Path) -> None:
    baseline = _baseline(write_run_dir(tmp_path / "base", _two_judges(0)), tmp_path / "base.json")
    new_run = str(write_run_dir(tmp_path / "new", _two_judges(0)))
    result = _invoke("check", new_run, "--baseline", str(baseline), "--max-cost", "1")
    assert result.exit_code == 0
    assert "no cost" in result.output


def test_judge_missing_from_the_run_is_a_data_error(tmp_path: Path) -> None:
    baseline = _baseline(write_run_dir(tmp_path / "base", _two_judges(0)), tmp_path / "base.json")
    without_other = [r for r in _two_judges(0) if r["judge"] != "other"]
    result = CliRunner().invoke(
        main, ["check", str(write_run_dir(tmp_path / "new", without_other)), "--baseline", str(baseline)]
    )
    assert result.exit_code == 2
    assert "'other'" in result.output and "not in the run" in result.output
    # Restricting the check to the judge that is there makes it pass.
    restricted = _invoke("check", str(tmp_path / "new"), "--baseline", str(baseline), "--judge", "steady")
    assert restricted.exit_code == 0, restricted.output


def test_subset_selection_and_unknown_names(tmp_path: Path) -> None:
    baseline = _baseline(write_run_dir(tmp_path / "base", _two_judges(0)), tmp_path / "base.json")
    new_run = str(write_run_dir(tmp_path / "new", _two_judges(12)))
    only_society = _invoke(
        "check", new_run, "--baseline", str(baseline), "--subset", "soc", "--format", "json"
    )
    assert only_society.exit_code == 0
    assert {g["subset"] for g in json.loads(only_society.output)["groups"]} == {SOCIETY}
    unknown = CliRunner().invoke(main, ["check", new_run, "--baseline", str(baseline), "--subset", "nope"])
    assert unknown.exit_code == 2 and "nope" in unknown.output
    bad_judge = CliRunner().invoke(main, ["check", new_run, "--baseline", str(baseline), "--judge", "nope"])
    assert bad_judge.exit_code == 2 and "nope" in bad_judge.output


def test_other_data_missing_files_and_bad_baselines_exit_2(tmp_path: Path) -> None:
    base_run = write_run_dir(tmp_path / "base", _two_judges(0))
    baseline = _baseline(base_run, tmp_path / "base.json")
    elsewhere = write_run_dir(tmp_path / "other-data", _two_judges(0), fingerprint="different")
    cases = {
        "fingerprint": ["check", str(elsewhere), "--baseline", str(baseline)],
        "no baseline": ["check", str(base_run), "--baseline", str(tmp_path / "missing.json")],
        "no run": ["check", str(tmp_path / "nowhere"), "--baseline", str(baseline)],
    }
    not_a_baseline = tmp_path / "summary-copy.json"
    not_a_baseline.write_text((base_run / "summary.json").read_text())
    cases["not a baseline"] = ["check", str(base_run), "--baseline", str(not_a_baseline)]
    for name, args in cases.items():
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (name, result.output)
        assert len([line for line in result.output.splitlines() if line.strip()]) == 1, (name, result.output)
    assert "fingerprint" in CliRunner().invoke(main, cases["fingerprint"]).output


def test_update_baseline_round_trips_outcomes_including_failures(tmp_path: Path) -> None:
    rows = [
        judgment("x-1", ART, "j", correct=True),
        judgment("x-2", ART, "j", correct=False),
        judgment("x-3", ART, "j", tie=True),
        judgment("x-4", ART, "j", status="api_error", error="boom"),
        # The same pair judged in both answer orders keeps two items apart.
        judgment("x-5", ART, "pw", position="A", correct=True),
        judgment("x-5", ART, "pw", position="B", correct=False),
    ]
    baseline = _baseline(write_run_dir(tmp_path / "run", rows), tmp_path / "b.json")
    document = json.loads(baseline.read_text())
    by_judge = {o["judge"]: o["items"] for o in document["outcomes"]}
    assert by_judge["j"] == {"x-1": 1, "x-2": 0, "x-3": 0, "x-4": None}
    assert by_judge["pw"] == {"x-5": 1, "x-5#B": 0}
    assert document["items"]["x-5#B"] == ART
    run = str(tmp_path / "run")
    # Identical outcomes, but one judgment in four failed: only the error-rate bound can fail this run.
    assert _invoke("check", run, "--baseline", str(baseline), "--max-error-rate", "0.25").exit_code == 0
    assert _invoke("check", run, "--baseline", str(baseline)).exit_code == 1


def test_check_help_has_examples() -> None:
    text = CliRunner().invoke(main, ["check", "--help"], terminal_width=200).output
    for option in (
        "--baseline",
        "--update-baseline",
        "--tolerance",
        "--alpha",
        "--max-error-rate",
        "--max-cost",
    ):
        assert option in text
    assert "Examples:" in text
