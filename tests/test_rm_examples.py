"""The reference reward models of examples/rms/ (issue 40 item 2), each run by the real `prbj judge` here: the
per-user head beats the length baseline where users' tastes differ; the few-shot judge talks to the loopback
OpenAI-compatible server (tests/loopback.py), a 429 and an empty reply among its answers; the ten-line length
model gives the built-in `length` baseline's verdicts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from loopback import ChatRequest, Fault, ProviderServer

from prbj.cli import main

ROOT = Path(__file__).resolve().parents[1]
RMS = ROOT / "examples" / "rms"
TASTES = RMS / "tastes.jsonl"


def judge(tmp_path: Path, *args: str) -> tuple[str, Path]:
    out = tmp_path / "runs"
    before = set(out.iterdir()) if out.exists() else set()
    command = ["judge", "--no-progress", "--cache-dir", str(tmp_path / "cache"), "--out", str(out), *args]
    result = CliRunner().invoke(main, command, env={"COLUMNS": "1000"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (run_dir,) = set(out.iterdir()) - before
    return result.output, run_dir


def accuracy(run_dir: Path) -> dict[str, float]:
    results = json.loads((run_dir / "summary.json").read_text())["results"]
    return {r["judge"]: r["accuracy"] for r in results if r["subset"] == "all"}


def test_the_tastes_sample_is_what_its_script_writes() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import make_tastes, json; print(''.join(json.dumps(r, ensure_ascii=False) + "
         "'\\n' for r in make_tastes.records()), end='')"],
        cwd=RMS, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout == TASTES.read_text(encoding="utf-8")


def test_the_per_user_head_beats_the_length_baseline_where_tastes_differ(tmp_path: Path) -> None:
    head, length = "py:examples/rms/user_head.py:UserHead", "py:examples/rms/length.py:Length"
    _, run_dir = judge(tmp_path, "--dataset", str(TASTES), "-p", head, "-p", length, "-p", "length")
    figures = accuracy(run_dir)
    # Measured: the head 100% (48/48), the length baseline 47.9% (23/48, 4 ties).
    assert figures[head] >= 0.9
    assert figures[length] <= 0.6
    assert figures[head] - figures[length] >= 0.3
    # The ten-line model is the built-in baseline: the same verdict on every pair.
    frame = pl.read_parquet(run_dir / "judgments.parquet")
    mine = frame.filter(pl.col("judge") == length).sort("pair_id")["verdict"]
    builtin = frame.filter(pl.col("judge") == "length").sort("pair_id")["verdict"]
    assert mine.to_list() == builtin.to_list()


def test_the_length_model_is_ten_lines() -> None:
    assert len((RMS / "length.py").read_text(encoding="utf-8").splitlines()) <= 11


def _reply(request: ChatRequest) -> str:
    """A scripted few-shot model: the answer sharing more words with what this person preferred before."""
    prompt = request.last_user
    if "Which answer does this person prefer" not in prompt:
        return "Score: 5"
    preferred = " ".join(re.findall(r"They preferred: (.*)", prompt)).lower().split()
    first = re.search(r"Answer A: (.*)", prompt)
    second = re.search(r"Answer B: (.*)", prompt)
    assert first and second

    def overlap(text: str) -> int:
        return len(set(text.lower().split()) & set(preferred))

    return "Answer: A" if overlap(first.group(1)) >= overlap(second.group(1)) else "Answer: B"


@pytest.fixture
def few_shot_env(monkeypatch: pytest.MonkeyPatch) -> Any:
    with ProviderServer() as server:
        monkeypatch.setenv("FEW_SHOT_MODEL", "openai/loopback-judge")
        monkeypatch.setenv("FEW_SHOT_API_BASE", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
        monkeypatch.setenv("FEW_SHOT_RETRY_SECONDS", "0")
        yield server


def test_the_few_shot_judge_waits_out_a_429_and_fails_only_the_pair_with_an_empty_reply(
    tmp_path: Path, few_shot_env: ProviderServer
) -> None:
    server = few_shot_env
    empty_once: set[str] = set()
    target = "Pick up a used manual camera"  # one answer: its first request is answered with nothing

    def reply(request: ChatRequest) -> str:
        if target in request.last_user and not empty_once:
            empty_once.add(request.last_user)
            return ""
        return _reply(request)

    server.reply = reply
    server.inject(Fault("429", retry_after=0))
    spec = "py:examples/rms/few_shot.py:FewShot"
    # Under `any` the run directory keeps the failure's message (a guarded policy keeps its cause only).
    output, run_dir = judge(tmp_path, "--dataset", str(TASTES), "-p", spec, "--personal-data", "any")
    frame = pl.read_parquet(run_dir / "judgments.parquet")
    failed = frame.filter(pl.col("status") != "ok")
    assert failed.height == 1, output
    assert failed["status"][0] == "parse_error"
    assert "few_shot.py:FewShot: prefer returned nan for pair" in failed["error"][0]
    # One request per pair (the order drawn), and one more: the request answered 429, waited out and sent again.
    assert len(server.requests) == frame.height + 1
    assert not server._faults  # the 429 was served
    # The scripted model (word overlap with the earlier choices) is right on about 80% of the pairs answered
    # (37 or 38 of 47: which pair's reply is empty depends on the order concurrent requests arrive in).
    assert accuracy(run_dir)[spec] >= 0.75
    # The failed pair is asked again on the next run, and only it.
    sent = len(server.requests)
    _, again = judge(tmp_path, "--dataset", str(TASTES), "-p", spec)
    assert len(server.requests) == sent + 1
    assert set(pl.read_parquet(again / "judgments.parquet")["status"]) == {"ok"}


def test_the_twenty_line_example_of_the_docs_is_the_file_the_suite_runs() -> None:
    """docs/plugins.md shows examples/rms/overlap.py as it is (its docstring aside), and its docs example runs
    that file (tests/test_examples.py)."""
    doc = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    section = doc.split("## A model in twenty lines", 1)[1]
    shown = section.split("```python\n", 1)[1].split("```", 1)[0]
    code = (RMS / "overlap.py").read_text(encoding="utf-8").split('"""\n\n', 1)[1]
    assert shown == code
    assert len(code.strip().splitlines()) <= 22


def test_the_twenty_line_example_learns_each_users_taste(tmp_path: Path) -> None:
    spec = "py:examples/rms/overlap.py:Overlap"
    _, run_dir = judge(tmp_path, "--dataset", str(TASTES), "-p", spec, "--batch-size", "16")
    assert accuracy(run_dir)[spec] == pytest.approx(46 / 48)  # as docs/plugins.md says: 95.8%
