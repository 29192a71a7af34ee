"""--batch end to end against the loopback provider's batch APIs: real `prbj` subprocesses, the three wire
formats, the durable ledger across SIGKILL, partial failures and expiry, --no-wait and `prbj batch`."""

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
from test_gateway_cli import right_answer

from prbj.data import load_dataset
from prbj.llm.batch.ledger import Entry, JobRecord, Ledger
from prbj.llm.batch.wire import BatchLine, Limits, split

SAMPLE = load_dataset()
PROFILES = {
    "openai": ("gpt-5.1", "OPENAI_API_KEY"),
    "anthropic": ("claude-sonnet-4-6", "ANTHROPIC_API_KEY"),
    "gemini": ("gemini-3-flash", "GEMINI_API_KEY"),
}


@pytest.fixture(scope="module")
def server():
    with ProviderServer(reply=right_answer) as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server):
    server.reset()


def env() -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    keys = {variable: "sk-test-0123456789abcdef" for _, variable in PROFILES.values()}
    # Wide enough that a line naming a temporary folder is not wrapped (prbj wraps its output at COLUMNS).
    wide = {"COLUMNS": "400"}
    return {**base, **keys, "PYTHONUNBUFFERED": "1", "PRBJ_BATCH_POLL_SECONDS": "0.05", **wide}


def prbj(server, tmp_path: Path, *args: str, family: str = "openai", name: str = "run") -> list[str]:
    profile, _ = PROFILES[family]
    return [
        sys.executable, "-m", "prbj", "judge", "--no-progress", "-p", profile, "--api-base", server.url,
        "--cache-dir", str(tmp_path / f"cache-{name}"), "--out", str(tmp_path / f"out-{name}"),
        "--context", "none", *args,
    ]  # fmt: skip


def run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=240, env=env())


def latest_run(tmp_path: Path, name: str) -> Path:
    return max((tmp_path / f"out-{name}").iterdir(), key=lambda p: p.stat().st_mtime_ns)


def summary(tmp_path: Path, name: str) -> dict:
    document = json.loads((latest_run(tmp_path, name) / "summary.json").read_text())
    return {k: v for k, v in document.items() if k not in ("run_id", "created", "started", "finished")}


def usage(tmp_path: Path, name: str) -> dict:
    return json.loads((latest_run(tmp_path, name) / "run.json").read_text())["usage"][0]


def wait_for(condition, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.processes
@pytest.mark.parametrize("family", ["openai", "anthropic", "gemini"])
def test_batch_answers_equal_a_live_run_at_half_price(server, tmp_path, family) -> None:
    live = run(prbj(server, tmp_path, "--limit", "3", family=family, name="live"))
    assert live.returncode == 0, live.stderr
    live_calls = server.count()
    assert live_calls > 0 and server.batches.submitted == []
    server.reset()
    batch = run(prbj(server, tmp_path, "--limit", "3", "--batch", family=family, name="batch"))
    assert batch.returncode == 0, batch.stderr
    assert server.count() == 0  # no live request
    assert len(server.batches.submitted) == live_calls and server.batches.twice() == []
    assert summary(tmp_path, "batch") == summary(tmp_path, "live")
    spent = usage(tmp_path, "batch")
    assert spent["batch_calls"] == live_calls
    assert spent["cache_hits"] == 0 and spent["requests_sent"] == 0
    assert spent["cost_usd"] == pytest.approx(usage(tmp_path, "live")["cost_usd"] * 0.5)
    assert spent["batch_saved_usd"] == pytest.approx(spent["cost_usd"])
    # The batch-bought answers serve a --cache-only rerun: same cache entries a live call writes.
    server.reset()
    again = run(prbj(server, tmp_path, "--limit", "3", "--cache-only", family=family, name="batch"))
    assert again.returncode == 0, again.stderr
    assert server.count() == 0 and server.batches.submitted == []
    assert summary(tmp_path, "batch") == summary(tmp_path, "live")


@pytest.mark.processes
@pytest.mark.parametrize(
    ("moment", "family"),
    [("submission", "openai"), ("polling", "openai"), ("submission", "anthropic"), ("submission", "gemini")],
)
def test_sigkill_then_restart_never_buys_a_request_twice(server, tmp_path, moment, family) -> None:
    live = run(prbj(server, tmp_path, "--limit", "4", family=family, name="live"))
    assert live.returncode == 0, live.stderr
    server.reset()
    if moment == "submission":
        server.batches.create_delay = 60.0  # the job exists at the provider; its id never reaches prbj
    else:
        server.batches.hold = True
    command = prbj(server, tmp_path, "--limit", "4", "--batch", family=family, name="batch")
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    if moment == "submission":
        wait_for(lambda: server.batches.jobs)
    else:
        wait_for(
            lambda: any(job.polls == 0 and job.state == "running" for job in server.batches.jobs.values())
        )
        time.sleep(0.5)  # some polls
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert len(server.batches.jobs) == 1
    records = list(Ledger(tmp_path / "cache-batch").records())
    assert [r.state for r in records] == (["submitting"] if moment == "submission" else ["submitted"])
    server.batches.create_delay, server.batches.hold = 0.0, False
    resumed = run(command)
    assert resumed.returncode == 0, resumed.stderr
    assert server.batches.twice() == []
    assert len(server.batches.jobs) == 1  # the first job was adopted, not bought again
    assert server.count() == 0
    assert summary(tmp_path, "batch") == summary(tmp_path, "live")
    assert [r.state for r in Ledger(tmp_path / "cache-batch").records()] == ["collected"]


@pytest.mark.processes
def test_failed_and_expired_lines_become_api_errors_and_only_they_are_bought_again(server, tmp_path) -> None:
    server.batches.fail = lambda request: (
        "content policy"
        if "Answer A" in request.last_user and SAMPLE.pairs[0].chosen in request.last_user
        else None
    )
    server.batches.expire_after = 4
    first = run(prbj(server, tmp_path, "--limit", "3", "--batch"))
    assert first.returncode == 0, first.stderr
    frame_errors = _errors(tmp_path)
    assert any("content policy" in e for e in frame_errors)
    assert any("batch_expired" in e for e in frame_errors)
    bought = len(server.batches.submitted)
    server.reset()
    again = run(prbj(server, tmp_path, "--limit", "3", "--batch"))
    assert again.returncode == 0, again.stderr
    failed_before = len(frame_errors)
    assert 0 < len(server.batches.submitted) < bought
    assert failed_before >= 1
    assert _errors(tmp_path) == []


def _errors(tmp_path: Path) -> list[str]:
    import polars as pl

    frame = pl.read_parquet(latest_run(tmp_path, "run") / "judgments.parquet")
    return [e for e in frame.filter(pl.col("status") == "api_error")["error"].to_list() if e]


@pytest.mark.processes
def test_no_wait_submits_and_exits_then_collect_and_rerun(server, tmp_path) -> None:
    server.batches.polls_to_end = 3
    submitted = run(prbj(server, tmp_path, "--limit", "2", "--batch", "--no-wait"))
    assert submitted.returncode == 0, submitted.stderr
    assert "prbj batch collect" in submitted.stderr
    assert not (tmp_path / "out-run").exists() or not any((tmp_path / "out-run").iterdir())
    cache = str(tmp_path / "cache-run")
    status = subprocess.run(
        [sys.executable, "-m", "prbj", "batch", "status", "--cache-dir", cache],
        capture_output=True,
        text=True,
        env=env(),
    )
    assert status.returncode == 0, status.stderr
    assert "batch_" in status.stdout
    collect = subprocess.run(
        [sys.executable, "-m", "prbj", "batch", "collect", "--wait", "--no-progress", "--cache-dir", cache],
        capture_output=True, text=True, env=env(),
    )  # fmt: skip
    assert collect.returncode == 0, collect.stderr
    assert "stored 6 answers" in collect.stdout
    rerun = run(prbj(server, tmp_path, "--limit", "2", "--cache-only"))
    assert rerun.returncode == 0, rerun.stderr
    assert server.count() == 0 and server.batches.twice() == []
    assert "100.0" in rerun.stdout


def test_jobs_are_split_under_request_and_byte_limits() -> None:
    lines = [BatchLine(str(i), None) for i in range(10)]  # type: ignore[arg-type]
    chunks = list(split(lines, Limits(max_requests=4, max_bytes=10**9), lambda line: 1))
    assert [len(c) for c in chunks] == [4, 4, 2]
    chunks = list(split(lines, Limits(max_requests=100, max_bytes=25), lambda line: 10))
    assert [len(c) for c in chunks] == [2, 2, 2, 2, 2]


def test_ledger_records_survive_a_reload(tmp_path) -> None:
    ledger = Ledger(tmp_path)
    record = JobRecord.new(
        "run-1", provider="p", family="openai", model="openai/x", api_base=None, api_key_env=None,
        input_price=0.5, output_price=1.0, live_input_price=1.0, live_output_price=2.0,
        entries=[Entry("llm:abc", "judge")],
    )  # fmt: skip
    ledger.save(record)
    (loaded,) = ledger.records()
    assert loaded == record and loaded.open
    assert not list(tmp_path.glob("batches/*.tmp-*"))


@pytest.mark.processes
def test_dry_run_shows_live_and_batch_cost_side_by_side(server, tmp_path) -> None:
    command = prbj(server, tmp_path, "--limit", "3", "--dry-run", "--batch")
    shown = subprocess.run(
        command, capture_output=True, text=True, timeout=240, env={**env(), "COLUMNS": "200"}
    )
    assert shown.returncode == 0, shown.stderr
    assert server.count() == 0 and server.batches.submitted == []
    header = next(line for line in shown.stdout.splitlines() if "est. USD" in line)
    assert "est. USD batch" in header
    row = next(line for line in shown.stdout.splitlines() if line.strip().startswith("gpt-5.1"))
    live_usd, batch_usd = (float(cell) for cell in row.split()[-2:])
    assert batch_usd == pytest.approx(live_usd / 2, abs=1e-4)


def test_bon_sample_score_evaluate_with_batch_equal_live(tmp_path, monkeypatch) -> None:
    """bon's three steps under --batch (rounds: samples, then LLM RM scores, then gold grades) give the live
    chain's summary, with every request bought once through a batch job and none live."""
    from test_bon_cli import LIMIT, Workspace, reply
    from test_bon_cli import prbj as bon_prbj

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-bon")
    monkeypatch.setenv("GEMINI_API_KEY", "gem-test-bon")
    monkeypatch.setenv("PRBJ_BATCH_POLL_SECONDS", "0.02")

    def chain(ws: Workspace, *batch: str) -> dict:
        out = ws.root / "runs"
        bon_prbj("bon", "sample", "--policy", "openai-compatible", "--n", "2", "--limit", str(LIMIT),
                 "--out", str(out), *ws.cache, *batch)  # fmt: skip
        run = sorted(out.iterdir())[-1]
        bon_prbj("bon", "score", str(run), "-p", "gemini-3-flash", *ws.cache, *batch)
        bon_prbj("bon", "evaluate", str(run), "--gold", "gold", *ws.cache, *batch)
        document = json.loads((run / "summary.json").read_text())
        kept = {k: v for k, v in document.items() if "id" not in k and "time" not in k and "created" not in k}
        return kept

    with ProviderServer(reply=reply) as server:
        (tmp_path / "live").mkdir()
        (tmp_path / "batch").mkdir()
        live = chain(Workspace(server, tmp_path / "live"))
        live_requests = server.count()
        server.reset()
        batched = chain(Workspace(server, tmp_path / "batch"), "--batch")
        assert server.count() == 0
        assert len(server.batches.submitted) == live_requests and server.batches.twice() == []
    assert batched == live and len(json.dumps(live)) > 200, live


@pytest.mark.processes
def test_cancel_then_collect_turns_lines_into_failures_a_rerun_buys_again(server, tmp_path) -> None:
    server.batches.hold = True
    submitted = run(prbj(server, tmp_path, "--limit", "2", "--batch", "--no-wait"))
    assert submitted.returncode == 0, submitted.stderr
    lines = len(server.batches.submitted)
    cache = ["--cache-dir", str(tmp_path / "cache-run")]
    base = [sys.executable, "-m", "prbj", "batch"]
    cancelled = subprocess.run([*base, "cancel", *cache], capture_output=True, text=True, env=env())
    assert cancelled.returncode == 0, cancelled.stderr
    collected = subprocess.run([*base, "collect", *cache], capture_output=True, text=True, env=env())
    assert collected.returncode == 0, collected.stderr
    assert f"stored 0 answers in {tmp_path / 'cache-run'}; {lines} requests failed" in collected.stdout
    server.batches.hold = False
    rerun = run(prbj(server, tmp_path, "--limit", "2", "--batch"))
    assert rerun.returncode == 0, rerun.stderr
    assert len(server.batches.submitted) == 2 * lines
    assert "100.0" in rerun.stdout


def test_batch_prices_are_the_profiles_when_stated_else_half(tmp_path) -> None:
    from prbj.llm.batch.queue import batch_prices
    from prbj.llm.providers import load_profile

    stated = tmp_path / "stated.toml"
    stated.write_text(
        'model = "openai/x"\napi_key_env = "K"\n[price]\ninput = 2\noutput = 8\nbatch_input = 0.8\nbatch_output = 3\n'
    )
    half = tmp_path / "half.toml"
    half.write_text('model = "openai/x"\napi_key_env = "K"\n[price]\ninput = 2\noutput = 8\n')
    assert batch_prices(load_profile("stated", stated)) == pytest.approx((0.8e-6, 3e-6))
    assert batch_prices(load_profile("half", half)) == pytest.approx((1e-6, 4e-6))
