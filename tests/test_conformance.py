"""Issue 22 (items 1, 5, 8): what real providers send back, in each provider's documented shape (tests/loopback.py),
through the real LiteLLM client stack: replies cut at the output cap (often by hidden reasoning), refusals and
blocked prompts, and rate-limit and quota answers that say when (or whether) to retry; and the same replies in
provider batch jobs (LiteLLM's OpenAI batch functions, the Anthropic and Google SDKs), whose create and poll
calls a provider may refuse. docs/providers.md: "Real providers: what prbj does when …"."""

from __future__ import annotations

import json
import zlib
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner, Result
from loopback import LENGTH, REFUSED, Fault, ProviderServer, Reply

from prbj.cli import main
from prbj.data import load_dataset
from prbj.data.schema import Pair
from prbj.judges.generative import MAX_RETRY_SAMPLES
from prbj.llm.cache import ResponseCache
from prbj.llm.gateway import Gateway, LLMRequest, LLMResult
from prbj.llm.providers import ProviderSpec, resolve_provider
from prbj.llm.retry import RetryPolicy, cause_of, is_retryable
from prbj.llm.transport import ChatCall, LiteLLMTransport

FAST_RETRY = RetryPolicy(max_attempts=4, max_total_seconds=20, initial_wait=0.01, max_wait=0.05)
KEYS = {
    "GEMINI_API_KEY": "gem-conformance-1",
    "OPENAI_API_KEY": "oai-conformance-2",
    "ANTHROPIC_API_KEY": "ant-3",
}
PROVIDERS = ("gemini-3-flash", "gpt-5.1", "claude-sonnet-4-6")


@pytest.fixture(scope="module")
def server():
    with ProviderServer() as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server: ProviderServer, monkeypatch: pytest.MonkeyPatch):
    server.reset()
    server.reply = lambda request: "Result: A"
    server.reasoning, server.retired = None, set()
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)


def provider(name: str, server: ProviderServer) -> ProviderSpec:
    return replace(resolve_provider(name, api_base=server.url), max_concurrency=1)


def gateway(tmp_path: Path, retry: RetryPolicy = FAST_RETRY) -> Gateway:
    return Gateway(ResponseCache(tmp_path / "cache"), retry=retry)


def ask(text: str = "Which answer fits?", **params: object) -> LLMRequest:
    return LLMRequest.chat("You are a judge.", text, params=params)


async def twice(tmp_path: Path, spec: ProviderSpec, request: LLMRequest) -> tuple[LLMResult, LLMResult]:
    """The call, then the same call again from a new gateway on the same cache (a rerun)."""
    with gateway(tmp_path) as first:
        bought = await first.call(spec, request)
    with gateway(tmp_path) as second:
        replayed = await second.call(spec, request)
    return bought, replayed


# --- replies cut at the output cap ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", PROVIDERS)
async def test_hidden_reasoning_that_spends_the_cap_is_truncated_paid_and_replayed(
    server, tmp_path, name
) -> None:
    # OpenAI: content "" with reasoning_tokens; Gemini: MAX_TOKENS, content without parts, thoughtsTokenCount;
    # Anthropic: a thinking block and stop_reason max_tokens.
    server.reasoning = 10_000
    bought, replayed = await twice(tmp_path, provider(name, server), ask(max_tokens=64))
    assert bought.status == "truncated" and bought.text == "" and bought.cause == "truncated"
    assert bought.end.reasoning_tokens > 0 and bought.cost_usd > 0
    assert "output cap (max_tokens=64)" in (bought.error or "") and "hidden reasoning" in (bought.error or "")
    assert "raise the cap" in (bought.error or "")
    # Paid for, so cached with its status: the rerun sends nothing and gets the same status and message.
    assert server.count() == 1
    assert replayed.cached and replayed.status == "truncated" and replayed.error == bought.error


@pytest.mark.parametrize("name", PROVIDERS)
async def test_a_reply_cut_at_the_cap_keeps_its_visible_text(server, tmp_path, name) -> None:
    server.reply = lambda request: Reply("I weighed both. Result: B", LENGTH)
    bought, replayed = await twice(tmp_path, provider(name, server), ask())
    assert bought.status == "truncated" and bought.text == "I weighed both. Result: B"
    assert bought.end.reasoning_tokens == 0 and "hidden reasoning" not in (bought.error or "")
    assert replayed.status == "truncated" and replayed.text == bought.text


# --- refusals and blocked prompts --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "reply", "cause"),
    [
        ("gpt-5.1", Reply("", REFUSED), "refused (content_filter)"),
        ("gpt-5.1", Reply("I can't help with that.", REFUSED), "refused (content_filter)"),
        ("claude-sonnet-4-6", Reply("", REFUSED), "refused (refusal)"),
        ("claude-sonnet-4-6", Reply("I won't judge this.", REFUSED), "refused (refusal)"),
        ("gemini-3-flash", Reply("", REFUSED), "refused (SAFETY)"),
        ("gemini-3-flash", Reply("", REFUSED, native="PROHIBITED_CONTENT"), "refused (PROHIBITED_CONTENT)"),
        ("gemini-3-flash", Reply("Result: A", REFUSED, native="RECITATION"), "refused (RECITATION)"),
        ("gemini-3-flash", Reply("", REFUSED, native="BLOCKLIST"), "refused (BLOCKLIST)"),
        ("gemini-3-flash", Reply("", REFUSED, native="OTHER"), "refused (OTHER)"),
        ("gemini-3-flash", Reply(blocked="SAFETY"), "refused (prompt blocked: SAFETY)"),
    ],
)
async def test_refusals_name_the_providers_reason_and_are_replayed(
    server, tmp_path, name, reply, cause
) -> None:
    server.reply = lambda request: reply
    bought, replayed = await twice(tmp_path, provider(name, server), ask())
    assert bought.status == "refused" and bought.cause == cause
    assert cause.removeprefix("refused (").rstrip(")") in (bought.error or "")
    assert server.count() == 1
    assert replayed.cached and (replayed.status, replayed.cause) == ("refused", cause)


# --- retries as the provider asks --------------------------------------------------------------------------------


@pytest.mark.parametrize("retry_info", [True, False], ids=["RetryInfo", "message"])
async def test_gemini_429_is_retried_no_sooner_than_its_retry_delay(server, tmp_path, retry_info) -> None:
    # No Retry-After header: the delay is in error.details[RetryInfo].retryDelay, and in "Please retry in 0.6s".
    server.inject(Fault("429-gemini", retry_after=0.6, retry_info=retry_info))
    with gateway(tmp_path) as calls:
        result = await calls.call(provider("gemini-3-flash", server), ask())
    assert result.ok and result.attempts == 2 and server.count() == 2
    # The wait prbj chose, read from the body on the wire (the departures: test_virtual_timing).
    assert calls.stats()[0].as_dict()["waits_s"]["retries"] >= 0.6


async def test_openai_rate_limit_reset_headers_set_the_wait(server, tmp_path) -> None:
    # No Retry-After: the limit that ran out (remaining 0) says when it resets.
    headers = (
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "700ms"),
        ("x-ratelimit-remaining-tokens", "39000"),
        ("x-ratelimit-reset-tokens", "20ms"),
    )
    server.inject(Fault("429", headers=headers))
    with gateway(tmp_path) as calls:
        result = await calls.call(provider("gpt-5.1", server), ask())
    assert result.ok and server.count() == 2
    assert calls.stats()[0].as_dict()["waits_s"]["retries"] >= 0.7


async def test_a_delay_longer_than_the_calls_retry_time_ends_it_at_once(server, tmp_path) -> None:
    server.inject(Fault("429-gemini", retry_after=53))
    with gateway(tmp_path, RetryPolicy(max_attempts=6, max_total_seconds=30)) as calls:
        result = await calls.call(provider("gemini-3-flash", server), ask())
    assert server.count() == 1 and calls.stats()[0].as_dict()["waits_s"]["retries"] == 0  # no wait at all
    assert result.status == "api_error" and result.cause == "429 Too Many Requests"
    assert "the provider asked to retry in 53s" in (result.error or "")


@pytest.mark.parametrize(
    ("name", "fault"),
    [
        (
            "gemini-3-flash",
            Fault("429-gemini", retry_after=1, quota_id="GenerateRequestsPerDayPerProjectPerModel"),
        ),
        ("gpt-5.1", Fault("insufficient_quota")),
    ],
    ids=["gemini-per-day", "openai-insufficient-quota"],
)
async def test_an_exhausted_quota_is_not_retried_and_stops_the_provider(
    server, tmp_path, name, fault
) -> None:
    server.inject(fault)
    spec = provider(name, server)
    with gateway(tmp_path) as calls:
        first = await calls.call(spec, ask("first"))
        later = [await calls.call(spec, ask(f"later {i}")) for i in range(3)]
    assert server.count() == 1  # not retried, and nothing after it was sent
    assert first.status == "api_error" and first.cause == "quota exhausted" and first.attempts == 1
    for result in later:
        assert result.status == "api_error" and result.cause == "quota exhausted"
        assert "circuit breaker" in (result.error or "") and "quota exhausted" in (result.error or "")


@pytest.mark.parametrize(
    ("name", "fault", "retryable", "cause"),
    [
        (
            "gemini-3-flash",
            Fault("429-gemini", retry_after=1, quota_id="GenerateRequestsPerDayPerProjectPerModel"),
            False,
            "quota exhausted",
        ),
        ("gpt-5.1", Fault("insufficient_quota"), False, "quota exhausted"),
        ("gpt-5.1", Fault("429"), True, "429 Too Many Requests"),
        ("gemini-3-flash", Fault("429-gemini", retry_after=1), True, "429 Too Many Requests"),
    ],
    ids=["gemini-per-day", "openai-insufficient-quota", "openai-429", "gemini-per-minute"],
)
async def test_the_error_a_provider_sends_for_an_exhausted_quota_is_never_retryable(
    server, name, fault, retryable, cause
) -> None:
    """Issue 31 (a mutation the suite let through): with an exhausted quota counted retryable, the breaker
    still stops the retry before it is sent, so only the retry's wait showed it. The classification itself,
    of the very error LiteLLM raises for each provider's answer, says it."""
    spec = provider(name, server)
    server.inject(fault)
    call = ChatCall(spec, [{"role": "user", "content": "Which answer fits?"}], {}, spec.api_key())
    with pytest.raises(Exception) as raised:
        await LiteLLMTransport().send(call)
    assert is_retryable(raised.value) is retryable
    assert cause_of(raised.value) == cause


async def test_anthropic_529_is_overloaded_and_retried(server, tmp_path) -> None:
    spec = provider("claude-sonnet-4-6", server)
    server.inject("529", "529")
    with gateway(tmp_path) as calls:
        assert (await calls.call(spec, ask("once"))).ok
    server.inject(*["529"] * 4)
    with gateway(tmp_path, RetryPolicy(max_attempts=2, initial_wait=0.01, max_wait=0.02)) as calls:
        result = await calls.call(spec, ask("twice"))
    assert result.status == "api_error" and result.cause == "overloaded"
    # The provider's own status, not the 500 LiteLLM reports it as.
    assert "HTTP 529" in (result.error or "") and "HTTP 500" not in (result.error or "")


# --- a judging run against providers that do all of the above ---------------------------------------------------

SAMPLE = load_dataset()
CHOSEN = {pair.chosen for pair in SAMPLE.pairs}
RETIRED = "claude-sonnet-4-6"  # retired by the loopback provider for this test


def pair_of(request) -> Pair:
    return next(p for p in SAMPLE.pairs if p.question in request.last_user)


def kind(pair_id: str) -> str:
    """What the providers do with a pair's prompt: spend the whole cap on hidden reasoning, block it, or answer."""
    return ("reasoning", "blocked", "answer", "answer")[zlib.crc32(pair_id.encode()) % 4]


def right_or_blocked(request) -> str | Reply:
    if kind(pair_of(request).id) == "blocked":
        return Reply(blocked="SAFETY")  # OpenAI and Anthropic answer it as a refusal
    shown_a = request.last_user.split("## Answer A\n", 1)[1].split("\n\n## Answer B", 1)[0]
    return "Weighing both.\nResult: " + ("A" if shown_a in CHOSEN else "B")


def hard_cases(server: ProviderServer) -> None:
    """Script the providers: per pair, all of the cap spent on hidden reasoning, a blocked prompt, or the right
    verdict."""
    server.reply = right_or_blocked
    server.reasoning = lambda request: 100_000 if kind(pair_of(request).id) == "reasoning" else 0


def judge(tmp_path: Path, server: ProviderServer, *args: str, name: str = "run") -> Result:
    """`prbj judge --limit 4` in process, with the cache `cache-<name>` and the run directories in `out-<name>`."""
    command = [
        "judge",
        "--no-progress",
        "--api-base",
        server.url,
        "--cache-dir",
        str(tmp_path / f"cache-{name}"),
    ]
    command += ["--out", str(tmp_path / f"out-{name}"), "--limit", "4", *args]
    return CliRunner().invoke(main, command)


def latest_run(tmp_path: Path, name: str = "run") -> Path:
    return max((tmp_path / f"out-{name}").iterdir(), key=lambda p: p.stat().st_mtime_ns)


def outcomes(run: Path) -> dict[tuple[str, str], tuple[str, str | None]]:
    frame = pl.read_parquet(run / "judgments.parquet")
    return {(j, p): (s, c) for j, p, s, c in frame.select("judge", "pair_id", "status", "cause").iter_rows()}


def test_a_run_against_real_provider_behaviour_counts_each_case_apart(server, tmp_path) -> None:
    hard_cases(server)
    server.retired = {RETIRED}
    server.inject(Fault("429-gemini", retry_after=0.5, family="gemini"))
    providers = ["-p", "gemini-3-flash", "-p", "gpt-5.1", "-p", "claude-sonnet-4-6"]
    result = judge(tmp_path, server, *providers)
    assert result.exit_code == 1, result.output  # the retired model answered nothing
    run = latest_run(tmp_path)
    seen = outcomes(run)
    pairs = {pair_id for _, pair_id in seen}
    kinds = {kind(p) for p in pairs}
    assert kinds == {"reasoning", "blocked", "answer"}, "the sample must hold every case"
    blocked_cause = {
        "gemini-3-flash": "refused (prompt blocked: SAFETY)",
        "gpt-5.1": "refused (content_filter)",
    }
    for judge_name, cause in blocked_cause.items():
        for pair_id in pairs:
            expected = {
                "reasoning": ("truncated", "truncated"),
                "blocked": ("refused", cause),
                "answer": ("ok", None),
            }[kind(pair_id)]
            assert seen[(judge_name, pair_id)] == expected, (judge_name, pair_id)
        assert {seen[("claude-sonnet-4-6", p)] for p in pairs} == {("api_error", "404 Not Found")}
    # Accuracy over the answered pairs only, and exact: the scripted judge is always right.
    summary = json.loads((run / "summary.json").read_text())["results"]
    answered = sum(1 for p in pairs if kind(p) == "answer")
    for row in summary:
        if row["subset"] == "all" and row["judge"] in blocked_cause:
            assert (row["n_ok"], row["accuracy"], row["parse_errors"]) == (answered, 1.0, 0)
    # Gemini's 429 retried once its delay was waited (what prbj chose to wait: run.json).
    gemini = [r for r in server.requests if r.family == "gemini"]
    assert any(r.body == gemini[0].body for r in gemini[1:])
    usage = {row["provider"]: row for row in json.loads((run / "run.json").read_text())["usage"]}
    assert usage["gemini-3-flash"]["waits_s"]["retries"] >= 0.5
    assert "truncated ×" in result.output and "refused (prompt blocked: SAFETY) ×" in result.output
    assert "404 Not Found ×" in result.output

    # A --cache-only rerun sends nothing and reports the same statuses (the retired model's calls were errors,
    # never cached: not in the cache).
    sent = server.count()
    result = judge(tmp_path, server, *providers, "--cache-only")
    assert server.count() == sent
    replayed = outcomes(latest_run(tmp_path))
    for key, outcome in seen.items():
        assert replayed[key] == (outcome if key[0] != "claude-sonnet-4-6" else ("skipped_cache", None))


def test_retry_failed_re_asks_cut_off_and_refused_replies(server, tmp_path) -> None:
    hard_cases(server)
    judge(tmp_path, server, "-p", "gpt-5.1")
    failed = [key for key, (status, _) in outcomes(latest_run(tmp_path)).items() if status != "ok"]
    assert failed
    sent = server.count()
    # A plain rerun replays the paid replies; --retry-failed asks each again with fresh samples.
    judge(tmp_path, server, "-p", "gpt-5.1")
    assert server.count() == sent
    judge(tmp_path, server, "-p", "gpt-5.1", "--retry-failed")
    assert server.count() == sent + len(failed) * MAX_RETRY_SAMPLES
    frame = pl.read_parquet(latest_run(tmp_path) / "judgments.parquet").filter(pl.col("status") != "ok")
    assert frame.height == len(failed) and set(frame["sample_index"]) == {MAX_RETRY_SAMPLES}


def test_repair_never_sends_an_empty_assistant_turn(server, tmp_path) -> None:
    def cut_then_verdict(request) -> str | Reply:
        repairing = any(m["role"] == "assistant" for m in request.messages)
        if repairing:
            return "Result: A"
        # Every other prompt is cut before any visible text; the rest leave some text but no verdict.
        return (
            Reply("", LENGTH, reasoning_tokens=50)
            if zlib.crc32(request.last_user.encode()) % 2
            else Reply("Weighing the first answer against", LENGTH)
        )

    server.reply = cut_then_verdict
    result = judge(tmp_path, server, "-p", "gpt-5.1", "--repair")
    repairs = [r for r in server.requests if any(m["role"] == "assistant" for m in r.messages)]
    statuses = [status for status, _ in outcomes(latest_run(tmp_path)).values()]
    assert repairs and all(
        m["content"].strip() for r in repairs for m in r.messages if m["role"] == "assistant"
    )
    # The replies with text were repaired into a verdict; the empty ones stay truncated, never asked again.
    assert statuses.count("ok") == len(repairs) and statuses.count("truncated") == len(statuses) - len(
        repairs
    )
    assert "truncated ×" in result.output


# --- the same replies in provider batch jobs, and batch calls a provider refuses ---------------------------------

PROFILES = {"openai": "gpt-5.1", "anthropic": "claude-sonnet-4-6", "gemini": "gemini-3-flash"}


def batch_judge(server: ProviderServer, tmp_path: Path, family: str, name: str, *args: str) -> Result:
    return judge(tmp_path, server, "-p", PROFILES[family], "--context", "none", *args, name=name)


def pair_outcomes(tmp_path: Path, name: str) -> dict[str, tuple[str, str | None]]:
    return {pair: outcome for (_, pair), outcome in outcomes(latest_run(tmp_path, name)).items()}


def ledger(tmp_path: Path, name: str) -> list[dict]:
    return [
        json.loads(p.read_text()) for p in sorted((tmp_path / f"cache-{name}" / "batches").glob("*.json"))
    ]


@pytest.mark.parametrize("family", list(PROFILES))
def test_batch_lines_cut_off_or_refused_end_as_the_live_replies(
    server, tmp_path, family, monkeypatch
) -> None:
    monkeypatch.setenv("PRBJ_BATCH_POLL_SECONDS", "0.05")
    hard_cases(server)
    live = batch_judge(server, tmp_path, family, "live")
    bought = batch_judge(server, tmp_path, family, "batch", "--batch")
    assert bought.exit_code == 0, bought.output
    assert server.batches.submitted  # the batch run bought its answers in a job
    expected = pair_outcomes(tmp_path, "live")
    assert live.exit_code == 0 and {kind(p) for p in expected} == {"reasoning", "blocked", "answer"}
    assert pair_outcomes(tmp_path, "batch") == expected
    assert {expected[p][0] for p in expected if kind(p) == "reasoning"} == {"truncated"}
    assert {expected[p][0] for p in expected if kind(p) == "blocked"} == {"refused"}
    # Stored with their status: a --cache-only rerun of the batch-bought cache sends nothing, says the same.
    sent = server.count()
    replay = batch_judge(server, tmp_path, family, "batch", "--cache-only")
    assert replay.exit_code == 0 and server.count() == sent
    assert pair_outcomes(tmp_path, "batch") == expected


@pytest.mark.parametrize("family", list(PROFILES))
@pytest.mark.parametrize(
    ("refusal", "cause", "state"),
    [("bad key at create", "401 Unauthorized", "submitting"), ("server error at poll", "500", "submitted")],
)
def test_a_refused_create_or_poll_is_one_line_and_exit_1(
    server, tmp_path, family, refusal, cause, state, monkeypatch
) -> None:
    monkeypatch.setenv("PRBJ_BATCH_POLL_SECONDS", "0.05")
    if refusal == "bad key at create":
        server.batches.keys = {"the-key-the-provider-knows"}
    else:
        server.batches.refuse = {"poll": 500}
    result = batch_judge(server, tmp_path, family, "run", "--batch")
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert line.startswith("error: --batch: ") and f"({cause}" in line and "nothing is bought twice" in line
    assert not any(key in result.output for key in KEYS.values())
    records = ledger(tmp_path, "run")
    assert [r["state"] for r in records] == [state]
    # The cause fixed, the same command finishes the run: a submitted job is polled, not bought again.
    server.batches.keys, server.batches.refuse = None, {}
    again = batch_judge(server, tmp_path, family, "run", "--batch")
    assert again.exit_code == 0, again.output
    assert server.batches.twice() == []
    assert {status for status, _ in pair_outcomes(tmp_path, "run").values()} == {"ok"}
