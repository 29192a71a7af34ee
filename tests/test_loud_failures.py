"""Issue 12 items 1 and 2: a run whose calls fail says why and exits 1; failures retrying cannot fix stop the
provider early (circuit breaker). Real HTTP against the loopback provider; the CLI runs in-process."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from loopback import Fault, ProviderServer

from prbj.cli import main
from prbj.judges.base import Judgment
from prbj.llm import gateway as gateway_module
from prbj.llm.gateway import Gateway, LLMRequest, LLMResult, stop_sending
from prbj.llm.providers import ProviderSpec
from prbj.llm.retry import RetryPolicy
from prbj.runs.execute import judging_meter
from prbj.runs.progress import JobProgress

KEY = "sk-loud-failures-0123456789abcdef"
PAIRS = 15  # --limit 5 over the sample's three subsets, one call each with --context none


@pytest.fixture(scope="module")
def server():
    with ProviderServer(reply=lambda request: "Thinking.\nResult: A") as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server, monkeypatch):
    server.reset()
    server.reply = lambda request: "Thinking.\nResult: A"
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("PRBJ_PROVIDERS_DIR", raising=False)


def judge(tmp_path: Path, api_base: str, *args: str) -> tuple[Result, float]:
    command = ["judge", "--no-progress", "-p", "gpt-5.1", "--api-base", api_base, "--limit", "5"]
    command += ["--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out"), "--context", "none"]
    started = time.monotonic()
    result = CliRunner().invoke(main, [*command, *args])
    return result, time.monotonic() - started


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_bad_key_stops_the_provider_after_a_handful_and_exits_1(server, tmp_path) -> None:
    server.inject(*["401"] * 100)
    result, _ = judge(tmp_path, server.url)
    assert result.exit_code == 1, result.output
    assert server.count() <= 5  # a handful of requests, not one per pair: the run ends in seconds
    assert f"401 Unauthorized ×{PAIRS} (" in result.output
    assert "circuit breaker" in result.output
    assert "had no successful judgment" in result.output
    assert KEY not in result.output


def test_the_error_that_fails_a_run_is_one_whole_line_at_any_width(server, tmp_path, monkeypatch) -> None:
    # A log is grepped for the error; at 60 columns the judge's name and the message stay on one line.
    monkeypatch.setenv("COLUMNS", "60")
    server.inject(*["401"] * 100)
    result, _ = judge(tmp_path, server.url)
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert lines == [
        f"error: gpt-5.1 (none) had no successful judgment ({PAIRS}/{PAIRS} failed; causes above)"
    ]


def test_a_closed_port_ends_in_seconds_with_the_cause(tmp_path) -> None:
    result, _ = judge(tmp_path, f"http://127.0.0.1:{closed_port()}")
    assert result.exit_code == 1, result.output
    # Five refused connections open the breaker (one at a time once suspect): the run ends in seconds.
    (run_dir,) = (tmp_path / "out").iterdir()
    assert json.loads((run_dir / "run.json").read_text())["usage"][0]["requests_sent"] <= 5
    assert f"connection failed ×{PAIRS} (" in result.output
    assert "ConnectionRefusedError" in result.output


def test_a_server_erroring_from_the_start_is_stopped_by_the_breaker(server, tmp_path, monkeypatch) -> None:
    """A provider that answers 500 to everything and never once answered in this run is a dead endpoint: the
    breaker opens after its run of 5xx (saying so in one line), so the run ends without each call spending its
    retry time. Its requests go one at a time once it looks suspect: exactly the breaker's count reach it."""
    from prbj.llm.breaker import DEAD_SERVER_ERRORS

    monkeypatch.setattr(
        gateway_module, "DEFAULT_RETRY", RetryPolicy(max_total_seconds=60.0, initial_wait=0.01, max_wait=0.05)
    )
    server.faults_by = lambda request, asked_before: Fault("500", retry_after=0)
    result, _ = judge(tmp_path, server.url)
    assert result.exit_code == 1, result.output
    assert server.count() == DEAD_SERVER_ERRORS
    opened = [line for line in result.output.splitlines() if line.startswith("gpt-5.1: the circuit breaker")]
    assert len(opened) == 1 and "has not answered in this run" in opened[0] and "HTTP 500" in opened[0]
    assert f"500 Internal Server Error ×{PAIRS}" in result.output


def test_a_live_server_s_500s_are_retried_until_the_retry_time_runs_out(
    server, tmp_path, monkeypatch
) -> None:
    # A provider that answered in this run is alive: its 500s are retried for the call's whole retry time (scaled
    # down to 1 s here), never a breaker's business.
    monkeypatch.setattr(
        gateway_module, "DEFAULT_RETRY", RetryPolicy(max_total_seconds=1.0, initial_wait=0.01, max_wait=0.05)
    )
    answered: list[str] = []

    def after_one_answer(request, asked_before):
        if not answered:
            answered.append(request.prompt)
            return None
        return None if request.prompt == answered[0] else Fault("500", retry_after=0)

    server.faults_by = after_one_answer
    monkeypatch.setenv("COLUMNS", "400")  # the cause on one line
    result, _ = judge(tmp_path, server.url, "--limit", "1", "--fail-on-error", "0.5")  # 3 pairs
    assert result.exit_code == 1, result.output
    assert "500 Internal Server Error ×2: " in result.output
    assert "its retry time (1s) ran out" in result.output
    assert "circuit breaker" not in result.output
    assert server.count() > 2 * 3  # retried


def test_every_reply_unreadable_exits_1_with_the_cause(server, tmp_path) -> None:
    server.reply = lambda request: "I would rather not say."
    result, _ = judge(tmp_path, server.url)
    assert result.exit_code == 1, result.output
    assert f"parse error ×{PAIRS}: no verdict in reply" in result.output


def test_partial_failure_keeps_the_meaning_of_fail_on_error(server, tmp_path) -> None:
    server.inject("401")  # one bad answer, then the provider works: the breaker must not open
    result, _ = judge(tmp_path, server.url)
    assert result.exit_code == 0, result.output
    assert "401 Unauthorized ×1: " in result.output
    assert server.count() == PAIRS
    server.reset()
    server.inject("401")
    again, _ = judge(tmp_path / "again", server.url, "--fail-on-error", "0.01")
    assert again.exit_code == 1, again.output
    assert "1/15 judgments failed" in again.output


def test_a_request_the_client_refuses_to_send_is_not_retried(monkeypatch) -> None:
    # No key and no api_base: the OpenAI client refuses before anything leaves; LiteLLM calls that a 500.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    spec = ProviderSpec(name="p", model="openai/p", api_key_env=None, paid=False)
    with Gateway(retry=RetryPolicy(initial_wait=5.0)) as gateway:
        result = asyncio.run(gateway.call(spec, LLMRequest.chat(None, "hello")))
    assert result.status == "api_error"
    assert result.attempts == 1 and gateway.stats()[0].as_dict()["waits_s"]["retries"] == 0
    assert "not sent by the client" in (result.error or "")


def _calls_row(output: str, provider: str = "gpt-5.1") -> dict[str, int]:
    """The provider's row of the calls table (drawn whole at the width the test gives)."""
    lines = output.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["provider", "sent"])
    names = ["sent", "retry", "cached", "failed", "not sent"]
    assert all(name in lines[at] for name in names), lines[at]
    row = next(line for line in lines[at:] if line.split()[:1] == [provider]).split()
    return dict(zip(names, map(int, row[1:6]), strict=True))


def _progress_counts(output: str) -> tuple[int, int]:
    last = [line for line in output.splitlines() if line.startswith("judging: ")][-1]
    failed = int(re.search(r"(\d+) failed", last).group(1))  # type: ignore[union-attr]
    unsent = re.search(r"(\d+) not sent", last)
    return failed, int(unsent.group(1)) if unsent else 0


@pytest.mark.parametrize("fault", ["401", "closed port"])
def test_calls_table_causes_and_progress_count_the_same_calls(server, tmp_path, monkeypatch, fault) -> None:
    """Issue 26: after a dead provider the calls table said "sent 5" and the causes "×6 (6 not sent)", and the
    retries counted included retries the breaker never let out. One call per judgment here (--context none),
    so the three views must agree call for call."""
    monkeypatch.setenv("PRBJ_PROGRESS_EVERY", "60")  # only the final progress line
    monkeypatch.setenv("COLUMNS", "400")
    if fault == "401":
        server.inject(*["401"] * 100)
        api_base = server.url
    else:
        api_base = f"http://127.0.0.1:{closed_port()}"
    command = ["judge", "-p", "gpt-5.1", "--api-base", api_base, "--limit", "5", "--context", "none",
               "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out")]  # fmt: skip
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 1, result.output
    calls = _calls_row(result.output)
    assert calls["retry"] <= calls["sent"] and calls["cached"] == 0
    assert calls["failed"] + calls["not sent"] == PAIRS
    assert calls["failed"] >= 1 and calls["not sent"] >= 1
    cause = re.search(r"×(\d+) \((\d+) not sent: circuit breaker opened\)", result.output)
    assert cause is not None, result.output
    assert (int(cause.group(1)), int(cause.group(2))) == (PAIRS, calls["not sent"])
    assert f"not sent: {calls['not sent']} circuit breaker opened" in result.output
    assert _progress_counts(result.output) == (calls["failed"], calls["not sent"])
    if fault == "401":  # 401 is never retried: every request the table counts reached the server
        assert calls["sent"] == server.count() == calls["failed"] and calls["retry"] == 0


def test_calls_stopped_by_ctrl_c_are_not_sent_not_failed(server) -> None:
    """Issue 26: after Ctrl-C the progress line counted calls never sent as "failed"."""
    spec = ProviderSpec(
        name="p", model="openai/p", api_key_env="OPENAI_API_KEY", paid=False, api_base=server.url
    )
    stopping = asyncio.Event()
    stopping.set()

    async def stopped() -> LLMResult:
        token = stop_sending.set(stopping)
        try:
            return await gateway.call(spec, LLMRequest.chat(None, "hello"))
        finally:
            stop_sending.reset(token)

    with Gateway() as gateway:
        result = asyncio.run(stopped())
    stats = gateway.stats()[0]
    assert result.status == "api_error" and (result.error or "").startswith("not sent: interrupted")
    assert (stats.requests_sent, stats.errors, stats.not_sent_interrupted) == (0, 0, 1)
    assert server.count() == 0
    progress = JobProgress("judging", 2, show=False, meter=judging_meter(gateway))
    progress.advance(Judgment("p-1", "s", "j", "none", status="api_error", error=result.error))
    progress.advance(Judgment("p-2", "s", "j", "none", status="api_error", error="could not connect: x"))
    assert "1 failed · 1 not sent" in progress.line()
