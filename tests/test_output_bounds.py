"""Money: the worst case reserved before a paid call (and the dry run's estimate) uses the largest output bound
actually sent, whatever its name (max_tokens, max_completion_tokens, max_output_tokens, a thinking budget), and
prices a prompt that may be written into Anthropic's prompt cache at the cache-write rate (1.25× input)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from loopback import ProviderServer

from prbj.llm.budget import Budget, CapBelowOneCall
from prbj.llm.gateway import Gateway, LLMRequest
from prbj.llm.params import with_params
from prbj.llm.prompt_cache import cache_rates
from prbj.llm.providers import ProviderSpec, load_profile

BOUNDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
SHARED = "profile: " + " ".join(f"post{i} about hiking and tea" for i in range(1200))


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer(reply=lambda request: "Result: A") as running:
        yield running


def profile(tmp_path: Path, model: str, params: str, server: ProviderServer) -> ProviderSpec:
    path = tmp_path / "bounded.toml"
    path.write_text(
        f'model = "{model}"\napi_key_env = "PRBJ_TEST_KEY"\napi_key_required = false\n'
        f"[price]\ninput = 1\noutput = 10\n[params]\n{params}\n"
    )
    return with_params(load_profile("bounded", path).with_api_base(server.url))


def planned(provider: ProviderSpec, request: LLMRequest) -> tuple[int, int, float]:
    gateway = Gateway(None, Budget(), mode="dry_run")
    asyncio.run(gateway.call(provider, request))
    (stats,) = gateway.stats()
    return stats.planned_prompt_tokens, stats.planned_completion_tokens, stats.planned_cost_usd


@pytest.mark.parametrize(
    ("model", "params", "bound", "sent"),
    [
        ("openai/gpt-5.1-2025-11-13", "max_completion_tokens = 3000", 3000, {"max_completion_tokens": 3000}),
        ("gemini/gemini-2.5-flash", "max_output_tokens = 3000", 3000, {"max_output_tokens": 3000}),
        (
            "anthropic/claude-sonnet-4-6",
            'max_tokens = 4000\nthinking = {type = "enabled", budget_tokens = 3000}',
            4000,
            {"max_tokens": 4000},
        ),
        (
            "openai/gpt-4o",
            "max_tokens = 100\nmax_completion_tokens = 2500",
            2500,
            {"max_tokens": 100, "max_completion_tokens": 2500},
        ),
    ],
)
def test_the_reservation_is_the_largest_output_bound_sent(
    server: ProviderServer, tmp_path: Path, model: str, params: str, bound: int, sent: dict[str, int]
) -> None:
    provider = profile(tmp_path, model, params, server)
    request = LLMRequest.chat(None, "Which answer fits? Result: A or B")
    prompt, completion, cost = planned(provider, request)
    assert completion == bound  # before: 1024, whatever bound the profile set under another name
    assert cost == pytest.approx(prompt * 1e-6 + bound * 10e-6)
    # That bound is what goes out, and no default max_tokens beside it.
    server.reset()
    result = asyncio.run(Gateway(None).call(provider, request))
    assert result.ok, result.error
    (received,) = server.requests
    body = received.body.get("generationConfig", received.body)
    assert {name: body[name] for name in BOUNDS if name in body} == sent


def test_a_prompt_anthropic_may_write_to_its_cache_is_reserved_at_the_write_price(
    server: ProviderServer, tmp_path: Path
) -> None:
    provider = profile(tmp_path, "anthropic/claude-sonnet-4-6", "max_tokens = 100", server)
    _, write = cache_rates(provider)
    assert write == pytest.approx(1.25e-6)  # LiteLLM's rates scaled to the profile's input price
    shared = LLMRequest.chat(
        "You judge.", f"{SHARED}\n## Answers\nA first", shared_prefix_chars=len(SHARED) + 1
    )
    prompt, completion, cost = planned(provider, shared)
    assert cost == pytest.approx(prompt * write + completion * 10e-6)
    # A prompt too short for a breakpoint is never written: the input price.
    short = LLMRequest.chat("You judge.", "profile: tea\n## Answers\nA first", shared_prefix_chars=14)
    prompt, completion, cost = planned(provider, short)
    assert cost == pytest.approx(prompt * 1e-6 + completion * 10e-6)
    # A cap that covers the call at the input price but not at the write price: not sent (and, since the cap
    # cannot pay for this one call, the run is refused before it sends anything: issue 45 item 4).
    server.reset()
    budget = Budget(max_cost=planned(provider, shared)[2] - 1e-6)
    with pytest.raises(CapBelowOneCall, match="below the worst case of one call"):
        asyncio.run(Gateway(None, budget).call(replace(provider), shared))
    assert server.requests == []
