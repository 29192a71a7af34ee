"""The planner remembers good plans per request, forgets failures, and never mixes up questions sharing an id."""

from __future__ import annotations

from dataclasses import replace

import pytest
from loopback import ProviderServer

from prbj.context.planner import Planner, parse_aspects
from prbj.data.schema import JudgeView, ProfilePost
from prbj.llm.gateway import Gateway
from prbj.llm.providers import resolve_provider
from prbj.llm.retry import RetryPolicy


def view(pair_id: str, question: str) -> JudgeView:
    posts = (
        ProfilePost("p1", "games", "I play chess every evening"),
        ProfilePost("p2", "food", "I bake bread"),
    )
    return JudgeView(pair_id=pair_id, subset="S", question=question, profile=posts, context="profile")


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "planner-test-key")
    with ProviderServer(
        reply=lambda r: f"- aspect for: {r.last_user.rsplit('question', 1)[-1].split()[1]}"
    ) as s:
        yield s


def planner(server: ProviderServer, tmp_path) -> Planner:
    spec = replace(resolve_provider("gpt-5.1", api_base=server.url), rpm=None)
    return Planner(spec, Gateway(None, retry=RetryPolicy(max_attempts=1)))


async def test_a_failed_plan_is_retried_on_the_next_request(server, tmp_path) -> None:
    plan = planner(server, tmp_path)
    server.inject("500")
    first = await plan.aspects(view("7", "How do I open with the queen?"))
    assert not first.ok
    second = await plan.aspects(view("7", "How do I open with the queen?"))
    assert second.ok and server.count() == 2
    again = await plan.aspects(view("7", "How do I open with the queen?"))
    assert again.aspects == second.aspects and server.count() == 2
    assert [o.pair_id for o in plan.outputs()] == ["7"]


async def test_one_id_with_two_questions_gets_two_plans(server, tmp_path) -> None:
    plan = planner(server, tmp_path)
    chess = await plan.aspects(view("7", "Which chess opening suits beginners?"))
    bread = await plan.aspects(view("7", "Why does my bread collapse?"))
    assert chess.aspects != bread.aspects
    assert server.count() == 2


def test_parse_aspects_reads_bullets_or_lines() -> None:
    assert parse_aspects("Intro\n- one: why\n2) two\n* three") == ["one: why", "two", "three"]
    assert parse_aspects("first\n\nsecond") == ["first", "second"]


@pytest.mark.parametrize(
    ("reply", "aspects"),
    [
        ("I cannot tell.", []),
        ("Sorry, there is not enough information in these posts.", []),
        ("Aspects:\n", []),
        ("", []),
        ("<think>- maybe cost</think>\n- **Budget**: cheap\n- Budget: cheap", ["Budget: cheap"]),
        (
            "Here is the list:\n1. Hands-on steps\n2) Cost\n- I am unsure about tone",
            ["Hands-on steps", "Cost"],
        ),
        ("Prefers concise answers", ["Prefers concise answers"]),
    ],
)
def test_parse_aspects_keeps_only_what_describes_the_user(reply: str, aspects: list[str]) -> None:
    assert parse_aspects(reply) == aspects


async def test_a_reply_without_aspects_is_a_planner_error(server, tmp_path) -> None:
    server.reply = lambda r: "I cannot tell."
    out = await planner(server, tmp_path).aspects(view("7", "Which opening?"))
    assert out.aspects == [] and not out.ok and out.status == "planner_error"
