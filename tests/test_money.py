"""Money stays exact: a --max-cost cap is filled whatever the concurrency, and two processes on one cache
buy each answer once. Over real HTTP against tests/loopback.py."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from loopback import Fault, ProviderServer
from test_gateway_cli import env, latest_run, prbj, right_answer, run

from prbj.llm.budget import Budget
from prbj.llm.cache import ResponseCache
from prbj.llm.gateway import Gateway, LLMRequest, LLMResult
from prbj.llm.providers import resolve_provider
from prbj.llm.retry import RetryPolicy

FAST_RETRY = RetryPolicy(max_attempts=3, max_total_seconds=10, initial_wait=0.01, max_wait=0.05)


@pytest.fixture(scope="module")
def server():
    with ProviderServer(reply=right_answer) as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server, monkeypatch: pytest.MonkeyPatch):
    server.reset()
    server.latency = 0.0
    server.reply = right_answer
    monkeypatch.setenv("OPENAI_API_KEY", "oai-money-test-key")


async def _ask(
    server: ProviderServer, tmp_path: Path, budget: Budget, concurrency: int | None, *, calls: int
) -> list[LLMResult]:
    """`calls` questions ("question 0.", "question 1.", …) to gpt-5.1 on the loopback server at $0.001 an output
    token (input free, at most 50 tokens: $0.05 worst case a call), `concurrency` at a time (None: all)."""
    spec = replace(
        resolve_provider("gpt-5.1", api_base=server.url),
        input_price=0.0,
        output_price=0.001,
        params={"max_tokens": 50},
        max_concurrency=concurrency,
    )
    gateway = Gateway(ResponseCache(tmp_path / "cache"), budget, retry=FAST_RETRY)
    semaphore = asyncio.Semaphore(concurrency or calls)

    async def one(i: int) -> LLMResult:
        async with semaphore:
            return await gateway.call(spec, LLMRequest.chat("Be terse.", f"question {i}."))

    try:
        return await asyncio.gather(*[one(i) for i in range(calls)])
    finally:
        gateway.close()


# --- item 4: a cap is filled, not abandoned, at any concurrency ---------------------------------------------
# None: the defaults (requests in flight from the rate limit and latency, every call handed over at once).
@pytest.mark.parametrize("concurrency", [1, 16, None])
async def test_the_cap_is_filled_at_any_concurrency(server, tmp_path, concurrency) -> None:
    server.latency = 0.01
    server.reply = lambda r: " ".join(["word"] * 20)  # $0.02 a call; worst case (50 tokens) $0.05
    budget = Budget(max_cost=1.0)
    results = await _ask(server, tmp_path, budget, concurrency, calls=80)
    sent = sum(r.ok for r in results)
    # Skipped only when exhausted: nothing else fits beside what was spent ($0.96 + $0.05 > $1).
    assert budget.spent >= 0.9 and budget.spent <= 1.0
    assert sent == server.count() == 48
    assert sum(r.status == "skipped_budget" for r in results) == 80 - sent
    assert budget.reserved == pytest.approx(0.0)


@pytest.mark.parametrize("concurrency", [1, 8])
async def test_a_refused_attempt_gives_its_reservation_back_and_costs_nothing(
    server, tmp_path, concurrency
) -> None:
    """Issue 31 (a mutation the suite let through): a 429 is not billed, so the attempt it refused gives its
    worst case back; only the answered retry is paid. Charging the worst case instead would spend $0.05 more
    per call here."""
    server.reply = lambda r: " ".join(["word"] * 5)  # $0.005 a call; worst case (50 tokens) $0.05
    calls = 8
    # Every call's first attempt is refused, in whatever order the calls arrive.
    server.inject(*[Fault("429", prompt=f"question {i}.") for i in range(calls)])
    budget = Budget(max_cost=1.0)
    results = await _ask(server, tmp_path, budget, concurrency, calls=calls)
    assert [r.status for r in results] == ["ok"] * calls, [r.error for r in results]
    assert server.count() == 2 * calls
    assert budget.spent == pytest.approx(calls * 0.005)
    assert budget.reserved == pytest.approx(0.0)


def _capped_profile(tmp_path: Path, concurrency: int | None) -> Path:
    providers = tmp_path / "providers"
    providers.mkdir()
    # Worst case per call: 10 output tokens at $0.001 = $0.01 (input free); the replies are 5 tokens ($0.005).
    ceiling = f"max_concurrency = {concurrency}\n" if concurrency else ""
    (providers / "gpt-5.1.toml").write_text(
        f'model = "openai/gpt-5.1-2025-11-13"\napi_key_env = "OPENAI_API_KEY"\n{ceiling}'
        "[price]\ninput = 0\noutput = 1000\n[params]\nmax_tokens = 10\n"
    )
    return providers


@pytest.mark.processes
@pytest.mark.parametrize("concurrency", [1, 16, None])  # None: the defaults
def test_judge_fills_the_cap_and_says_so(server, tmp_path, concurrency) -> None:
    server.latency = 0.02
    providers = _capped_profile(tmp_path, concurrency)
    fan_out = ["--concurrency", str(concurrency)] if concurrency else []
    result = run(
        prbj(
            server,
            tmp_path,
            "--limit",
            "20",
            "--max-cost",
            "0.1",
            *fan_out,
            "--providers-dir",
            str(providers),
        )
    )
    assert result.returncode == 1, result.stderr
    usage = json.loads((latest_run(tmp_path) / "run.json").read_text())["usage"][0]
    assert 0.09 <= usage["cost_usd"] <= 0.1
    assert usage["requests_sent"] == server.count() == 19
    assert (
        f"budget reached: $0.0950 of $0.1000 spent, {usage['skipped_budget']} calls not sent" in result.stdout
    )


# --- item 6: two processes on one cache buy each answer once -------------------------------------------------
def test_a_lease_is_exclusive_across_cache_instances_and_expires(tmp_path) -> None:
    first, second = ResponseCache(tmp_path / "cache"), ResponseCache(tmp_path / "cache")
    assert first.claim("llm:abc", "one", 0.5)
    assert not second.claim("llm:abc", "two", 0.5)  # held by another
    assert second.leased("llm:abc")
    assert second.claim("llm:other", "two", 0.5)  # leases are per key
    first.renew("llm:abc", "one", 0.8)
    time.sleep(0.6)
    assert not second.claim("llm:abc", "two", 0.5)  # renewed: still held
    time.sleep(0.4)
    assert second.claim("llm:abc", "two", 5)  # a holder that stopped renewing loses it
    first.release("llm:abc", "one")  # not its lease any more: nothing happens
    assert not first.claim("llm:abc", "one", 5)
    second.release("llm:abc", "two")
    assert first.claim("llm:abc", "one", 5)
    # Leases are not answers: listings and stats leave them out.
    assert list(first.keys()) == [] and first.stats().entries == 0
    first.close()
    second.close()


def test_a_lease_left_by_a_killed_process_on_this_machine_is_taken_over_at_once(tmp_path) -> None:
    import socket

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    cache = ResponseCache(tmp_path / "cache")
    host = socket.gethostname()
    assert cache.claim("llm:abc", f"{host}:{dead.pid}:gone", 600)
    assert cache.claim("llm:abc", "survivor", 5)  # no 600 s wait: its holder no longer runs
    assert cache.claim("llm:live", f"{host}:{os.getppid()}:alive", 600)
    assert not cache.claim("llm:live", "other", 5)  # a live holder keeps its lease
    assert cache.claim("llm:far", f"elsewhere:{dead.pid}:x", 600)
    assert not cache.claim("llm:far", "other", 5)  # another machine's process cannot be checked: wait
    cache.close()


@pytest.mark.processes
@pytest.mark.parametrize("fan_out", [("--concurrency", "8"), ()])  # (): the defaults
def test_two_processes_on_one_cache_buy_each_answer_once(server, tmp_path, fan_out) -> None:
    server.latency = 0.1
    command = prbj(server, tmp_path, "--limit", "10", *fan_out)
    procs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert server.count() <= 30 * 1.05  # one run makes 30 calls
    runs = sorted((tmp_path / "out").iterdir())
    summaries = [json.loads((run_dir / "summary.json").read_text())["results"] for run_dir in runs]
    assert len(summaries) == 2 and summaries[0] == summaries[1]


# --- item 10: --retry-failed heals unparseable replies deliberately ------------------------------------------
@pytest.mark.processes
def test_retry_failed_heals_parse_errors_with_a_fresh_sample(server, tmp_path) -> None:
    seen: set[str] = set()

    def garbage_first(request) -> str:
        # The first reply to each prompt has no verdict; asked again, the judge answers properly.
        if request.prompt not in seen:
            seen.add(request.prompt)
            return "I cannot decide."
        return right_answer(request)

    server.reply = garbage_first

    def statuses() -> pl.DataFrame:
        return pl.read_parquet(latest_run(tmp_path) / "judgments.parquet")

    first = run(prbj(server, tmp_path, "--limit", "3"))
    assert first.returncode in (0, 1), first.stderr
    assert set(statuses()["status"]) == {"parse_error"} and server.count() == 9
    plain = run(prbj(server, tmp_path, "--limit", "3"))
    assert set(statuses()["status"]) == {"parse_error"}  # the cached reply is served again
    assert server.count() == 9, plain.stderr
    healed = run(prbj(server, tmp_path, "--limit", "3", "--retry-failed"))
    assert healed.returncode == 0, healed.stderr
    table = statuses()
    assert set(table["status"]) == {"ok"} and table["correct"].all()
    assert set(table["sample_index"]) == {1}
    assert server.count() == 18
    again = run(prbj(server, tmp_path, "--limit", "3", "--retry-failed"))
    assert again.returncode == 0, again.stderr
    assert set(statuses()["status"]) == {"ok"} and server.count() == 18
    assert "acc % over successful judgments only" in again.stdout
