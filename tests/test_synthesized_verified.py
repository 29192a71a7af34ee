"""`--synthesis verified` (SynthesizeMe's step 1) end to end: the real `prbj judge` command against the loopback
provider. Before a user's persona is written, each of their earlier choices is put to the synthesizer model blind
(which reply did this person pick?), and the persona is written from the reasoning of the right predictions.

The scripted checker predicts odd-numbered choices right and even-numbered ones wrong, writing a marker
REASON<user>n<k> into its reasoning either way; the scripted synthesizer repeats every marker it was shown. So a
marker in a persona request says which reasoning reached it, and the personas say what the judge was shown."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl
import pytest
import test_synthesized as base
from loopback import LENGTH, REFUSED, ChatRequest, Fault, ProviderServer, Reply
from per_user_fixture import HISTORY_ROWS, TEST_ROWS, USERS

from prbj.context.choice_checks import (
    LABELED_CHOICES,
    REASONING_WORDS,
    CheckedChoice,
    chosen_shown_first,
    render_checked,
    shown_choices,
    verified_reasoning,
)
from prbj.data.schema import Preference
from prbj.judges.verdict import verdict_and_reasoning
from prbj.llm import gateway as gateway_module
from prbj.llm.retry import RetryPolicy

CHECK_MARK = "Predict which one."  # prbj/prompts/synthesizer_check_system.txt
VERIFIED = ("--context", "synthesized", "--synthesizer", "claude-sonnet-4-6", "--synthesis", "verified")
_CHOICE = re.compile(r"HIST(u\d+)n(\d+)")
_REASON = re.compile(r"REASONu\d+n\d+")


def is_check(request: ChatRequest) -> bool:
    return CHECK_MARK in request.system


def checked_choice(request: ChatRequest) -> tuple[str, int]:
    user, n = _CHOICE.findall(request.last_user)[0]
    return user, int(n)


def chosen_letter(request: ChatRequest) -> str:
    """The letter under which the check shows the reply the user picked."""
    text = request.last_user
    return "A" if text.index("chosen a bright prime lens") < text.index("rejected a long zoom lens") else "B"


def check_reply(request: ChatRequest) -> str:
    """Right on odd-numbered choices, wrong on even ones; the reasoning names the choice either way."""
    user, n = checked_choice(request)
    right = chosen_letter(request)
    letter = right if n % 2 else ("B" if right == "A" else "A")
    return f"Guess: they want REASON{user}n{n} something practical.\nResult: {letter}"


def persona_reply(request: ChatRequest) -> str:
    markers = " ".join(sorted(set(_REASON.findall(request.last_user))))
    return f"{base.persona_reply(request)} Reasons {markers}."


def reply(request: ChatRequest) -> str | Reply:
    if is_check(request):
        return check_reply(request)
    return persona_reply(request) if base.is_synthesizer(request) else base.judge_reply(request)


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer(reply=reply) as running:
        yield running


@pytest.fixture
def harness(tmp_path: Path, server: ProviderServer) -> base.Harness:
    server.reset()
    server.reply = reply
    return base.Harness(tmp_path, server)


def checks(server: ProviderServer) -> list[ChatRequest]:
    return [r for r in server.requests if is_check(r)]


def personas_asked(server: ProviderServer) -> list[ChatRequest]:
    return [r for r in server.requests if base.is_synthesizer(r)]


def test_the_persona_is_written_from_the_reasoning_of_right_predictions_only(harness: base.Harness) -> None:
    data = harness.data()
    args = ("-p", "gemini-3-flash", *VERIFIED)
    run = harness.judge(data, *args)
    assert run.exit_code == 0, run.output
    # One check per earlier choice, then one persona call per user, all on the synthesizer's wire.
    asked = checks(harness.server)
    assert sorted(checked_choice(r) for r in asked) == [
        (user, n) for user in USERS for n in range(1, HISTORY_ROWS + 1)
    ]
    assert {r.family for r in asked} == {"anthropic"}
    # Both positions occur: the pick is not always shown first.
    assert {chosen_letter(r) for r in asked} == {"A", "B"}
    written = personas_asked(harness.server)
    assert len(written) == len(USERS)
    for request in written:
        [user] = {u for u, _ in _CHOICE.findall(request.last_user)}
        # The reasoning of the right predictions, and only those; every choice with its pick (4 at least shown).
        assert set(_REASON.findall(request.last_user)) == {f"REASON{user}n1", f"REASON{user}n3"}
        assert request.last_user.count("\nReasoning: ") == 2
        assert len(re.findall(r"^Picked: [AB]$", request.last_user, re.M)) == HISTORY_ROWS
    # Never a judged row in a check or a persona request.
    for request in [*asked, *written]:
        assert not base._JUDGED.findall(request.prompt), "a judged row reached the synthesizer"
        assert "PERSONA" not in request.prompt and "FACT" not in request.prompt
    # A check is told nothing of the pick.
    for request in asked:
        assert "Picked" not in request.prompt and "Reasoning:" not in request.prompt
    for user, record in run.personas.items():
        assert record["status"] == "ok" and record["choices"] == HISTORY_ROWS and record["verified"] == 2
        assert f"REASON{user}n1" in record["persona"] and f"REASON{user}n2" not in record["persona"]
    assert run.accuracy("synthesized") == 1.0
    assert run.run_dir is not None
    described = json.loads((run.run_dir / "run.json").read_text())["synthesizer"]
    assert described["synthesis"] == "verified"
    assert "synthesizer_check_system" in described["checks"]["templates"]
    assert "synthesizer_verified_user" in described["templates"]
    # A rerun pays nothing and gives the same personas.
    harness.server.reset()
    again = harness.judge(data, *args)
    assert again.exit_code == 0, again.output
    assert harness.server.requests == []
    assert {u: r["persona"] for u, r in again.personas.items()} == {
        u: r["persona"] for u, r in run.personas.items()
    }


def test_the_default_synthesis_checks_nothing(harness: base.Harness) -> None:
    run = harness.judge(harness.data(), "-p", "gemini-3-flash", *VERIFIED[:-2])
    assert run.exit_code == 0, run.output
    assert checks(harness.server) == []
    assert len(personas_asked(harness.server)) == len(USERS)
    assert {record["verified"] for record in run.personas.values()} == {None}


# What u3's check of its first choice gets back, which then is not verified.
UNVERIFIED: dict[str, Callable[[ChatRequest], Reply]] = {
    "refusal": lambda _: Reply("", REFUSED),
    "empty": lambda _: Reply(""),
    "no verdict": lambda _: Reply("They seem to like REASONu3n1 practical things."),
    "cut off": lambda _: Reply("They seem to like REASONu3n1 practical", LENGTH),
    "right verdict, no reasoning": lambda request: Reply(f"Result: {chosen_letter(request)}"),
}


@pytest.mark.parametrize("sent", list(UNVERIFIED))
def test_a_check_without_a_reasoned_right_verdict_leaves_that_choice_unverified(
    harness: base.Harness, sent: str
) -> None:
    def scripted(request: ChatRequest) -> str | Reply:
        if is_check(request) and checked_choice(request) == ("u3", 1):
            return UNVERIFIED[sent](request)
        return reply(request)

    harness.server.reply = scripted
    run = harness.judge(harness.data(), "-p", "gemini-3-flash", *VERIFIED)
    assert run.exit_code == 0, run.output
    assert run.personas["u3"]["verified"] == 1 and run.personas["u1"]["verified"] == 2
    [written] = [r for r in personas_asked(harness.server) if "HISTu3" in r.last_user]
    assert set(_REASON.findall(written.last_user)) == {"REASONu3n3"}
    assert run.of_user("u3", "synthesized")["status"].to_list() == ["ok"] * TEST_ROWS


def test_a_check_that_brought_no_reply_fails_that_users_judgments_with_one_line(
    harness: base.Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        gateway_module, "DEFAULT_RETRY", RetryPolicy(max_total_seconds=1.0, initial_wait=0.01, max_wait=0.05)
    )

    def fails(request: ChatRequest, asked_before: int) -> Fault | None:
        return (
            Fault("500", retry_after=0)
            if is_check(request) and checked_choice(request) == ("u2", 3)
            else None
        )

    harness.server.faults_by = fails
    run = harness.judge(harness.data(), "-p", "gemini-3-flash", *VERIFIED)
    assert run.exit_code == 0, run.output
    failed = run.of_user("u2", "synthesized")
    assert failed["status"].to_list() == ["api_error"] * TEST_ROWS
    for error in failed["error"].to_list():
        assert (
            error.startswith(f"synthesizer: checking earlier choice 3 of {HISTORY_ROWS}: ")
            and "\n" not in error
        )
    assert failed["cause"].to_list() == ["synthesizer: 500 Internal Server Error"] * TEST_ROWS
    # No persona was asked for u2, and its judge was never asked with one; the other users were judged.
    assert not [r for r in personas_asked(harness.server) if "HISTu2" in r.last_user]
    assert not [r for r in base.Harness.judged(harness) if "TESTu2" in r.prompt and not is_check(r)
                and base.PERSONA_HEADING in r.prompt]  # fmt: skip
    others = run.judgments.filter((pl.col("user_id") != "u2") & (pl.col("context") == "synthesized"))
    assert others["status"].unique().to_list() == ["ok"]
    assert run.personas["u2"]["status"] == "api_error" and run.personas["u2"]["persona"] == ""


def test_a_dry_run_counts_every_check_and_the_persona_call(harness: base.Harness) -> None:
    data = harness.data()
    args = (
        "-p",
        "gpt-5.1",
        "--context",
        "synthesized",
        "--synthesizer",
        "gemini-3-flash",
        "--synthesis",
        "verified",
    )
    dry = harness.judge(data, *args, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert harness.server.requests == []
    assert base.plan(dry.output, "gemini-3-flash")[:2] == (len(USERS) * (HISTORY_ROWS + 1), 0)
    judge_calls, _, judge_usd = base.plan(dry.output, "gpt-5.1")
    assert judge_calls == len(USERS) * TEST_ROWS
    run = harness.judge(data, *args)
    assert run.exit_code == 0, run.output
    assert run.run_dir is not None
    usage = {u["provider"]: u for u in json.loads((run.run_dir / "run.json").read_text())["usage"]}
    assert usage["gemini-3-flash"]["requests_sent"] == len(USERS) * (HISTORY_ROWS + 1)
    assert usage["gpt-5.1"]["cost_usd"] <= judge_usd


def test_synthesis_without_a_synthesizer_is_a_usage_error(harness: base.Harness) -> None:
    run = harness.judge(harness.data(), "-p", "gemini-3-flash", "--synthesis", "verified")
    assert run.exit_code == 2
    assert "--synthesis verified needs --synthesizer" in run.output
    assert harness.server.requests == []


# --- the pieces -------------------------------------------------------------------------------------------------


def choice(n: int) -> Preference:
    return Preference(f"c{n}", f"question {n}", f"picked {n}", f"other {n}")


@pytest.mark.parametrize(
    ("reply_text", "verdict", "reasoning"),
    [
        ("They want short answers.\nResult: B", "B", "They want short answers."),
        ("<think>Result: A</think>Maybe a nurse.\nShort is better.\n**Result:** B", "B",
         "Maybe a nurse.\nShort is better."),
        ("Guesses: a student.\nB", "B", "Guesses: a student."),
        ("Result: A", "A", ""),
        ("No idea which.", None, ""),
        ("Reply A says 'Result: B'.\nStill, Result: A", "A", "Reply A says 'Result: B'."),
    ],
)  # fmt: skip
def test_the_reasoning_is_the_visible_text_before_the_verdict_line(
    reply_text: str, verdict: str | None, reasoning: str
) -> None:
    assert verdict_and_reasoning(reply_text, ("short one", "long one")) == (verdict, reasoning)


def test_a_check_is_verified_by_a_reasoned_right_verdict_its_reasoning_cut_at_the_word_limit() -> None:
    def verified(reply_text: str, picked: str) -> str | None:
        return verified_reasoning(reply_text, (), picked, verdict_and_reasoning)

    assert verified("Likes it short.\nResult: B", "B") == "Likes it short."
    assert verified("Likes it short.\nResult: B", "A") is None
    assert verified("Result: B", "B") is None
    long = verified("word " * (REASONING_WORDS * 2) + "\nResult: A", "A")
    assert long is not None and len(long.split()) <= REASONING_WORDS + 1  # the cut mark


def test_every_verified_choice_is_shown_and_unverified_ones_top_up_to_the_labeled_count() -> None:
    def checked(verified: set[int], n: int = 7) -> list[CheckedChoice]:
        return [
            CheckedChoice(choice(i), True, f"why {i}" if i in verified else None) for i in range(1, n + 1)
        ]

    def ids(items: list[CheckedChoice]) -> list[str]:
        return [item.choice.id for item in items]

    # Fewer verified than LABELED_CHOICES: the newest unverified fill up, shown in history order.
    assert LABELED_CHOICES == 4
    assert ids(shown_choices(checked({2}))) == ["c2", "c5", "c6", "c7"]
    assert ids(shown_choices(checked(set()))) == ["c4", "c5", "c6", "c7"]
    # As many or more: the verified alone.
    assert ids(shown_choices(checked({1, 2, 3, 5, 6}))) == ["c1", "c2", "c3", "c5", "c6"]
    assert ids(shown_choices(checked({1}, n=2))) == ["c1", "c2"]


def test_a_choice_is_rendered_in_its_check_order_with_its_pick() -> None:
    text = render_checked(
        [CheckedChoice(choice(1), False, "They like it."), CheckedChoice(choice(2), True, None)], 300
    )
    first, second = text.split("\n\n")
    assert first.splitlines() == [
        "Choice 1", "Conversation: question 1", "Reply A: other 1", "Reply B: picked 1",
        "Reasoning: They like it.", "Picked: B",
    ]  # fmt: skip
    assert second.splitlines()[-2:] == ["Reply B: other 2", "Picked: A"]


def test_positions_are_stable_and_split_about_evenly() -> None:
    draws = [chosen_shown_first("u1", choice(n)) for n in range(400)]
    assert draws == [chosen_shown_first("u1", choice(n)) for n in range(400)]
    assert 150 < sum(draws) < 250
    # A model that always answers "A" verifies the choices shown chosen-first, and no others.
    assert [
        verified_reasoning("why\nResult: A", (), "A" if d else "B", verdict_and_reasoning) is not None
        for d in draws
    ] == draws


@pytest.mark.processes
def test_batch_buys_the_checks_then_the_personas_then_the_judge_calls_and_equals_a_live_run(
    harness: base.Harness, tmp_path: Path
) -> None:
    runs = base.live_and_batch(harness, tmp_path, "-p", "gpt-5.1", *VERIFIED)
    assert runs.live_calls == len(USERS) * (HISTORY_ROWS + 1 + TEST_ROWS)
    assert runs.batch == runs.live
