"""The one call path, over real HTTP: LiteLLM talks to tests/loopback.py on 127.0.0.1 in all three wire formats."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from loopback import Fault, ProviderServer

from prbj.errors import ConfigError
from prbj.llm.budget import Budget
from prbj.llm.cache import ResponseCache
from prbj.llm.gateway import Gateway, LLMRequest
from prbj.llm.limits import AdaptiveConcurrency
from prbj.llm.providers import ProviderSpec, resolve_provider
from prbj.llm.ratelimit_headers import states_limits
from prbj.llm.retry import RetryPolicy

FAST_RETRY = RetryPolicy(max_attempts=5, max_total_seconds=20, initial_wait=0.01, max_wait=0.05)
KEYS = {
    "GEMINI_API_KEY": "gem-CANARY-1",
    "OPENAI_API_KEY": "oai-CANARY-2",
    "ANTHROPIC_API_KEY": "ant-CANARY-3",
}


@pytest.fixture(scope="module")
def server():
    with ProviderServer(reply=lambda r: f"echo: {r.last_user}") as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server: ProviderServer, monkeypatch: pytest.MonkeyPatch):
    server.reset()
    server.latency = 0.0
    server.reply = lambda r: f"echo: {r.last_user}"
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)


def provider(name: str, server: ProviderServer, **changes) -> ProviderSpec:
    return replace(resolve_provider(name, api_base=server.url), **changes)


def gateway(tmp_path: Path, **kwargs) -> Gateway:
    return Gateway(
        ResponseCache(tmp_path / "cache"), kwargs.pop("budget", Budget()), retry=FAST_RETRY, **kwargs
    )


def ask(text: str, **kwargs) -> LLMRequest:
    return LLMRequest.chat("You are terse.", text, **kwargs)


@pytest.mark.parametrize(
    ("name", "path", "header", "key"),
    [
        (
            "gemini-3-flash",
            "/models/gemini-3-flash-preview:generateContent",
            "x-goog-api-key",
            "gem-CANARY-1",
        ),
        ("gpt-5.1", "/chat/completions", "authorization", "Bearer oai-CANARY-2"),
        ("claude-sonnet-4-6", "/v1/messages", "x-api-key", "ant-CANARY-3"),
    ],
)
async def test_each_wire_format_round_trips(server, tmp_path, name, path, header, key) -> None:
    result = await gateway(tmp_path).call(provider(name, server), ask("hello there"))
    assert result.ok and result.text == "echo: hello there"
    assert result.prompt_tokens > 0 and result.completion_tokens == 3
    assert result.cost_usd > 0
    (request,) = server.requests
    assert request.path == path
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert headers[header] == key
    assert request.system == "You are terse."
    if name == "claude-sonnet-4-6":
        assert "anthropic-version" in headers


async def test_retries_recover_from_429_500_and_timeouts(server, tmp_path) -> None:
    server.inject(Fault("429", retry_after=0.05), "500", Fault("hang", seconds=3), "503")
    spec = provider("gpt-5.1", server, timeout=0.5)
    result = await gateway(tmp_path).call(spec, ask("persist"))
    assert result.ok and result.text == "echo: persist"
    assert result.attempts == 5
    assert server.count() == 5


async def test_gives_up_after_the_attempt_bound_with_a_clear_error(server, tmp_path) -> None:
    server.inject(*["500"] * 10)
    gw = Gateway(ResponseCache(tmp_path / "c"), retry=replace(FAST_RETRY, max_attempts=3))
    result = await gw.call(provider("gemini-3-flash", server), ask("doomed"))
    assert result.status == "api_error"
    assert server.count() == 3
    assert "HTTP 500" in (result.error or "") and "after 3 attempts" in (result.error or "")
    assert gw.stats()[0].errors == 1


async def test_total_retry_time_is_bounded(server, tmp_path) -> None:
    server.inject(*[Fault("429", retry_after=0.3)] * 20)
    gw = Gateway(
        ResponseCache(tmp_path / "c"), retry=replace(FAST_RETRY, max_attempts=50, max_total_seconds=1.0)
    )
    result = await gw.call(provider("gpt-5.1", server), ask("slow"))
    assert result.status == "api_error" and "retry time (1s) ran out" in (result.error or "")
    # Bounded by the retry time, not by the 50 attempts allowed (the time itself: test_virtual_timing).
    assert 2 <= server.count() <= 6


async def test_retry_after_is_honoured(server, tmp_path) -> None:
    server.inject(Fault("429", retry_after=0.6))
    gw = gateway(tmp_path)
    result = await gw.call(provider("claude-sonnet-4-6", server), ask("wait"))
    assert result.ok and server.count() == 2
    # The wait prbj chose, read from the header on the wire (when the retry left: test_virtual_timing).
    assert gw.stats()[0].as_dict()["waits_s"]["retries"] >= 0.6


async def test_client_errors_are_not_retried(server, tmp_path) -> None:
    server.inject("401")
    result = await gateway(tmp_path).call(provider("gpt-5.1", server), ask("nope"))
    assert result.status == "api_error"
    assert server.count() == 1


async def test_errors_are_never_cached(server, tmp_path) -> None:
    gw = Gateway(ResponseCache(tmp_path / "c"), retry=replace(FAST_RETRY, max_attempts=1))
    server.inject("500")
    assert (await gw.call(provider("gpt-5.1", server), ask("again"))).status == "api_error"
    second = await gw.call(provider("gpt-5.1", server), ask("again"))
    assert second.ok and not second.cached
    assert server.count() == 2


async def test_cache_turns_a_rerun_into_zero_requests(server, tmp_path) -> None:
    spec = provider("gemini-3-flash", server)
    first_gw = gateway(tmp_path)
    first = [await first_gw.call(spec, ask(f"q{i}")) for i in range(5)]
    assert server.count() == 5
    rerun_gw = gateway(tmp_path)
    again = [await rerun_gw.call(spec, ask(f"q{i}")) for i in range(5)]
    assert server.count() == 5
    assert [r.text for r in again] == [r.text for r in first]
    assert all(r.cached and r.cost_usd == 0 for r in again)
    stats = rerun_gw.stats()[0]
    assert stats.cache_hits == 5 and stats.requests_sent == 0
    assert stats.saved_usd == pytest.approx(sum(r.cost_usd for r in first))


def test_cache_key_covers_what_changes_the_answer_and_nothing_else(server, tmp_path) -> None:
    gw = gateway(tmp_path)
    spec = provider("gpt-5.1", server)
    base = gw.request_key(spec, ask("x"))
    assert gw.request_key(replace(spec, max_concurrency=1, rpm=1, timeout=3), ask("x")) == base
    assert Gateway(None, retry=RetryPolicy(max_attempts=1)).request_key(spec, ask("x")) == base
    changed = [
        gw.request_key(replace(spec, api_base="http://127.0.0.1:1"), ask("x")),
        gw.request_key(replace(spec, model="openai/gpt-5.1"), ask("x")),
        gw.request_key(spec, ask("y")),
        gw.request_key(spec, ask("x", params={"temperature": 0.3})),
        gw.request_key(spec, ask("x", template_hash="other")),
        gw.request_key(spec, ask("x", sample_index=1)),
    ]
    assert base not in changed and len(set(changed)) == len(changed)
    assert "CANARY" not in base


async def test_identical_requests_in_flight_are_bought_once(server, tmp_path) -> None:
    server.latency = 0.2
    gw = gateway(tmp_path)
    spec = provider("gpt-5.1", server)
    results = await asyncio.gather(*[gw.call(spec, ask("same")) for _ in range(4)])
    assert server.count() == 1
    assert {r.text for r in results} == {"echo: same"}
    assert sum(r.cost_usd for r in results) == pytest.approx(results[0].cost_usd + 0)


async def test_rpm_pacing_is_respected_at_the_server(server, tmp_path) -> None:
    """The profile's rate reaches the pacer of a real call path: requests wait for their slots (how far apart they
    leave, exactly: test_virtual_timing, on a clock no load can blur)."""
    spec = provider("gemini-3-flash", server, rpm=600, max_concurrency=8)  # one request per 0.1 s
    gw = gateway(tmp_path)
    results = await asyncio.gather(*[gw.call(spec, ask(f"paced {i}")) for i in range(12)])
    assert all(r.ok for r in results) and server.count() == 12
    row = gw.stats()[0].as_dict()
    assert row["limits"]["rpm"]["value"] == 600
    # The last of the 12 left 1.05 s after the first at the earliest (11 slots of 0.1 s, less the pacer's 50 ms
    # of tolerance): the rate achieved, first request to last answer, is at most 12 in 1.05 s. A loaded machine
    # only lowers it.
    assert row["waits_s"]["rate"] > 0 and row["achieved_rpm"] <= 12 * 60 / 1.05 + 0.5


@pytest.mark.parametrize(
    ("name", "alone"), [("gpt-5.1", True), ("claude-sonnet-4-6", True), ("gemini-3-flash", False)]
)
async def test_the_first_request_waits_for_its_answer_where_answers_state_limits(
    server, tmp_path, name, alone
) -> None:
    """OpenAI and Anthropic state their limits in every reply: the first request goes alone, and the rest leave
    once its answer (and the limits it states) is in. Gemini states none: no round trip is spent waiting."""
    server.latency = 0.3
    spec = provider(name, server, max_concurrency=8, rpm=None, tpm=None)
    gw = gateway(tmp_path)
    results = await asyncio.gather(*[gw.call(spec, ask(f"first {i}")) for i in range(6)])
    assert all(r.ok for r in results) and server.count() == 6
    # Whether the first went alone, by what prbj holds for it; the departures themselves: test_virtual_timing.
    assert states_limits(spec.family) is alone


async def test_concurrency_limit_holds_at_the_server(server, tmp_path) -> None:
    server.latency = 0.2
    spec = provider("gpt-5.1", server, max_concurrency=2, rpm=None)
    gw = gateway(tmp_path)
    await asyncio.gather(*[gw.call(spec, ask(f"conc {i}")) for i in range(6)])
    # Never more than two in flight, as prbj counted them (three rounds of two: test_virtual_timing).
    assert server.count() == 6 and gw.stats()[0].as_dict()["peak_in_flight"] == 2


async def test_sustained_429s_lower_concurrency_but_5xx_do_not() -> None:
    limiter = AdaptiveConcurrency(8, rate_limits_to_shrink=2, successes_to_grow=3)
    for _ in range(3):
        limiter.record_success()
    assert limiter.limit == 8
    limiter.record_rate_limited()
    assert limiter.limit == 8  # one 429 is noise
    limiter.record_rate_limited()
    assert limiter.limit == 4
    limiter.record_rate_limited()
    limiter.record_rate_limited()
    assert limiter.limit == 2
    for _ in range(3):
        limiter.record_success()
    assert limiter.limit == 3


async def test_concurrency_hands_a_freed_slot_to_the_longest_waiter_and_skips_cancelled_ones() -> None:
    limiter = AdaptiveConcurrency(1)
    admitted: list[str] = []
    await limiter.__aenter__()

    async def wait(name: str) -> None:
        async with limiter:
            admitted.append(name)
            await asyncio.sleep(0)

    first, gone, last = (asyncio.create_task(wait(n)) for n in ("first", "gone", "last"))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)
    await limiter.__aexit__()
    await asyncio.gather(first, last)
    assert admitted == ["first", "last"]
    assert limiter.in_flight == 0
    # A limit that grows back admits waiters at once, without a release.
    limiter = AdaptiveConcurrency(2, rate_limits_to_shrink=1, successes_to_grow=1)
    limiter.record_rate_limited()
    assert limiter.limit == 1
    await limiter.__aenter__()
    waiter = asyncio.create_task(limiter.__aenter__())
    await asyncio.sleep(0)
    assert not waiter.done()
    limiter.record_success()
    await asyncio.wait_for(waiter, 1)
    assert limiter.in_flight == 2


async def test_gateway_shrinks_concurrency_on_sustained_429s(server, tmp_path) -> None:
    server.inject(*[Fault("429", retry_after=0.01)] * 4)
    # No rate to size requests in flight by (Little's law): the ceiling is where it starts.
    spec = provider("gpt-5.1", server, max_concurrency=8, rpm=None, tpm=None)
    gw = gateway(tmp_path)
    await gw.call(spec, ask("limited"))
    state = gw._providers[spec.name]
    assert state.pacing.concurrency.limit < 8
    server.inject(*["500"] * 4)
    gw500 = gateway(tmp_path / "other")
    await gw500.call(spec, ask("server trouble"))
    assert gw500._providers[spec.name].pacing.concurrency.limit == 8


def _priced(server: ProviderServer, **changes) -> ProviderSpec:
    # $1 per 1000 output tokens, free input: worst case of one call = max_tokens / 1000 dollars.
    return provider(
        "gpt-5.1", server, input_price=0.0, output_price=0.001, params={"max_tokens": 100}, **changes
    )


async def test_budget_stops_before_the_cap(server, tmp_path) -> None:
    server.reply = lambda r: " ".join(["word"] * 80)  # 80 output tokens = $0.08 per call, worst case $0.10
    gw = gateway(tmp_path, budget=Budget(max_cost=0.35))
    spec = _priced(server, max_concurrency=1)
    results = [await gw.call(spec, ask(f"budget {i}")) for i in range(8)]
    sent = [r for r in results if r.status == "ok"]
    skipped = [r for r in results if r.status == "skipped_budget"]
    # Each call reserves its worst case ($0.10) and settles at $0.08: the fifth would need 0.32 + 0.10 > 0.35.
    assert server.count() == len(sent) == 4
    assert len(skipped) == 4
    assert gw.budget.spent == pytest.approx(0.32)
    assert gw.budget.spent <= 0.35
    # Cached answers cost nothing and need no budget: a rerun with a zero cap still answers what was bought.
    broke = gateway(tmp_path, budget=Budget(max_cost=0.0))
    again = [await broke.call(spec, ask(f"budget {i}")) for i in range(3)]
    assert all(r.ok and r.cached for r in again)
    assert server.count() == 4


async def test_budget_holds_under_concurrency(server, tmp_path) -> None:
    server.latency = 0.05
    server.reply = lambda r: " ".join(["word"] * 100)
    gw = gateway(tmp_path, budget=Budget(max_cost=0.55))
    spec = _priced(server, max_concurrency=8)
    results = await asyncio.gather(*[gw.call(spec, ask(f"par {i}")) for i in range(12)])
    assert sum(r.ok for r in results) == server.count() == 5
    assert gw.budget.spent <= 0.55


async def test_dry_run_sends_nothing_and_counts_the_plan(server, tmp_path) -> None:
    spec = provider("gemini-3-flash", server)
    # Closed, as a run closes it: its answer is stored on the cache's thread, committed by then.
    with gateway(tmp_path) as paid:
        await paid.call(spec, ask("already paid"))
    server.reset()
    gw = gateway(tmp_path, mode="dry_run")
    results = [await gw.call(spec, ask(text)) for text in ("already paid", "new one", "another")]
    assert server.count() == 0
    assert [r.status for r in results] == ["ok", "dry_run", "dry_run"]
    stats = gw.stats()[0]
    assert stats.cache_hits == 1 and stats.planned_calls == 2
    assert stats.planned_completion_tokens == 2 * spec.params["max_tokens"]
    assert stats.planned_cost_usd > 0


async def test_cache_only_sends_nothing(server, tmp_path) -> None:
    gw = gateway(tmp_path, mode="cache_only")
    result = await gw.call(provider("gpt-5.1", server), ask("missing"))
    assert result.status == "skipped_cache"
    assert server.count() == 0


async def test_a_key_quoted_back_by_the_provider_is_masked(server, tmp_path) -> None:
    server.inject("echo-key")
    result = await gateway(tmp_path).call(provider("gpt-5.1", server), ask("leak?"))
    assert result.status == "api_error"
    assert "oai-CANARY-2" not in (result.error or "")
    assert "***" in (result.error or "")


def test_missing_key_names_the_variable(server, monkeypatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY")
    with pytest.raises(ConfigError, match="set the environment variable GEMINI_API_KEY"):
        provider("gemini-3-flash", server).api_key()


def test_an_unpriced_litellm_model_names_the_two_ways_out() -> None:
    """Issue 26: the message said "set [price] ... in --provider", which has no such thing."""
    spec = resolve_provider("litellm:openai/Qwen/Qwen3-8B")
    with pytest.raises(ConfigError) as raised:
        spec.check_priced()
    message = str(raised.value)
    assert "--api-base URL" in message and "--providers-dir" in message and "in --provider " not in message


def test_a_paid_provider_without_a_price_is_a_configuration_error(tmp_path) -> None:
    (tmp_path / "mystery.toml").write_text('model = "openai/mystery-model"\napi_key_env = "OPENAI_API_KEY"\n')
    spec = resolve_provider("mystery", tmp_path)
    with pytest.raises(ConfigError, match="no price known"):
        spec.check_priced()
    (tmp_path / "mystery2.toml").write_text(
        'model = "openai/mystery-model"\n[price]\ninput = "litellm"\noutput = "litellm"\n'
    )
    with pytest.raises(ConfigError, match="price map has no entry"):
        resolve_provider("mystery2", tmp_path)


def test_user_profiles_override_bundled_ones(tmp_path) -> None:
    (tmp_path / "gpt-5.1.toml").write_text(
        'model = "openai/gpt-5.1-2025-11-13"\napi_key_env = "MY_KEY"\nrpm = 7\n[price]\ninput = 1\noutput = 2\n'
    )
    spec = resolve_provider("gpt-5.1", tmp_path)
    assert spec.api_key_env == "MY_KEY" and spec.rpm == 7
    assert spec.input_price == pytest.approx(1e-6) and spec.output_price == pytest.approx(2e-6)
    assert resolve_provider("gemini-3-flash", tmp_path).model == "gemini/gemini-3-flash-preview"


def test_bad_profile_field_is_named(tmp_path) -> None:
    (tmp_path / "bad.toml").write_text('model = "openai/x"\nrpm = -3\n')
    with pytest.raises(ConfigError, match=r"bad.toml: field 'rpm': expected a positive number"):
        resolve_provider("bad", tmp_path)


async def test_the_output_bound_reserved_is_the_bound_sent(server, tmp_path) -> None:
    spec = provider("gpt-5.1", server, params={})  # a profile that sets no max_tokens
    await gateway(tmp_path).call(spec, ask("bounded?"))
    body = server.requests[0].body
    assert (body.get("max_tokens") or body.get("max_completion_tokens")) == 1024


async def test_every_timed_out_attempt_is_charged_its_worst_case(server, tmp_path) -> None:
    server.inject(Fault("hang", seconds=3), Fault("hang", seconds=3))
    gw = gateway(tmp_path, budget=Budget(max_cost=10.0))
    spec = _priced(server, timeout=0.4)  # worst case $0.10 per attempt
    result = await gw.call(spec, ask("slow then fine"))
    assert result.ok and result.attempts == 3
    assert gw.budget.spent == pytest.approx(0.2 + result.cost_usd)
    assert gw.budget.reserved == pytest.approx(0.0)


async def test_a_retry_that_no_longer_fits_the_cap_is_not_sent(server, tmp_path) -> None:
    server.inject(Fault("hang", seconds=3), Fault("hang", seconds=3))
    gw = gateway(tmp_path, budget=Budget(max_cost=0.15))
    result = await gw.call(_priced(server, timeout=0.4), ask("budget-bound retry"))
    assert result.status == "skipped_budget"
    assert server.count() == 1
    assert gw.budget.spent == pytest.approx(0.1)


def test_a_key_straddling_the_message_cut_is_masked_whole() -> None:
    from prbj.llm.error_text import describe_error

    key = "sk-SECRETKEY-1234567890"
    message = describe_error(Exception("x" * 290 + " rejected: " + key), 1, 0.1, secrets=[key])
    assert "SECRETKEY" not in message and "sk-" not in message


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ('model = "openai/x"\nparams = 3\n', "params"),
        ('model = "openai/x"\nprice = 3\n', "price"),
        ('model = "openai/x"\napi_key_env = 5\n', "api_key_env"),
        ('model = "openai/x"\nmax_concurrency = 0.5\n', "max_concurrency"),
        ('model = "openai/x"\n[params]\nmax_tokens = "lots"\n', "params.max_tokens"),
    ],
)
def test_malformed_profile_fields_are_named(tmp_path, content, field) -> None:
    (tmp_path / "bad.toml").write_text(content)
    with pytest.raises(ConfigError, match=rf"bad.toml: field '{field}'"):
        resolve_provider("bad", tmp_path)


async def test_prompt_tokens_are_counted_only_when_a_cap_or_tpm_uses_them(
    server, tmp_path, monkeypatch
) -> None:
    import prbj.llm.gateway as gateway_module

    counted: list[str] = []
    real_count = gateway_module.count_prompt_tokens

    def spy(model: str, messages: list[dict[str, str]]) -> int:
        counted.append(model)
        return real_count(model, messages)

    monkeypatch.setattr(gateway_module, "count_prompt_tokens", spy)
    spec = _priced(server, tpm=None)  # the bundled profile has a TPM limit
    await gateway(tmp_path / "free").call(spec, ask("no cap, no tpm"))
    assert counted == []
    await gateway(tmp_path / "capped", budget=Budget(max_cost=10.0)).call(spec, ask("capped"))
    assert len(counted) == 1
    await gateway(tmp_path / "tpm").call(replace(spec, tpm=1_000_000), ask("tpm window"))
    assert len(counted) == 2


async def test_an_uncapped_timeout_is_still_charged_its_full_worst_case(server, tmp_path) -> None:
    server.inject(Fault("hang", seconds=3))
    # $1 per 1000 tokens in and out: the worst case includes the prompt, counted when the attempt times out.
    spec = provider("gpt-5.1", server, input_price=0.001, output_price=0.001, params={"max_tokens": 100})
    gw = gateway(tmp_path)
    request = ask("slow then fine, no cap")
    result = await gw.call(replace(spec, timeout=0.4), request)
    assert result.ok and result.attempts == 2
    worst_case = gw._estimate(spec, request)[2]
    assert worst_case > 0.1  # the prompt is part of it
    assert gw.budget.spent == pytest.approx(worst_case + result.cost_usd)
    assert gw.stats()[0].cost_usd == pytest.approx(worst_case + result.cost_usd)
