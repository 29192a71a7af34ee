"""`prbj judge` against the loopback provider as a user runs it: real subprocesses, real HTTP, a shared cache."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loopback import ProviderServer

from prbj.data import load_dataset

CANARY = "sk-CANARY-never-write-me-0123456789"
SAMPLE = load_dataset()
CHOSEN = {pair.chosen for pair in SAMPLE.pairs}


def right_answer(request) -> str:
    """Picks whichever shown answer is the chosen one: a judge that is always right."""
    text = request.last_user
    shown_a = text.split("## Answer A\n", 1)[1].split("\n\n## Answer B", 1)[0]
    return "Thinking it over.\nResult: " + ("A" if shown_a in CHOSEN else "B")


@pytest.fixture(scope="module")
def server():
    with ProviderServer(reply=right_answer) as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server):
    server.reset()
    server.latency = 0.0


def prbj(server, tmp_path: Path, *args: str, env_extra: dict | None = None) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "prbj",
        "judge",
        "--no-progress",
        "-p",
        "gpt-5.1",
        "--api-base",
        server.url,
    ]
    command += [
        "--cache-dir",
        str(tmp_path / "cache"),
        "--out",
        str(tmp_path / "out"),
        "--context",
        "none",
        *args,
    ]
    return command


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**base, "OPENAI_API_KEY": CANARY, "PYTHONUNBUFFERED": "1", **extra}


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, capture_output=True, text=True, timeout=180, env=kwargs.pop("env", env()), **kwargs
    )


def latest_run(tmp_path: Path) -> Path:
    return max((tmp_path / "out").iterdir(), key=lambda p: p.stat().st_mtime_ns)


def files_mention(folder: Path, needle: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


@pytest.mark.processes
def test_a_rerun_costs_nothing_and_the_key_is_never_written(server, tmp_path) -> None:
    first = run(prbj(server, tmp_path, "--limit", "2"))
    assert first.returncode == 0, first.stderr
    assert server.count() == 6
    assert "100.0" in first.stdout
    second = run(prbj(server, tmp_path, "--limit", "2"))
    assert second.returncode == 0, second.stderr
    assert server.count() == 6
    assert "Model calls" in second.stdout
    usage = json.loads((latest_run(tmp_path) / "run.json").read_text())["usage"]
    assert [(u["provider"], u["requests_sent"], u["cache_hits"], u["cost_usd"]) for u in usage] == [
        ("gpt-5.1", 0, 6, 0.0)
    ]
    assert usage[0]["saved_usd"] > 0
    for output in (first.stdout, first.stderr, second.stdout, second.stderr):
        assert CANARY not in output
    assert files_mention(tmp_path, CANARY) == []


def test_missing_key_is_one_line_naming_the_variable(server, tmp_path) -> None:
    result = run(prbj(server, tmp_path, "--limit", "1"), env={**env(), "OPENAI_API_KEY": ""})
    assert result.returncode == 2
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "OPENAI_API_KEY" in lines[0]
    assert server.count() == 0


@pytest.mark.processes
def test_dry_run_and_cache_only_send_nothing(server, tmp_path) -> None:
    run(prbj(server, tmp_path, "--limit", "1"))  # buys 3 answers
    server.reset()
    plan = run(prbj(server, tmp_path, "--limit", "2", "--dry-run"))
    assert plan.returncode == 0, plan.stderr
    assert "Plan (nothing sent)" in plan.stdout
    plan_row = next(line for line in plan.stdout.splitlines() if line.startswith("gpt-5.1"))
    assert plan_row.split()[1:3] == ["3", "3"]  # 3 calls needed, 3 already cached
    assert len(list((tmp_path / "out").iterdir())) == 1  # the dry run wrote no run directory
    replay = run(prbj(server, tmp_path, "--limit", "2", "--cache-only"))
    assert replay.returncode == 0, replay.stderr
    assert "3 judgments were not in the cache" in replay.stdout
    assert server.count() == 0


def test_budget_cap_stops_the_run_before_the_cap(server, tmp_path) -> None:
    providers = tmp_path / "providers"
    providers.mkdir()
    # Worst case per call: 50 output tokens at $0.001 = $0.05 (input free); actual replies are ~5 tokens.
    (providers / "gpt-5.1.toml").write_text(
        'model = "openai/gpt-5.1-2025-11-13"\napi_key_env = "OPENAI_API_KEY"\nmax_concurrency = 1\n'
        "[price]\ninput = 0\noutput = 1000\n[params]\nmax_tokens = 50\n"
    )
    result = run(
        prbj(server, tmp_path, "--limit", "5", "--max-cost", "0.08", "--providers-dir", str(providers))
    )
    assert result.returncode == 1, result.stderr  # judgments were skipped for budget
    sent = server.count()
    # Calls wait for pending reservations: the cap fills to $0.035 + $0.05 worst case > $0.08 (7 calls).
    assert sent == 7
    run_dir = latest_run(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    overall = next(r for r in summary["results"] if r["subset"] == "all")
    assert overall["skipped_budget"] == 15 - sent
    usage = json.loads((run_dir / "run.json").read_text())["usage"][0]
    assert usage["cost_usd"] <= 0.08


@pytest.mark.processes
def test_two_processes_share_one_cache(server, tmp_path) -> None:
    server.latency = 0.05
    command = prbj(server, tmp_path, "--limit", "3", "--concurrency", "4")
    procs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert 9 <= server.count() <= 18
    server.reset()
    third = run(command)
    assert third.returncode == 0
    assert server.count() == 0


@pytest.mark.processes
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL])
def test_an_interrupted_run_resumes_without_paying_twice(server, tmp_path, how) -> None:
    server.latency = 0.25
    command = prbj(
        server, tmp_path, "--limit", "5", "--max-concurrency", "2"
    )  # two requests in flight at most
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    deadline = time.monotonic() + 120
    while server.count() < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(how)
    _, stderr = proc.communicate(timeout=60)
    if how == signal.SIGINT:
        assert proc.returncode == 130, stderr
        assert "rerun the same command to resume" in stderr
    answered_before = {r.last_user for r in server.requests}
    before = server.count()
    server.reset()
    server.latency = 0.0
    resumed = run(command)
    assert resumed.returncode == 0, resumed.stderr
    repeated = answered_before & {r.last_user for r in server.requests}
    # Only requests that were still in flight when the run was stopped may be sent again.
    assert len(repeated) <= 2
    assert server.count() == 15 - before + len(repeated)
    assert "100.0" in resumed.stdout
