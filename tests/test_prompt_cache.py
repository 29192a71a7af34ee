"""Provider prompt caching through the gateway against the loopback: Anthropic gets a cache_control breakpoint
after the shared prefix (only when it is long enough), and the cached-token usage of all three providers is
read through LiteLLM, priced at the cache rates and reported."""

from __future__ import annotations

import asyncio

import pytest
from loopback import ProviderServer

from conftest import make_record
from prbj.data.validate import parse_pair
from prbj.judges.base import PairTask
from prbj.judges.generative import PairwiseLLMJudge, prompt_hash
from prbj.judges.verdict import REPLY_SEPARATOR
from prbj.llm.gateway import Gateway, LLMRequest
from prbj.llm.prompt_cache import cache_rates
from prbj.llm.providers import ProviderSpec

MODELS = {
    "openai": "openai/gpt-5.1-2025-11-13",
    "anthropic": "anthropic/claude-sonnet-4-6",
    "gemini": "gemini/gemini-2.5-flash",
}
SHARED = "profile: " + " ".join(f"post{i} about hiking and tea" for i in range(1200))


@pytest.fixture(scope="module")
def server():
    with ProviderServer(reply=lambda request: "Result: A") as running:
        yield running


def spec(server, family: str) -> ProviderSpec:
    return ProviderSpec(
        name=family, model=MODELS[family], api_key_env=None, api_base=server.url, api_key_required=False,
        input_price=1e-6, output_price=4e-6,
    )  # fmt: skip


def ask_twice(server, family: str) -> Gateway:
    gateway = Gateway()
    provider = spec(server, family)

    async def both() -> None:
        for order in ("A first", "B first"):
            user = f"{SHARED}\n## Question\nWhich?\n## Answers\n{order}"
            request = LLMRequest.chat("You are a judge.", user, shared_prefix_chars=len(SHARED) + 1)
            result = await gateway.call(provider, request)
            assert result.ok, result.error

    asyncio.run(both())
    return gateway


@pytest.mark.parametrize("family", ["openai", "anthropic", "gemini"])
def test_cached_input_tokens_are_read_priced_and_reported(server, family) -> None:
    server.reset()
    server.prefix_cache_min = 1000
    (stats,) = ask_twice(server, family).stats()
    shared_words = len(("You are a judge.\n" + SHARED).split()) if family == "anthropic" else None
    assert stats.cached_input_tokens > 0
    if shared_words is not None:
        assert stats.cached_input_tokens == shared_words
    read, _ = cache_rates(spec(server, family))
    assert read < 1e-6
    # Net of Anthropic's write premium on the first call, the second call's read still saves money.
    assert stats.provider_cache_saved_usd > 0
    full_price = (stats.prompt_tokens * 1e-6) + stats.completion_tokens * 4e-6
    assert stats.cost_usd == pytest.approx(full_price - stats.provider_cache_saved_usd)


def test_anthropic_breakpoint_marks_the_shared_prefix_and_keeps_the_text(server) -> None:
    server.reset()
    ask_twice(server, "anthropic")
    first = server.requests[0].body["messages"][-1]["content"]
    assert first[0]["cache_control"] == {"type": "ephemeral"}
    assert first[0]["text"] + first[1]["text"] == f"{SHARED}\n## Question\nWhich?\n## Answers\nA first"
    assert "cache_control" not in first[1]


def test_a_short_prefix_gets_no_breakpoint(server) -> None:
    server.reset()
    gateway = Gateway()
    request = LLMRequest.chat("judge", "short shared part\nanswers", shared_prefix_chars=18)
    assert asyncio.run(gateway.call(spec(server, "anthropic"), request)).ok
    assert isinstance(server.requests[0].body["messages"][-1]["content"], (str, list))
    content = server.requests[0].body["messages"][-1]["content"]
    assert not any(
        isinstance(b, dict) and b.get("cache_control") for b in (content if isinstance(content, list) else [])
    )


@pytest.mark.parametrize("name", ["pairwise_user", "pointwise_user"])
def test_judge_templates_put_what_pairs_share_first(name) -> None:
    """System, then the user's profile or aspects ({context}), then the question, then the answers: the two
    orders of a pair and the pointwise calls share everything before the first answer."""
    from prbj.prompts import builtin

    text = builtin(name).text
    positions = [text.index(p) for p in ("{context}", "{question}")]
    answers = [text.index(p) for p in ("{Response_A}", "{Response_B}", "{response}") if p in text]
    assert positions == sorted(positions) and max(positions) < min(answers)


def test_the_shared_prefix_ends_where_the_first_answer_starts() -> None:
    from prbj.llm.prompt_cache import shared_prefix_chars

    text = "profile\nquestion\n## Answer A\nfirst\n## Answer B\nsecond"
    assert text[: shared_prefix_chars(text, ("second", "first"))] == "profile\nquestion\n## Answer A\n"
    assert shared_prefix_chars(text, ("absent",)) == 0


@pytest.mark.parametrize("family", ["anthropic", "gemini", "openai"])
def test_a_judge_marks_where_its_answers_start_only_for_anthropic(server, family) -> None:
    """The judge looks for the part both orders of a pair share only where a request carries it (Anthropic's
    breakpoint): there the cached block ends where the first answer starts; other providers' requests go out
    with the prompt whole, and no call (a cached one included) pays for the search."""
    server.reset()
    pair = parse_pair(make_record(1, question=f"{SHARED}\nWhich camera should I buy?"))
    judge = PairwiseLLMJudge(spec(server, family), Gateway(), order="both")
    judgment = asyncio.run(judge.judge(PairTask(pair, "none")))
    assert judgment.status == "ok", judgment.error
    assert len(server.requests) == 2
    if family != "anthropic":
        assert all("cache_control" not in repr(r.body) for r in server.requests)
        return
    first_answers = []
    for request in server.requests:
        first, rest = request.body["messages"][-1]["content"]
        assert first["cache_control"] == {"type": "ephemeral"} and "cache_control" not in rest
        assert "Which camera should I buy?" in first["text"]
        first_answers.append(next(a for a in (pair.chosen, pair.rejected) if rest["text"].startswith(a)))
    assert sorted(first_answers) == sorted([pair.chosen, pair.rejected])


@pytest.mark.parametrize("long_question", [False, True])
def test_the_orders_of_a_pair_wait_for_each_other_only_when_the_second_may_read_the_first(
    server, long_question
) -> None:
    """A shared part too short for any provider's prompt cache (under 1,024 tokens): the two orders go at once.
    One that may be cached: the second waits for the first, which writes the prefix it reads. Either way the
    judgment keeps A's reply and prompt hash first."""
    server.reset()
    server.latency = 0.3
    question = f"{SHARED}\nWhich camera?" if long_question else "Which camera should I buy?"
    pair = parse_pair(make_record(1, question=question))

    def reply(request) -> str:
        user = request.last_user
        return (
            "Result: A (chosen first)" if user.index(pair.chosen) < user.index(pair.rejected) else "Result: B"
        )

    server.reply = reply
    gateway = Gateway()
    try:
        judge = PairwiseLLMJudge(spec(server, "gemini"), gateway, order="both")
        judgment = asyncio.run(judge.judge(PairTask(pair, "none")))
    finally:
        server.latency = 0.0
        server.reply = lambda request: "Result: A"
    assert judgment.status == "ok" and judgment.verdict == "chosen", judgment.error
    # At once, or one after the other: the most prbj had in flight (counted by prbj, not by a clock).
    assert gateway.stats()[0].as_dict()["peak_in_flight"] == (1 if long_question else 2)
    replies = judgment.extra["reply"].split(REPLY_SEPARATOR)
    assert replies == ["Result: A (chosen first)", "Result: B"]
    prompts = {r.last_user: r.system for r in server.requests}
    chosen_first = next(u for u in prompts if u.index(pair.chosen) < u.index(pair.rejected))
    assert judgment.extra["prompt_hash"].split(",")[0] == prompt_hash(prompts[chosen_first], chosen_first)


def test_orders_sent_at_once_meet_a_retry_delay_and_an_empty_reply_each_on_its_own(server) -> None:
    """Both orders in flight together: the first is refused once with Gemini's 429 naming its retry delay in the
    body and then answered, the second comes back empty. The judgment fails for the empty one only, says why,
    and keeps the first order's reply first."""
    from loopback import Fault

    server.reset()
    pair = parse_pair(make_record(1, question="Which camera should I buy?"))

    def reply(request) -> str:
        user = request.last_user
        return "Result: A" if user.index(pair.chosen) < user.index(pair.rejected) else ""

    server.reply = reply
    answer_a_first = f"{pair.chosen}\n"
    server.inject(Fault("429-gemini", retry_after=0.2, prompt=answer_a_first))
    try:
        judge = PairwiseLLMJudge(spec(server, "gemini"), Gateway(), order="both")
        judgment = asyncio.run(judge.judge(PairTask(pair, "none")))
    finally:
        server.reply = lambda request: "Result: A"
    assert len(server.requests) == 3  # the refused attempt, its retry, the other order
    assert judgment.status == "parse_error" and judgment.verdict is None
    assert judgment.error == "no verdict in reply: ''"
    assert judgment.extra["reply"].split(REPLY_SEPARATOR)[0] == "Result: A"
