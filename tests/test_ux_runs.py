"""Issue 16 on real runs against the loopback provider: progress lines when stderr is not a terminal, replies
and prompt hashes kept in judgments.parquet, `prbj show` and `prbj diff`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from loopback import ProviderServer

from prbj.cli import main
from prbj.data import load_dataset

SAMPLE = load_dataset()
SAMPLE_LINES = (
    (Path(__file__).resolve().parents[1] / "prbj" / "data" / "sample" / "Art_and_Entertainment.jsonl")
    .read_text(encoding="utf-8")
    .splitlines(keepends=True)
)
CHOSEN = {pair.chosen for pair in SAMPLE.pairs}


def right_answer(request) -> str:
    text = request.last_user
    shown_a = text.split("## Answer A\n", 1)[1].split("\n\n## Answer B", 1)[0]
    return "Weighing both.\nResult: " + ("A" if shown_a in CHOSEN else "B")


def always_a(request) -> str:
    return "A looks better to me.\nResult: A"


def judge_command(server: ProviderServer, folder: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "prbj", "judge", "-p", "gpt-5.1", "--api-base", server.url, "--context", "none",
        "--cache-dir", str(folder / "cache"), "--out", str(folder / "out"), "--rpm", "600000", *extra,
    ]  # fmt: skip


def environment(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**base, "OPENAI_API_KEY": "sk-test", "PYTHONUNBUFFERED": "1", **extra}


def only_run(folder: Path) -> Path:
    (run,) = list((folder / "out").iterdir())
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Run A (always right, with progress on and stderr a pipe) and run B (always says A) of the sample."""
    with ProviderServer(reply=right_answer) as server:
        a = tmp_path_factory.mktemp("a")
        server.latency = 0.05
        done_a = subprocess.run(
            judge_command(server, a, "--max-concurrency", "2", "--max-cost", "5"),
            capture_output=True, text=True, timeout=240, env=environment(PRBJ_PROGRESS_EVERY="0.3"),
        )  # fmt: skip
        server.latency = 0.0
        server.reply = always_a
        b = tmp_path_factory.mktemp("b")
        done_b = subprocess.run(
            judge_command(server, b, "--no-progress"), capture_output=True, text=True, timeout=240,
            env=environment(),
        )  # fmt: skip
    assert done_a.returncode == 0, done_a.stderr
    assert done_b.returncode == 0, done_b.stderr
    return {"a": only_run(a), "b": only_run(b), "stderr_a": done_a.stderr}


@pytest.mark.processes
def test_a_run_without_a_terminal_prints_progress_lines(runs) -> None:
    lines = [line for line in str(runs["stderr_a"]).splitlines() if line.startswith("judging: ")]
    assert len(lines) >= 2, runs["stderr_a"]
    last = lines[-1]
    assert "60/60 (100%)" in last and "ETA" in last and "calls/s" in last
    assert "of $5.00" in last and "0 failed" in last


def test_judgments_keep_the_reply_and_prompt_hash_of_every_llm_judgment(runs) -> None:
    judgments = pl.read_parquet(Path(str(runs["a"])) / "judgments.parquet")
    assert judgments["reply"].null_count() == 0
    assert all("Result: " in reply for reply in judgments["reply"])
    hashes = judgments["prompt_hash"].to_list()
    assert all(h and len(h) == 16 for h in hashes) and len(set(hashes)) == len(hashes)
    assert judgments["original_cost_usd"].sum() > 0


def test_show_prints_what_the_judge_saw_and_said(runs) -> None:
    run_b = str(runs["b"])
    result = CliRunner().invoke(main, ["show", run_b, "--only", "incorrect", "--limit", "2"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Question" in out and "Answer A (rejected)" in out and "Answer B (chosen)" in out
    assert "A looks better to me." in out and "incorrect" in out
    assert "2 of " in out
    pair = SAMPLE.pairs[0].id
    one = CliRunner().invoke(main, ["show", run_b, "--pair", pair])
    assert one.exit_code == 0 and f"{pair} · " in one.output and "1 judgments shown" in one.output
    typo = CliRunner().invoke(main, ["show", run_b, "--judge", "gpt-5"])
    assert typo.exit_code == 2 and "did you mean 'gpt-5.1'" in typo.output


def test_diff_lists_changed_verdicts_with_both_replies(runs) -> None:
    result = CliRunner().invoke(main, ["diff", str(runs["a"]), str(runs["b"])])
    assert result.exit_code == 0, result.output
    a = pl.read_parquet(Path(str(runs["a"])) / "judgments.parquet")
    b = pl.read_parquet(Path(str(runs["b"])) / "judgments.parquet")
    changed = a.join(b, on="pair_id", suffix="_b").filter(pl.col("verdict") != pl.col("verdict_b")).height
    assert changed > 0
    # Issue 35: the runs are named by their ids, never "A" and "B" (the letters of the answers' positions).
    id_a, id_b = Path(str(runs["a"])).name, Path(str(runs["b"])).name
    assert (
        f"{changed} of 60 shared judgments changed from {id_a} to {id_b} (0 now correct, {changed} no longer "
        "correct)" in " ".join(result.output.split())
    )
    assert f"Reply of {id_a}" in result.output and f"Reply of {id_b}" in result.output
    assert "Reply in A" not in result.output and "A looks better" in result.output


def test_diff_refuses_runs_of_different_datasets(runs, tmp_path: Path) -> None:
    other = tmp_path / "other"
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(SAMPLE_LINES[:2]))
    ok = CliRunner().invoke(
        main, ["judge", "--no-progress", "-p", "length", "--dataset", str(pairs), "--out", str(other)]
    )
    assert ok.exit_code == 0, ok.output
    (run,) = list(other.iterdir())
    result = CliRunner().invoke(main, ["diff", str(runs["a"]), str(run)])
    assert result.exit_code == 2 and "different datasets" in result.output


def test_show_names_an_unknown_pair_and_reads_the_pairs_of_a_limited_run(tmp_path: Path, monkeypatch) -> None:
    """Issue 26: `--pair p-0007` on a run without it was "0 judgments shown", exit 0; a run of a --limit
    selection showed no question ("the sample has changed since the run")."""
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(main, ["judge", "--no-progress", "--limit", "2", "-p", "length"]).exit_code == 0
    (run,) = (tmp_path / "reports").iterdir()
    unknown = CliRunner().invoke(main, ["show", str(run), "--pair", "ae-0001"])
    assert unknown.exit_code == 2, unknown.output
    assert "--pair 'ae-0001': not in this run; did you mean 'ae-001'" in unknown.output
    shown = CliRunner().invoke(main, ["show", str(run), "--pair", "ae-001"])
    assert shown.exit_code == 0, shown.output
    assert "has changed" not in shown.output and "Question" in shown.output
    assert SAMPLE.pairs[0].question.split()[0] in shown.output
