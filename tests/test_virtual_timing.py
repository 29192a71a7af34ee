"""Issue 44 item 9: the timing of pacing and retries, on virtual time (tests/virtual_time.py), so that no test of it
depends on the machine's speed. These were checked against the loopback server's arrival stamps and the wall
clock, which a loaded 2-core machine blurs (a late stamp makes a short gap; a slow process an elapsed time past
its bound): here every departure is stamped by the clock prbj itself reads, and a test asserts the arithmetic
exactly. The wire formats the delays come in (Retry-After, Gemini's RetryInfo, OpenAI's reset headers) are the
providers' own, in the error the client raises; the real HTTP round trip stays tested in test_gateway,
test_retries, test_conformance and test_limits, without a clock."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest
from virtual_time import (
    SCRIPTED,
    ScriptedProvider,
    hold_the_loop,
    http_error,
    run_virtually,
    scripted_spec,
)

from prbj.llm.gateway import Gateway, LLMRequest, LLMResult
from prbj.llm.limits import RequestPacer
from prbj.llm.pacing import ProviderPacing
from prbj.llm.providers import ProviderSpec
from prbj.llm.ratelimit_headers import Quota, StatedLimits
from prbj.llm.retry import RetryPolicy

FAST_RETRY = RetryPolicy(max_attempts=20, max_total_seconds=30, initial_wait=0.01, max_wait=0.05)
# Exact up to float rounding: the clock is prbj's own.
EPS = 1e-6


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(name, "virtual-time-key-0123456789")


def ask(text: str) -> LLMRequest:
    return LLMRequest.chat("Be terse.", text)


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


async def calls(
    provider: ScriptedProvider, spec: ProviderSpec, n: int, retry: RetryPolicy = FAST_RETRY, **gateway: object
) -> tuple[list[LLMResult], float, Gateway]:
    gw = Gateway(transports={SCRIPTED: provider}, retry=retry, **gateway)  # type: ignore[arg-type]
    started = time.monotonic()
    results = await asyncio.gather(*[gw.call(spec, ask(f"question {i}")) for i in range(n)])
    return list(results), time.monotonic() - started, gw


# --- pacing --------------------------------------------------------------------------------------------------


def test_requests_leave_at_the_rate_never_faster() -> None:
    provider = ScriptedProvider(latency=0.05)
    results, elapsed, _ = run_virtually(calls(provider, scripted_spec("gemini-3-flash", rpm=600), 12))
    assert all(r.ok for r in results)
    times = provider.times()
    # The first at once, the second up to the pacer's tolerance (50 ms) early, then exactly one per 0.1 s.
    assert gaps(times)[0] == pytest.approx(0.05) and all(g == pytest.approx(0.1) for g in gaps(times)[1:])
    assert max(sum(1 for t in times if start <= t < start + 1.0) for start in times) == 11
    assert elapsed == pytest.approx(1.05 + 0.05)


@pytest.mark.parametrize(
    ("name", "alone"), [("gpt-5.1", True), ("claude-sonnet-4-6", True), ("gemini-3-flash", False)]
)
def test_the_first_request_goes_alone_where_answers_state_limits(name: str, alone: bool) -> None:
    provider = ScriptedProvider(latency=0.3)
    results, _, _ = run_virtually(calls(provider, scripted_spec(name, max_concurrency=8), 6))
    assert all(r.ok for r in results)
    times = provider.times()
    if alone:
        assert times[1] - times[0] == pytest.approx(0.3) and len(set(times[1:])) == 1
    else:
        assert len(set(times)) == 1


def test_requests_in_flight_stay_within_the_ceiling() -> None:
    provider = ScriptedProvider(latency=0.2)
    results, elapsed, _ = run_virtually(
        calls(provider, scripted_spec("gemini-3-flash", max_concurrency=2), 6)
    )
    assert all(r.ok for r in results) and provider.peak_in_flight == 2
    assert elapsed == pytest.approx(0.6)  # three rounds of two


def openai_headers(rpm: int):
    return lambda now: {
        "x-ratelimit-limit-requests": str(rpm),
        "x-ratelimit-remaining-requests": str(rpm - 1),
        "x-ratelimit-reset-requests": "1s",
    }


def test_a_provider_stating_40x_the_profile_is_run_at_its_stated_limit() -> None:
    provider = ScriptedProvider(latency=0.05, headers=openai_headers(2400))
    notices: list[str] = []
    results, elapsed, gw = run_virtually(
        calls(provider, scripted_spec("gpt-5.1", rpm=60), 120, notify=notices.append)
    )
    assert all(r.ok for r in results)
    # The first alone (its answer states the limit), then the pacer's tolerance (50 ms of the rate: a burst of
    # three), then one per 25 ms: 3 s, where the profile's 60 a minute would take two minutes; never faster.
    times = provider.times()
    assert gaps(times)[:3] == pytest.approx([0.05, 0.0, 0.0])
    assert all(g == pytest.approx(0.025) for g in gaps(times)[3:])
    assert max(sum(1 for t in times if start <= t < start + 1.0) for start in times) <= 40 + 3
    assert 2.9 < elapsed < 3.2
    row = gw.stats()[0].as_dict()
    assert row["limits"]["rpm"] == {"value": 2400, "source": "provider headers"}
    assert len(notices) == 1 and notices[0].startswith("gpt-5.1 limits: 2,400 req/min")


def test_a_provider_stating_less_than_the_profile_is_run_at_that() -> None:
    provider = ScriptedProvider(latency=0.02, headers=openai_headers(600))
    results, elapsed, gw = run_virtually(
        calls(provider, scripted_spec("gpt-5.1", rpm=6000), 30, notify=lambda line: None)
    )
    assert all(r.ok for r in results)
    assert all(
        g == pytest.approx(0.1) for g in gaps(provider.times())[2:]
    )  # the stated rate, not the profile's
    assert elapsed >= 2.8
    assert gw.stats()[0].as_dict()["limits"]["rpm"] == {"value": 600, "source": "provider headers"}


def test_a_quota_stated_as_used_up_holds_requests_until_its_reset() -> None:
    async def depart() -> tuple[float, float]:
        pacing = ProviderPacing(ProviderSpec(name="p", model="openai/x", api_key_env=None, rpm=60_000))
        pacing.learn(StatedLimits("openai", requests=Quota(60_000, remaining=0, reset_s=0.2)))
        started = time.monotonic()
        await pacing.depart(0, 10)
        return time.monotonic() - started, pacing.waits["rate"]

    waited, counted = run_virtually(depart())
    assert waited == pytest.approx(0.2) and counted == pytest.approx(0.2)


def test_the_pacer_spaces_requests_follows_a_new_rate_and_holds() -> None:
    async def scenario() -> None:
        pacer = RequestPacer(6000, tolerance=0.0)  # one per 10 ms
        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.gather(*[pacer.wait() for _ in range(21)])
        assert loop.time() - started == pytest.approx(0.2)  # 20 intervals after the first, never a burst
        pacer.set_rpm(1200)  # a provider stated a lower limit: 50 ms from the last departure
        before = loop.time()
        await pacer.wait()
        assert loop.time() - before == pytest.approx(0.05)
        pacer.hold_until(loop.time() + 0.15)  # its quota is used up until its reset
        before = loop.time()
        waited, _ = await pacer.wait()
        assert loop.time() - before == pytest.approx(0.15) and waited == pytest.approx(0.15)
        # A busy event loop lets a request leave after its slot: that lateness is the process's, not the rate's.
        late_one = asyncio.create_task(pacer.wait())
        await asyncio.sleep(0)
        hold_the_loop(0.15)
        waited, late = await late_one
        assert waited == pytest.approx(0.05) and late == pytest.approx(0.10)

    run_virtually(scenario())


def test_a_pacer_short_of_cpu_says_it_did_not_deliver_its_rate() -> None:
    async def queue_of_ten(busy: float) -> float | None:
        pacer = RequestPacer(3000)  # one per 20 ms
        waiters = [asyncio.create_task(pacer.wait()) for _ in range(10)]
        await asyncio.sleep(0.05)
        hold_the_loop(busy)  # the event loop is held: releases come late
        await asyncio.gather(*waiters)
        return pacer.delivered()

    assert (run_virtually(queue_of_ten(0.0)) or 0.0) >= 0.95
    assert (run_virtually(queue_of_ten(0.3)) or 1.0) < 0.9


@pytest.mark.parametrize(
    ("changes", "latency", "bound"),
    [
        ({"rpm": 300}, 0.1, "rate"),
        ({"max_concurrency": 2}, 0.1, "ceiling"),
    ],
    ids=["rpm", "ceiling"],
)
def test_the_run_says_what_bound_it(changes: dict[str, int], latency: float, bound: str) -> None:
    provider = ScriptedProvider(latency=latency)
    results, _, gw = run_virtually(calls(provider, scripted_spec("gemini-3-flash", **changes), 10))
    assert all(r.ok for r in results)
    assert gw.stats()[0].as_dict()["bound_by"] == bound


# --- retries -------------------------------------------------------------------------------------------------


def once(*faults: BaseException):
    """The first attempts of every prompt fail with `faults` in turn; later ones are answered."""
    return lambda prompt, attempt: faults[attempt] if attempt < len(faults) else None


def departures(
    name: str, fault, retry: RetryPolicy = FAST_RETRY, **changes
) -> tuple[LLMResult, list[float], float]:
    provider = ScriptedProvider(latency=0.01, fault=fault)
    (result,), elapsed, _ = run_virtually(calls(provider, scripted_spec(name, **changes), 1, retry))
    return result, provider.times(), elapsed


def test_retry_after_is_honoured() -> None:
    result, times, _ = departures("claude-sonnet-4-6", once(http_error(429, headers={"retry-after": "0.6"})))
    assert result.ok and result.attempts == 2
    assert times[1] - times[0] >= 0.6 + 0.01 - EPS  # its latency, then the 0.6 s asked


@pytest.mark.parametrize("in_body", [True, False], ids=["RetryInfo", "message"])
def test_gemini_429_is_retried_no_sooner_than_its_retry_delay(in_body: bool) -> None:
    details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.6s"}]
    error = {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota exceeded. Please retry in 0.6s."}
    body = {"error": error | {"details": details}} if in_body else {"error": error}
    result, times, _ = departures("gemini-3-flash", once(http_error(429, body=body)))
    assert result.ok and times[1] - times[0] >= 0.6 + 0.01 - EPS


def test_openai_rate_limit_reset_headers_set_the_wait() -> None:
    headers = {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "700ms",
        "x-ratelimit-remaining-tokens": "39000",
        "x-ratelimit-reset-tokens": "20ms",
    }
    result, times, _ = departures("gpt-5.1", once(http_error(429, headers=headers)))
    assert result.ok and times[1] - times[0] >= 0.7 + 0.01 - EPS


def test_a_delay_longer_than_the_calls_retry_time_ends_it_at_once() -> None:
    asked = http_error(429, headers={"retry-after": "53"})
    result, times, elapsed = departures(
        "gemini-3-flash", lambda p, a: asked, RetryPolicy(max_attempts=6, max_total_seconds=30)
    )
    assert len(times) == 1 and elapsed == pytest.approx(0.01)  # no wait at all
    assert result.status == "api_error" and result.cause == "429 Too Many Requests"


def test_faults_that_outlast_the_retry_time_end_the_call_at_its_deadline() -> None:
    delay = 0.05
    policy = RetryPolicy(max_total_seconds=1.0, initial_wait=0.01, max_wait=0.05)
    asked = http_error(429, headers={"retry-after": str(delay)})
    result, times, elapsed = departures("gpt-5.1", lambda p, a: asked, policy)
    assert result.status == "api_error" and result.cause == "429 Too Many Requests"
    assert "its retry time (1s) ran out" in (result.error or "")
    # Retried for the whole retry time and not longer: it ends at the deadline, or just before it when less time
    # is left than the provider asked to wait.
    assert 1.0 - delay - EPS <= elapsed <= 1.0 + 0.01 + EPS
    assert result.attempts == len(times) >= int(1.0 / (delay + 0.01))


def test_total_retry_time_is_bounded() -> None:
    policy = RetryPolicy(max_attempts=50, max_total_seconds=1.0, initial_wait=0.01, max_wait=0.05)
    asked = http_error(429, headers={"retry-after": "0.3"})
    result, times, elapsed = departures("gpt-5.1", lambda p, a: asked, policy)
    assert result.status == "api_error" and elapsed <= 1.0 + EPS and 2 <= len(times) <= 4


def test_time_queued_behind_prbjs_own_pacing_is_not_retry_time() -> None:
    """At 120 requests a minute each retry waits 0.5 s for its slot, longer than the whole retry time (0.3 s):
    only the call's own time counts, so it still gets its third attempt, and its answer."""
    policy = RetryPolicy(max_total_seconds=0.3, initial_wait=0.01, max_wait=0.02)
    fault = once(http_error(429, headers={"retry-after": "0.01"}), http_error(500))
    result, times, _ = departures("gemini-3-flash", fault, policy, rpm=120)
    assert result.ok and result.attempts == 3
    assert times[2] - times[0] >= 2 * 0.5 - 0.05 - EPS  # two slots of the rate, less the pacer's tolerance


@pytest.mark.parametrize(
    ("asked", "policy"),
    [
        (0.4, RetryPolicy(max_total_seconds=10, initial_wait=0.01, max_wait=0.02)),  # the provider's delay
        (0.01, RetryPolicy(max_total_seconds=10, initial_wait=0.8, max_wait=0.8)),  # the backoff: 0.4-0.8 s
    ],
    ids=["provider-delay", "backoff"],
)
def test_each_wait_is_the_longer_of_the_providers_delay_and_the_backoff(
    asked: float, policy: RetryPolicy
) -> None:
    headers = {"retry-after": str(asked)}
    fault = once(http_error(429, headers=headers), http_error(503, headers=headers))
    result, times, _ = departures("claude-sonnet-4-6", fault, policy)
    assert result.ok and result.attempts == 3
    assert min(gaps(times)) >= 0.4 + 0.01 - EPS


@pytest.mark.parametrize("status", [400, 401, 404])
def test_errors_no_wait_clears_fail_at_once(status: int) -> None:
    result, times, elapsed = departures("gpt-5.1", lambda p, a: http_error(status), RetryPolicy())
    assert result.status == "api_error" and result.attempts == 1
    assert len(times) == 1 and elapsed == pytest.approx(0.01)


def test_an_exhausted_quota_fails_at_once() -> None:
    body = {
        "error": {
            "message": "You exceeded your current quota",
            "type": "insufficient_quota",
            "code": "insufficient_quota",
        }
    }
    result, times, elapsed = departures("gpt-5.1", lambda p, a: http_error(429, body=body), RetryPolicy())
    assert result.status == "api_error" and result.cause == "quota exhausted"
    assert len(times) == 1 and elapsed == pytest.approx(0.01)
