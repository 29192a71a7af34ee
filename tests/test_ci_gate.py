"""The CI recipe and the committed baseline: keep them usable as the code changes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from prbj.analysis.baseline import read_baseline
from prbj.cli import main

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "examples" / "github-actions-judge-gate.yml"
SAMPLE_BASELINE = ROOT / "reports" / "baselines" / "sample-offline.json"


def _steps() -> list[dict]:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def test_workflow_restores_the_cache_replays_and_gates() -> None:
    steps = _steps()
    uses = [step.get("uses", "") for step in steps]
    runs = [" ".join(step.get("run", "").split()) for step in steps]
    assert any(u.startswith("actions/cache/restore@") for u in uses)
    assert any(u.startswith("actions/cache/save@") for u in uses)
    replay = next(r for r in runs if r.startswith("prbj judge --cache-only"))
    gate_index = next(i for i, r in enumerate(runs) if r.startswith("prbj check"))
    assert runs.index(replay) < gate_index
    assert "--baseline" in runs[gate_index]


def test_every_check_option_the_workflow_uses_exists() -> None:
    help_text = CliRunner().invoke(main, ["check", "--help"], terminal_width=200).output
    gate = next(" ".join(s["run"].split()) for s in _steps() if s.get("run", "").startswith("prbj check"))
    for option in re.findall(r"(--[a-z-]+)", gate):
        assert option in help_text, option


def test_committed_sample_baseline_is_consistent() -> None:
    baseline = read_baseline(SAMPLE_BASELINE)
    assert baseline.dataset["source"] == "sample"
    assert len(baseline.items) == baseline.dataset["n_pairs"]
    assert {judge for judge, _ in baseline.outcomes} == {"random", "length", "bm25-profile", "embed-profile"}
    for row in (r for r in baseline.results if r.subset == "all"):
        items = baseline.outcomes[(row.judge, row.context)]
        assert set(items) == set(baseline.items)
        assert sum(1 for v in items.values() if v) == row.correct
        assert sum(1 for v in items.values() if v is not None) == row.n_ok


def test_every_judge_option_the_workflow_uses_exists() -> None:
    help_text = CliRunner().invoke(main, ["judge", "--help"], terminal_width=200).output
    judge_runs = [" ".join(s["run"].split()) for s in _steps() if s.get("run", "").startswith("prbj judge")]
    assert len(judge_runs) == 2
    for run in judge_runs:
        for option in re.findall(r"(--[a-z-]+)", run):
            assert option in help_text, option


def test_a_replay_with_answers_missing_from_the_cache_fails_the_gate(tmp_path: Path) -> None:
    """--cache-only sends nothing; a cache that lacks the answers leaves skipped judgments, and the gate
    must fail on them rather than pass a run that judged nothing."""
    out = tmp_path / "runs"
    replay = CliRunner().invoke(
        main,
        [
            "judge",
            "--no-progress",
            "--cache-only",
            "-p",
            "openai-compatible",
            # Nothing listens there, and --cache-only must not try.
            "--api-base",
            "http://127.0.0.1:9/v1",
            "--limit",
            "2",
            "--cache-dir",
            str(tmp_path / "empty-cache"),
            "--out",
            str(out),
        ],
    )
    # The run itself already says it judged nothing (exit 1); its directory is still written for the gate.
    assert replay.exit_code == 1, replay.output
    assert "had no successful judgment" in replay.output
    (run_dir,) = list(out.iterdir())
    baseline = tmp_path / "baseline.json"
    assert (
        CliRunner()
        .invoke(main, ["check", str(run_dir), "--baseline", str(baseline), "--update-baseline"])
        .exit_code
        == 0
    )
    gate = CliRunner().invoke(main, ["check", str(run_dir), "--baseline", str(baseline), "--format", "json"])
    assert gate.exit_code == 1
    failures = json.loads(gate.output)["failures"]
    assert any("'openai-compatible'" in f and "failed" in f for f in failures)
    assert "## Failures" in (run_dir / "report.md").read_text()
