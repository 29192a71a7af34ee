"""`prbj correlate` from real prbj run directories, a downstream store and an other-benchmarks CSV."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from conftest import SUBSET_NAMES, make_record, write_jsonl
from prbj.cli import main

JUDGES = ("random", "length", "bm25-profile", "embed-profile")
RM_NAMES = {
    "random": "RM-Random",
    "length": "RM-Length",
    "bm25-profile": "RM-BM25",
    "embed-profile": "RM-Embed",
}


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), terminal_width=200)


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real `prbj judge` run of the four offline judges on 12 pairs mixing four kinds: chosen fits the profile
    and is longer (A), fits the profile but is shorter (B), is longer without fitting (C), fits neither (D);
    so length and profile judges disagree and accuracies spread out."""
    folder = tmp_path_factory.mktemp("run")
    padding = " It also has weather sealing, dual card slots and a big bright viewfinder for long days."
    records = []
    for i, kind in enumerate("AABCABDABACB", 1):
        record = make_record(i, SUBSET_NAMES[(i - 1) % 3])
        fits, generic = record["chosen"], record["rejected"]
        if kind == "B":
            record["rejected"] = generic + padding
        elif kind == "C":
            record["chosen"], record["rejected"] = generic + padding, fits
        elif kind == "D":
            record["chosen"], record["rejected"] = generic, fits
        records.append(record)
    dataset = write_jsonl(folder / "pairs.jsonl", records)
    result = _invoke("judge", "--no-progress", "--dataset", str(dataset), "--out", str(folder / "reports"))
    assert result.exit_code == 0, result.output
    (run_dir,) = (folder / "reports").iterdir()
    return run_dir


def _accuracies(run_dir: Path, subset: str = "all") -> dict[str, float]:
    summary = json.loads((run_dir / "summary.json").read_text())
    return {r["judge"]: r["accuracy"] for r in summary["results"] if r["subset"] == subset}


def _store(tmp_path: Path, rows: list[tuple[str, str, str, int | None, float]]) -> Path:
    path = tmp_path / "outcomes.jsonl"
    write_jsonl(
        path, [{"rm": rm, "source": s, "subset": sub, "k": k, "score": v} for rm, s, sub, k, v in rows]
    )
    store = tmp_path / "store"
    result = _invoke("downstream", "add", str(path), "--store", str(store))
    assert result.exit_code == 0, result.output
    return store


def _maps() -> list[str]:
    return [arg for judge, rm in RM_NAMES.items() for arg in ("--map", f"{judge}={rm}")]


def test_correlate_matches_scipy_on_the_run_accuracies(judged_run: Path, tmp_path: Path) -> None:
    downstream = {"RM-Random": 0.41, "RM-Length": 0.52, "RM-BM25": 0.47, "RM-Embed": 0.60, "RM-Ghost": 0.2}
    rows = [(rm, "ppo", "Art_and_Entertainment", None, score) for rm, score in downstream.items()]
    store = _store(tmp_path, rows)
    out = tmp_path / "corr"
    result = _invoke(
        "correlate",
        "--run",
        str(judged_run),
        *_maps(),
        "--store",
        str(store),
        "--out",
        str(out),
        "--resamples",
        "300",
    )
    assert result.exit_code == 0, result.output
    assert "RM-Ghost" in result.output  # reported as left out
    # Issue 16: each interval on the terminal says what it resamples.
    # Issue 16: each interval says what it resamples, in the compact layout (column headers) as in the wide
    # one (a label in each cell).
    printed = result.output
    assert ("CI, RMs" in printed and "CI, items" in printed) or (
        re.search(r"RMs \[-?\d", printed) and re.search(r"items \[-?\d", printed)
    )

    document = json.loads((out / "correlation.json").read_text())
    (comparison,) = document["comparisons"]
    assert comparison["benchmark"] == "Personalized-RewardBench" and comparison["benchmark_subset"] == "all"
    assert comparison["missing_from_benchmark"] == ["RM-Ghost"]
    accuracy = {RM_NAMES[j]: a for j, a in _accuracies(judged_run).items()}
    rms = sorted(accuracy)
    assert [r["rm"] for r in comparison["rms"]] == rms
    x = np.array([accuracy[rm] for rm in rms])
    y = np.array([downstream[rm] for rm in rms])
    assert len(set(x)) >= 3  # the fixture must spread accuracies for this check to mean anything
    metrics = comparison["metrics"]
    assert metrics["spearman"]["value"] == pytest.approx(stats.spearmanr(x, y).statistic)
    assert metrics["kendall_tau"]["value"] == pytest.approx(stats.kendalltau(x, y).statistic)
    assert metrics["weighted_tau"]["value"] == pytest.approx(stats.weightedtau(x, y).statistic)
    assert metrics["pearson"]["value"] == pytest.approx(stats.pearsonr(x, y).statistic)
    # Both intervals exist: RMs resampled, and benchmark items resampled from judgments.parquet (12 pairs).
    assert comparison["bootstrap_items"] == 12
    for name in ("ndcg", "rbo"):
        assert metrics[name]["ci_over_rms"]["used"] == 300
        assert metrics[name]["ci_over_items"]["low"] <= metrics[name]["ci_over_items"]["high"]
    markdown = (out / "correlation.md").read_text()
    assert "| downstream | benchmark | RMs |" in markdown and "RM-Ghost" in markdown


def test_same_inputs_and_seed_give_identical_files(judged_run: Path, tmp_path: Path) -> None:
    rows = [
        (rm, "ppo", "all", None, v) for rm, v in zip(RM_NAMES.values(), (0.1, 0.3, 0.2, 0.4), strict=True)
    ]
    store = _store(tmp_path, rows)
    outputs = []
    for name in ("a", "b"):
        out = tmp_path / name
        args = ["correlate", "--run", str(judged_run), *_maps(), "--store", str(store), "--out", str(out)]
        assert _invoke(*args, "--resamples", "200").exit_code == 0
        outputs.append((out / "correlation.json").read_bytes())
    assert outputs[0] == outputs[1]


def test_external_benchmarks_k_choice_and_derived_overall(tmp_path: Path) -> None:
    """No prbj run: two benchmarks from a CSV against BoN tables with several k and subsets."""
    rms = ["A", "B", "C", "D"]
    bench = tmp_path / "bench.csv"
    lines = ["rm,benchmark,accuracy"]
    lines += [f"{rm},Agrees,{acc}" for rm, acc in zip(rms, (60, 70, 80, 90), strict=True)]
    lines += [f"{rm},Reversed,{acc}" for rm, acc in zip(rms, (0.9, 0.8, 0.7, 0.6), strict=True)]
    bench.write_text("\n".join(lines) + "\n")
    rows = []
    for s, subset in enumerate(("Art_and_Entertainment", "Society_and_Culture")):
        for i, rm in enumerate(rms):
            for k in (1, 4, 16):
                rows.append((rm, "bon", subset, k, 1.0 + 0.1 * i + 0.01 * k + s))
    rows.append(("A", "bon", "Art_and_Entertainment", 32, 9.0))  # only one RM reaches k=32
    store = _store(tmp_path, rows)
    out = tmp_path / "corr"
    result = _invoke("correlate", "--benchmarks", str(bench), "--store", str(store), "--out", str(out))
    assert result.exit_code == 0, result.output
    document = json.loads((out / "correlation.json").read_text())
    by_key = {(c["subset"], c["benchmark"]): c for c in document["comparisons"]}
    # 'max' picks the largest k that most RMs share (16), not the k=32 only A has.
    assert {c["k"] for c in document["comparisons"]} == {16}
    assert set(by_key) == {
        (s, b)
        for s in ("Art_and_Entertainment", "Society_and_Culture", "all")
        for b in ("Agrees", "Reversed")
    }
    assert by_key[("all", "Agrees")]["derived_subset"] is True
    for subset in ("Art_and_Entertainment", "all"):
        agrees, reversed_ = by_key[(subset, "Agrees")]["metrics"], by_key[(subset, "Reversed")]["metrics"]
        for name in ("spearman", "kendall_tau", "weighted_tau"):
            assert agrees[name]["value"] == pytest.approx(1.0)
            assert reversed_[name]["value"] == pytest.approx(-1.0)
        assert agrees["ndcg"]["value"] == pytest.approx(1.0) and reversed_["ndcg"]["value"] < 1.0
        assert by_key[(subset, "Agrees")]["metrics"]["spearman"]["ci_over_items"] is None
    # The derived overall score is the mean over the two subsets (no n given).
    overall = {r["rm"]: r["downstream"] for r in by_key[("all", "Agrees")]["rms"]}
    assert overall["B"] == pytest.approx(((1.1 + 0.16) + (2.1 + 0.16)) / 2)

    every_k = _invoke(
        "correlate", "--benchmarks", str(bench), "--store", str(store), "--out", str(out), "--k", "all"
    )
    assert every_k.exit_code == 0, every_k.output
    ks = {c["k"] for c in json.loads((out / "correlation.json").read_text())["comparisons"]}
    assert ks == {1, 4, 16}  # k=32 has one RM: skipped, and said so
    assert "k=32" in every_k.output and "at least 3" in every_k.output


def test_negative_downstream_scores_shift_ndcg_gains(tmp_path: Path) -> None:
    bench = tmp_path / "bench.csv"
    bench.write_text("rm,benchmark,accuracy\nA,X,1\nB,X,2\nC,X,3\n")
    store = _store(
        tmp_path,
        [("A", "ppo", "all", None, -2.0), ("B", "ppo", "all", None, -1.0), ("C", "ppo", "all", None, 0.5)],
    )
    out = tmp_path / "corr"
    result = _invoke("correlate", "--benchmarks", str(bench), "--store", str(store), "--out", str(out))
    assert result.exit_code == 0, result.output
    (comparison,) = json.loads((out / "correlation.json").read_text())["comparisons"]
    assert comparison["ndcg_gain_shift"] == 2.0
    assert comparison["metrics"]["ndcg"]["value"] == pytest.approx(1.0)
    assert "shifted" in result.output


def test_fewer_than_three_shared_rms_is_exit_2(judged_run: Path, tmp_path: Path) -> None:
    store = _store(
        tmp_path,
        [
            ("RM-Length", "ppo", "all", None, 0.5),
            ("RM-BM25", "ppo", "all", None, 0.4),
            ("X", "ppo", "all", None, 0.1),
        ],
    )
    result = _invoke(
        "correlate", "--run", str(judged_run), *_maps(), "--store", str(store), "--out", str(tmp_path / "o")
    )
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "fewer than 3 RMs overlap" in lines[0]
    assert not (tmp_path / "o").exists()


def test_unmapped_judge_names_do_not_match_rm_names(judged_run: Path, tmp_path: Path) -> None:
    store = _store(tmp_path, [(rm, "ppo", "all", None, float(i)) for i, rm in enumerate(RM_NAMES.values())])
    result = _invoke(
        "correlate", "--run", str(judged_run), "--store", str(store), "--out", str(tmp_path / "o")
    )
    assert result.exit_code == 2 and "--map JUDGE=RM" in result.output


def test_map_naming_an_unknown_judge_is_exit_2(judged_run: Path, tmp_path: Path) -> None:
    store = _store(tmp_path, [("a", "ppo", "all", None, 1.0)])
    result = _invoke("correlate", "--run", str(judged_run), "--map", "bm25=RM-X", "--store", str(store))
    assert result.exit_code == 2 and "no such judge" in result.output


def test_missing_run_directory_is_exit_2(tmp_path: Path) -> None:
    store = _store(tmp_path, [("a", "ppo", "all", None, 1.0)])
    result = _invoke("correlate", "--run", str(tmp_path), "--store", str(store))
    assert result.exit_code == 2 and "no summary.json" in result.output


def test_bad_benchmark_csv_names_line_and_field(tmp_path: Path) -> None:
    bench = tmp_path / "bench.csv"
    bench.write_text("rm,benchmark,accuracy\nA,X,0.5\nB,X,\n")
    store = _store(tmp_path, [("a", "ppo", "all", None, 1.0)])
    result = _invoke("correlate", "--benchmarks", str(bench), "--store", str(store))
    assert result.exit_code == 2
    assert f"error: {bench}:3: field 'accuracy': missing" in result.output


def test_help_has_examples() -> None:
    for command in (["correlate"], ["downstream", "add"], ["downstream", "show"], ["serve"]):
        text = _invoke(*command, "--help").output
        assert "Examples:" in text and f"prbj {' '.join(command)}" in text, command


def test_each_interval_in_a_wide_correlate_cell_is_labelled() -> None:
    from prbj.analysis.correlate import Interval
    from prbj.analysis.correlate_run import MetricResult
    from prbj.report.correlation import _rich_cell

    cell = _rich_cell(MetricResult(0.5, Interval(0.1, 0.9, 300, 300), Interval(0.2, 0.8, 300, 300)))
    assert "RMs [0.10, 0.90]" in cell and "items [0.20, 0.80]" in cell
