"""Issue 30 item 3: transient failures (429, 5xx, timeouts) are retried until the call's retry time runs out, not
for a fixed number of attempts; each wait is the longer of the provider's delay and the backoff; errors no wait
clears still fail at once. Real HTTP through LiteLLM to tests/loopback.py, with a seeded fault pattern that is
the same whatever order concurrent calls arrive in, and times scaled down (a provider asking to retry in 50 ms
instead of 1 s) so that the tests stay quick. The wait and the attempt cap alone run on a clock of their own."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import tenacity
from click.testing import CliRunner
from loopback import BadMinute, Fault, ProviderServer
from test_gateway_cli import SAMPLE, right_answer

from prbj.cli import main
from prbj.llm import gateway as gateway_module
from prbj.llm.cache import ResponseCache
from prbj.llm.gateway import Gateway, LLMRequest
from prbj.llm.providers import ProviderSpec, resolve_provider
from prbj.llm.retry import BackoffWait, RetryPolicy

KEY = "sk-retries-0123456789abcdef"
# The provider asks to retry in 1 s; here in 50 ms, with the backoff and the retry time scaled down too.
DELAY = 0.05
SCALED = RetryPolicy(max_total_seconds=5.0, initial_wait=0.01, max_wait=0.1)
# For the runs through a bad minute: the waits as short, the retry time long enough that no call runs out of it
# however loaded the machine (an attempt's own time is wall-clock: LiteLLM's first call alone may take seconds).
# The faults end every streak long before; the retry time's own arithmetic is tested on virtual time.
ROOMY = RetryPolicy(max_total_seconds=300.0, initial_wait=0.01, max_wait=0.1)
# What bounded a call before issue 30: six attempts.
OLD_ATTEMPTS = 6


@pytest.fixture(scope="module")
def server():
    with ProviderServer(reply=lambda request: "Thinking.\nResult: A") as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server, monkeypatch):
    server.reset()
    server.reply = lambda request: "Thinking.\nResult: A"
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.delenv("PRBJ_PROVIDERS_DIR", raising=False)


def ask(text: str) -> LLMRequest:
    return LLMRequest.chat("You are terse.", text)


def unlimited(name: str, server: ProviderServer) -> ProviderSpec:
    """A bundled profile without its rate limits: time goes to the faults, not to pacing."""
    spec = resolve_provider(name, api_base=server.url)
    return replace(spec, rpm=None, tpm=None, input_tpm=None, output_tpm=None)


async def _warm(gateway: Gateway, spec: ProviderSpec, server: ProviderServer) -> None:
    """One answered call first: LiteLLM's first call loads its code (a second or more), which would otherwise
    count in the retry time of the call under test."""
    faults_by, server.faults_by = server.faults_by, None
    assert (await gateway.call(spec, ask("warm up"))).ok
    server.faults_by = faults_by


# --- over the wire -----------------------------------------------------------------------------------------------


async def test_a_bad_minute_of_429s_and_500s_loses_no_call(server, tmp_path: Path) -> None:
    """30% of attempts 429 (retry in 50 ms), 10% 500, over 300 calls: every call ends ok, after exactly as many
    attempts as its faults in a row plus one. Seed 5 gives two calls that fail six attempts in a row or more,
    which the old bound of six attempts lost."""
    minute = BadMinute(5, retry_after=DELAY)
    server.faults_by = minute
    spec = unlimited("gpt-5.1", server)
    with Gateway(ResponseCache(tmp_path / "cache"), retry=ROOMY) as gateway:
        results = await asyncio.gather(*[gateway.call(spec, ask(f"question {i}")) for i in range(300)])
    assert [result.status for result in results] == ["ok"] * 300, {r.error for r in results if not r.ok}
    stats = gateway.stats()[0]
    assert stats.errors == 0 and stats.calls_ok == 300
    streaks = {prompt: minute.streak(prompt) for prompt in {request.prompt for request in server.requests}}
    assert len(streaks) == 300
    lost_before = sum(streak >= OLD_ATTEMPTS for streak in streaks.values())
    assert lost_before == 2, "seed 5 no longer tests the old bound"
    # Every call was retried through all of its faults, and not once more.
    assert sorted(result.attempts for result in results) == sorted(streak + 1 for streak in streaks.values())
    assert server.count() == sum(streak + 1 for streak in streaks.values())
    refused = [
        minute.fault(prompt, attempt) for prompt, streak in streaks.items() for attempt in range(streak)
    ]
    assert stats.rate_limited == sum(fault is not None and fault.kind == "429" for fault in refused)


def test_a_judge_run_through_a_bad_minute_ends_with_nothing_failed(
    server, tmp_path: Path, monkeypatch
) -> None:
    """`prbj judge` on the sample's 60 pairs in both orders (120 calls) through a bad minute, the waits scaled
    down and one call made to fail 8 attempts in a row (two more than the old bound let through): nothing failed,
    every judgment right."""
    monkeypatch.setattr(gateway_module, "DEFAULT_RETRY", ROOMY)
    server.reply = right_answer
    server.faults_by = BadMinute(11, retry_after=DELAY)
    # The one call that shows the first pair's chosen answer as A (its other order shows it as B).
    unlucky = "## Answer A\n" + SAMPLE.pairs[0].chosen[:60]
    server.inject(*[Fault("429", retry_after=DELAY, prompt=unlucky)] * 8)
    providers = tmp_path / "providers"
    providers.mkdir()
    # The profile's 500 requests a minute would make pacing, not the faults, the test's length.
    (providers / "flaky.toml").write_text('extends = "gpt-5.1"\nrpm = 1_000_000\ntpm = 1_000_000_000\n')
    command = ["judge", "--no-progress", "-p", "flaky", "--api-base", server.url, "--context", "none",
               "--providers-dir", str(providers), "--order", "both",
               "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out")]  # fmt: skip
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 0, result.output
    assert "failures by cause" not in result.output
    (run_dir,) = (tmp_path / "out").iterdir()
    usage = json.loads((run_dir / "run.json").read_text())["usage"][0]
    assert usage["errors"] == 0 and usage["calls_ok"] == 2 * len(SAMPLE.pairs)
    unlucky_attempts = [request for request in server.requests if unlucky in request.prompt]
    assert len({request.prompt for request in unlucky_attempts}) == 1
    assert len(unlucky_attempts) >= 9  # answered at its ninth attempt at the earliest
    summary = json.loads((run_dir / "summary.json").read_text())["results"]
    assert summary and all(row["accuracy"] == 1.0 for row in summary)


async def test_faults_that_outlast_the_retry_time_fail_the_call_naming_the_cause(server, tmp_path) -> None:
    """Over the wire: the call is retried until its retry time runs out, not for six attempts, and says so. When
    it ends, exactly (at the deadline, or before it by less than the provider's delay): test_virtual_timing, on
    a clock the machine's load cannot stretch. Here the retry time is long enough that a loaded machine's slower
    round trips still leave room for more than six attempts."""
    server.faults_by = lambda request, asked_before: Fault("429", retry_after=DELAY)
    policy = RetryPolicy(max_total_seconds=3.0, initial_wait=0.01, max_wait=0.05)
    spec = unlimited("gpt-5.1", server)
    with Gateway(ResponseCache(tmp_path / "cache"), retry=policy) as gateway:
        await _warm(gateway, spec, server)
        result = await gateway.call(spec, ask("never answered"))
    assert result.status == "api_error" and result.cause == "429 Too Many Requests"
    assert "its retry time (3s) ran out" in (result.error or "")
    assert result.attempts == server.count() - 1 > OLD_ATTEMPTS


async def test_time_queued_behind_prbjs_own_pacing_is_not_retry_time(server, tmp_path) -> None:
    """At 60 requests a minute each retry waits ~1 s for its slot, longer than the whole retry time (0.9 s):
    only the call's own time counts, so it still gets its third attempt, and its answer."""
    policy = RetryPolicy(max_total_seconds=0.9, initial_wait=0.01, max_wait=0.02)
    spec = replace(unlimited("gpt-5.1", server), rpm=60)
    with Gateway(ResponseCache(tmp_path / "cache"), retry=policy) as gateway:
        await _warm(gateway, spec, server)
        server.inject(Fault("429", retry_after=0.01), Fault("500"))
        result = await gateway.call(spec, ask("paced"))
    # Its three attempts took three slots of the rate, 1 s apart (the spacing, exactly: test_virtual_timing),
    # more than the whole retry time: only the call's own time counted.
    assert result.ok and result.attempts == 3 and server.count() == 4


@pytest.mark.parametrize(
    ("asked", "policy"),
    [
        # The provider's delay is the longer: the backoff (at most 20 ms) waits for it.
        (0.4, RetryPolicy(max_total_seconds=10, initial_wait=0.01, max_wait=0.02)),
        # The backoff is the longer: 0.4 s to 0.8 s, never the 10 ms the provider asked for.
        (0.01, RetryPolicy(max_total_seconds=10, initial_wait=0.8, max_wait=0.8)),
    ],
    ids=["provider-delay", "backoff"],
)
async def test_each_wait_is_the_longer_of_the_providers_delay_and_the_backoff(
    server, tmp_path, asked, policy
) -> None:
    server.inject(Fault("429", retry_after=asked), Fault("503", retry_after=asked))
    spec = unlimited("claude-sonnet-4-6", server)
    with Gateway(ResponseCache(tmp_path / "cache"), retry=policy) as gateway:
        result = await gateway.call(spec, ask("wait"))
    assert result.ok and result.attempts == 3 and server.count() == 3
    # The two waits prbj chose, each at least 0.4 s (the departures themselves: test_virtual_timing).
    assert gateway.stats()[0].as_dict()["waits_s"]["retries"] >= 2 * 0.4


@pytest.mark.parametrize("kind", ["400", "401", "404", "insufficient_quota"])
async def test_errors_no_wait_clears_still_fail_at_once(server, tmp_path, kind) -> None:
    server.faults_by = lambda request, asked_before: Fault(kind, retry_after=0)
    spec = unlimited("gpt-5.1", server)
    with Gateway(ResponseCache(tmp_path / "cache"), retry=RetryPolicy()) as gateway:
        result = await gateway.call(spec, ask("no"))
    assert result.status == "api_error" and result.attempts == 1
    assert server.count() == 1 and gateway.stats()[0].as_dict()["waits_s"]["retries"] == 0


# --- the wait and the attempt cap alone, on a clock only the waits move ---------------------------------------


class _ServerError(Exception):
    status_code = 500


class _Lowest(random.Random):
    """Draws the lowest value allowed: the fastest retries the backoff permits."""

    def uniform(self, a: float, b: float) -> float:
        return a


def _retry_for_ever(
    policy: RetryPolicy, rng: random.Random, monkeypatch
) -> tuple[list[float], tenacity.RetryCallState]:
    """Drive the gateway's own retry strategies for a call whose every attempt fails at once with a 500 (no
    delay asked), on a clock that only the waits move: the waits it slept and its state when it gave up."""
    clock = [0.0]
    # tenacity reads the time through its module's `time`: only its own clock is replaced.
    monkeypatch.setattr(tenacity, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    retrying = Gateway(retry=policy)._retrying  # the gateway's own strategies, not a copy of them
    retrying.wait = BackoffWait(policy, rng)
    state = tenacity.RetryCallState(retrying, fn=None, args=(), kwargs={})
    waits: list[float] = []
    error = _ServerError()
    with pytest.raises(tenacity.RetryError):
        while len(waits) < 10_000:
            do = retrying.iter(state)
            if isinstance(do, tenacity.DoAttempt):
                state.set_exception((type(error), error, None))
            else:
                assert isinstance(do, tenacity.DoSleep), do
                waits.append(float(do))
                clock[0] += float(do)
                state.prepare_for_next_attempt()
    return waits, state


@pytest.mark.parametrize(
    "policy",
    [
        RetryPolicy(),
        RetryPolicy(max_total_seconds=30, initial_wait=0.5, max_wait=4),
        SCALED,
    ],
    ids=["defaults", "short", "scaled"],
)
def test_the_attempt_cap_never_binds_before_the_retry_time(policy, monkeypatch) -> None:
    """Every wait the shortest the backoff allows, every attempt failing in no time: the call still ends because
    its retry time ran out, at exactly the cap. So the cap cannot bind first (real waits and attempts take
    longer), and one attempt fewer would."""
    _, state = _retry_for_ever(policy, _Lowest(), monkeypatch)
    assert state.seconds_since_start == pytest.approx(policy.max_total_seconds)
    assert state.attempt_number == policy.attempt_cap()


def test_waits_lie_between_half_and_all_of_the_backoff_and_the_last_ends_at_the_retry_time(
    monkeypatch,
) -> None:
    policy = RetryPolicy()
    assert (policy.initial_wait, policy.max_wait, policy.max_total_seconds) == (1.0, 60.0, 300.0)
    assert policy.attempt_cap() == 16
    waits, state = _retry_for_ever(policy, random.Random(5), monkeypatch)
    ceilings = [min(60.0, 2.0**k) for k in range(len(waits))]
    for wait, ceiling in zip(waits[:-1], ceilings, strict=False):
        assert ceiling / 2 <= wait <= ceiling
    # The last wait is cut to the time left: the last attempt leaves at the deadline, not a backoff past it.
    assert waits[-1] <= ceilings[len(waits) - 1]
    assert sum(waits) == pytest.approx(300.0)
    assert state.attempt_number == len(waits) + 1 < policy.attempt_cap()


def test_a_policy_that_could_retry_without_waiting_is_refused() -> None:
    with pytest.raises(ValueError, match="initial_wait"):
        RetryPolicy(initial_wait=0)
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    assert RetryPolicy(max_attempts=1).attempt_cap() == 1
