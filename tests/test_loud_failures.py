"""Issue 12 items 1 and 2: a run whose calls fail says why and exits 1; failures retrying cannot fix stop the
provider early (circuit breaker). Real HTTP against the loopback provider; the CLI runs in-process."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from loopback import Fault, ProviderServer

from prbj.cli import main
from prbj.llm.gateway import Gateway, LLMRequest
from prbj.llm.providers import ProviderSpec
from prbj.llm.retry import RetryPolicy

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
    result, elapsed = judge(tmp_path, server.url)
    assert result.exit_code == 1, result.output
    assert elapsed < 10
    assert server.count() <= 5
    assert f"401 Unauthorized ×{PAIRS} (" in result.output
    assert "circuit breaker" in result.output
    assert "had no successful judgment" in result.output
    assert KEY not in result.output


def test_a_closed_port_ends_in_seconds_with_the_cause(tmp_path) -> None:
    result, elapsed = judge(tmp_path, f"http://127.0.0.1:{closed_port()}")
    assert result.exit_code == 1, result.output
    assert elapsed < 10
    assert f"connection failed ×{PAIRS} (" in result.output
    assert "ConnectionRefusedError" in result.output


def test_every_call_a_server_error_exits_1_with_the_cause(server, tmp_path) -> None:
    # Retry-After: 0 keeps the six attempts per call quick; 500s are retried, never a breaker's business.
    server.inject(*[Fault("500", retry_after=0)] * 200)
    result, _ = judge(tmp_path, server.url, "--limit", "1")
    assert result.exit_code == 1, result.output
    assert server.count() == 3 * 6
    assert "500 Internal Server Error ×3: " in result.output


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
        started = time.monotonic()
        result = asyncio.run(gateway.call(spec, LLMRequest.chat(None, "hello")))
    assert result.status == "api_error"
    assert result.attempts == 1
    assert time.monotonic() - started < 5
    assert "not sent by the client" in (result.error or "")
