"""Issue 12 item 7: the first Ctrl-C lets the requests already on the wire finish and be cached (a resumed run
does not buy them again), then exits 130; a second Ctrl-C exits at once. Real `prbj` subprocesses, real HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loopback import ProviderServer

KEY = "sk-interrupt-test-0123456789abcdef"


@pytest.fixture(scope="module")
def server():
    with ProviderServer(reply=lambda request: "Thinking.\nResult: A") as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server):
    server.reset()
    server.latency = 0.0


def command(server: ProviderServer, tmp_path: Path, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "prbj", "judge", "--no-progress", "-p", "gpt-5.1", "--api-base", server.url,
        "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out"), "--context", "none", *args,
    ]  # fmt: skip


def env() -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**base, "OPENAI_API_KEY": KEY, "PYTHONUNBUFFERED": "1"}


def wait_for(server: ProviderServer, requests: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while server.count() < requests:
        assert time.monotonic() < deadline, f"only {server.count()} requests arrived"
        time.sleep(0.02)


@pytest.mark.processes
def test_first_ctrl_c_caches_the_answers_on_the_wire(server, tmp_path) -> None:
    server.latency = 2.0
    # At most four requests in flight (the provider's ceiling; --concurrency no longer caps API calls).
    run = command(server, tmp_path, "--limit", "5", "--max-concurrency", "4")
    proc = subprocess.Popen(run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    # The first request goes alone (LiteLLM warms up); then four are on the wire at once.
    wait_for(server, 5)
    time.sleep(0.3)
    on_the_wire = {r.last_user for r in server.requests[1:]}
    assert len(on_the_wire) == 4
    interrupted = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert time.monotonic() - interrupted < 10
    assert "rerun the same command to resume" in stderr
    assert server.count() == 5  # nothing new left after Ctrl-C
    server.reset()
    server.latency = 0.0
    resumed = subprocess.run(run, capture_output=True, text=True, timeout=180, env=env())
    assert resumed.returncode == 0, resumed.stderr
    assert on_the_wire.isdisjoint({r.last_user for r in server.requests})
    assert server.count() == 15 - 5


@pytest.mark.processes
def test_second_ctrl_c_exits_at_once(server, tmp_path) -> None:
    server.latency = 60.0
    proc = subprocess.Popen(
        command(server, tmp_path, "--limit", "1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    wait_for(server, 1)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    assert proc.poll() is None  # still giving the request on the wire its grace period
    pressed = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert time.monotonic() - pressed < 5
