"""Issue 44 item 7: a provider that answers 5xx to everything held each call for its whole retry time (5 minutes).
A provider that has not answered once in this run and answers a run of 5xx is a dead endpoint: the breaker opens
(one line says so) and the run ends in seconds. A provider that has answered is alive, and a bad minute of its
5xx is still outlasted by the retry time. On virtual time (tests/virtual_time.py), with the default retry policy:
the times asserted are prbj's own arithmetic, whatever the machine's load."""

from __future__ import annotations

import asyncio
import time

import pytest
from virtual_time import SCRIPTED, ScriptedProvider, http_error, run_virtually, scripted_spec

from prbj.llm.breaker import DEAD_SERVER_ERRORS
from prbj.llm.gateway import Gateway, LLMRequest, LLMResult
from prbj.llm.retry import RetryPolicy

CALLS = 200


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-breaker-0123456789abcdef")
    monkeypatch.setenv("GEMINI_API_KEY", "breaker-key")


def ask(i: int) -> LLMRequest:
    return LLMRequest.chat("You are terse.", f"question {i}")


async def _run(
    provider: ScriptedProvider, name: str, notes: list[str]
) -> tuple[list[LLMResult], float, Gateway]:
    gateway = Gateway(transports={SCRIPTED: provider}, retry=RetryPolicy(), notify=notes.append)
    spec = scripted_spec(name)
    started = time.monotonic()
    results = await asyncio.gather(*[gateway.call(spec, ask(i)) for i in range(CALLS)])
    return results, time.monotonic() - started, gateway


@pytest.mark.parametrize("name", ["gpt-5.1", "gemini-3-flash"])  # the first request alone, or all at once
@pytest.mark.parametrize("status", [500, 502, 503, 529])
def test_a_dead_endpoint_ends_the_run_in_seconds(name: str, status: int) -> None:
    provider = ScriptedProvider(latency=0.2, fault=lambda prompt, attempt: http_error(status))
    notes: list[str] = []
    results, elapsed, gateway = run_virtually(_run(provider, name, notes))
    assert all(r.status == "api_error" for r in results)
    assert elapsed < 30  # seconds, where every call used to retry for its 300 s
    # Suspect from the first failure: one request at a time, so the breaker's count and no more, but for those
    # already on the wire (16 in flight where no rate is known and the provider states no limits: Gemini).
    stats = gateway.stats()[0]
    first_wave = (
        1 if name == "gpt-5.1" else 16
    )  # the provider states limits (the first request alone), or not
    assert provider.peak_in_flight == first_wave
    assert len(provider.sent) == max(DEAD_SERVER_ERRORS, first_wave)
    assert stats.not_sent_breaker > 0 and stats.calls_ok == 0
    (line,) = notes
    assert f"opened after {DEAD_SERVER_ERRORS} × HTTP {status} in a row" in line
    assert "has not answered in this run" in line and "\\n" not in line
    stopped = [r for r in results if r.attempts == 0]
    assert stopped and all("circuit breaker" in (r.error or "") for r in stopped)


def test_a_bad_minute_of_a_live_provider_is_outlasted() -> None:
    """Answered once, then 5xx to everything for a minute: every call waits it out and ends ok; no breaker."""
    bad_until: list[float] = []

    def fault(prompt: str, attempt: int) -> BaseException | None:
        now = time.monotonic()
        if not bad_until:
            bad_until.append(now + 60.0)  # the first request is answered; then a minute of 503s
            return None
        return http_error(503) if now < bad_until[0] else None

    provider = ScriptedProvider(latency=0.2, fault=fault)
    notes: list[str] = []
    results, elapsed, gateway = run_virtually(_run(provider, "gpt-5.1", notes))
    assert all(r.ok for r in results), {r.error for r in results if not r.ok}
    assert elapsed >= 60.0 and notes == []
    assert gateway.stats()[0].not_sent_breaker == 0
    # Far more 5xx than the breaker's count, in a row: the provider had answered, so none opened it.
    assert sum(not sent.answered for sent in provider.sent) > 10 * DEAD_SERVER_ERRORS


def test_a_run_of_5xx_broken_by_another_answer_starts_over() -> None:
    """Nine 503s, a 429, nine more 503s: never ten 5xx in a row, so the breaker stays shut; then an answer."""
    script = [503] * 9 + [429] + [503] * 9

    def fault(prompt: str, attempt: int) -> BaseException | None:
        index = len(provider.sent) - 1
        if index >= len(script):
            return None
        return http_error(script[index], headers={"retry-after": "1"} if script[index] == 429 else None)

    provider = ScriptedProvider(latency=0.1, fault=fault)
    notes: list[str] = []
    results, _, gateway = run_virtually(_run(provider, "gpt-5.1", notes))
    assert all(r.ok for r in results) and notes == []
    assert gateway.stats()[0].not_sent_breaker == 0
