"""`--protocol official` against a folder shaped like the official repository, with prompt files written here
(not the official text): the official A/B stream, the first-`result:` rule, prompts read from the clone, the
official reward-model input, the gold list parse and the served scale."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from loopback import ChatRequest, ProviderServer
from test_generative import Harness, chosen_letter, pair_index, records

from prbj.data.schema import JudgeView, Pair, ProfilePost
from prbj.errors import ConfigError
from prbj.judges.official import (
    OfficialRepo,
    official_aspects,
    official_positions,
    official_posts,
    official_user_turn,
    parse_official_scores,
    parse_official_verdict,
    require_repo,
    to_served_scale,
)
from prbj.judges.verdict import parse_verdict


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


@pytest.fixture
def harness(tmp_path: Path, server: ProviderServer) -> Harness:
    return Harness(tmp_path, server)


TEST_SYSTEM = "TEST-SYSTEM: you compare two answers."
TEST_USER = "TEST-USER Q={question}\n[A] {Response_A}\n[B] {Response_B}\nEnd with Result: A or Result: B."


def official_repo(root: Path) -> Path:
    (root / "prompts").mkdir(parents=True)
    (root / "BoN").mkdir()
    (root / "prompts" / "pairwise_system.txt").write_text(f"\n{TEST_SYSTEM}\n", encoding="utf-8")
    (root / "prompts" / "pairwise_user.txt").write_text(TEST_USER + "\n", encoding="utf-8")
    (root / "prompts" / "evaluation.txt").write_text(
        "TEST-GOLD {question} | {answer} | {aspects}", encoding="utf-8"
    )
    (root / "BoN" / "evaluate.py").write_text(
        'messages = [{"role": "system", "content": "TEST-GOLD-SYSTEM line."}]\n', encoding="utf-8"
    )
    return root


def pairs(subsets: list[str]) -> list[Pair]:
    return [Pair(f"{s}-{i}", s, "q", (), "", (), "c", "r", f"{s}-{i}") for i, s in enumerate(subsets)]


def test_the_ab_stream_is_reseeded_per_subset_and_drawn_in_dataset_order() -> None:
    chosen = pairs(["Art"] * 6 + ["Society"] * 4)
    positions = official_positions(chosen, 42)
    for subset, n in (("Art", 6), ("Society", 4)):
        random.seed(42)  # what the official script does once per subset run
        expected = ["A" if random.random() < 0.5 else "B" for _ in range(n)]
        assert [positions[p.id] for p in chosen if p.category == subset] == expected


@pytest.mark.parametrize(
    ("reply", "official", "prbj"),
    [
        ("Result: A ... on reflection, Result: B", "A", "B"),  # first vs last
        ('<think>Result: B</think>**Result:** "b"', "B", "B"),
        ("no verdict at all", None, None),  # never read as "A"
        ("Result: maybe", None, None),
    ],
)
def test_the_official_rule_reads_the_first_result(reply: str, official: str | None, prbj: str | None) -> None:
    assert parse_official_verdict(reply) == official
    assert parse_verdict(reply) == prbj


def test_a_missing_prompt_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"prompts/pairwise_user\.txt is missing"):
        OfficialRepo(tmp_path).text("prompts/pairwise_user.txt")
    with pytest.raises(ConfigError, match="--official-repo"):
        require_repo(None, "official")
    assert require_repo(None, "prbj") is None


def test_official_judge_run_uses_the_repo_prompts_the_official_stream_and_the_first_result(
    harness: Harness, server: ProviderServer, tmp_path: Path
) -> None:
    repo = official_repo(tmp_path / "official")
    recs = records(9)

    def reply(request: ChatRequest) -> str:
        letter = chosen_letter(request)
        wrong = "B" if letter == "A" else "A"
        # The first result is right, a later one wrong: the official rule is right on every pair.
        return f"Result: {letter}\nSecond thoughts. Result: {wrong}"

    server.reply = reply
    dataset = harness.dataset(recs)
    run = harness.judge(dataset, "--protocol", "official", "--official-repo", str(repo))
    assert run.exit_code == 0, run.output
    assert run.overall("gemini-3-flash", "none")["accuracy"] == 1.0
    for request in server.requests:
        assert TEST_SYSTEM in request.prompt and "TEST-USER Q=" in request.prompt
    # The A/B positions are the official stream: reseeded per subset, in dataset order.
    expected: dict[int, str] = {}
    for subset in sorted({r["category"] for r in recs}):
        stream = random.Random(42)
        for r in (r for r in recs if r["category"] == subset):
            expected[int(r["chosen"].split(":")[0].split("-")[1])] = "A" if stream.random() < 0.5 else "B"
    seen = {pair_index(r.prompt): chosen_letter(r) for r in server.requests}
    assert seen == expected
    config = run.run_json["config"]
    assert config["protocol"] == "official" and config["official_repo"] == str(repo)
    assert run.run_json["judges"][0]["protocol"] == "official"

    default = harness.judge(dataset)
    assert default.run_json["config"]["protocol"] == "prbj"
    assert default.overall("gemini-3-flash", "profile")["accuracy"] == 0.0  # prbj reads the last verdict


def test_official_protocol_without_the_repo_is_a_usage_error(harness: Harness) -> None:
    run = harness.judge(harness.dataset(records(2)), "--protocol", "official")
    assert run.exit_code == 2 and "--official-repo" in run.output


def test_query_plus_profile_layout_and_gold_helpers() -> None:
    posts = (ProfilePost("p1", "photo", "I shoot film"), ProfilePost("p2", "food", "I bake"))
    profile = official_posts(posts)
    assert profile == "Post 1 (Category: photo):\nI shoot film\nPost 2 (Category: food):\nI bake"
    assert (
        official_user_turn("Which camera?", profile)
        == "Which camera?Post 1 (Category: photo):\nI shoot film\nPost 2 (Category: food):\nI bake"
    )
    assert official_aspects(["Budget", "Darkroom"]) == "Budget, Darkroom"
    assert parse_official_scores("Scores: [2, 1, 0]") == [2.0, 1.0, 0.0]
    assert parse_official_scores("2 and 1") == [2.0, 1.0]
    assert parse_official_scores("none") is None
    assert OfficialRepo(official_repo(Path(__import__("tempfile").mkdtemp()) / "r")).system_line() == (
        "TEST-GOLD-SYSTEM line."
    )


def test_served_llm_scores_map_onto_zero_one() -> None:
    assert to_served_scale(1.0, 1.0, 10.0) == 0.0
    assert to_served_scale(10.0, 1.0, 10.0) == 1.0
    assert to_served_scale(5.5, 1.0, 10.0) == pytest.approx(0.5)


async def test_the_official_gold_call_and_its_list_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from conftest import make_record
    from prbj.bon.gold import gold_judge, gold_params
    from prbj.data.validate import parse_pair
    from prbj.llm.gateway import Gateway
    from prbj.llm.params import with_params
    from prbj.llm.providers import ProviderSpec, resolve_provider
    from prbj.llm.retry import RetryPolicy

    monkeypatch.setenv("OPENAI_API_KEY", "gold-test-key")
    repo = OfficialRepo(official_repo(tmp_path / "official"))
    record = make_record(1)
    record["rubric_aspects"] = [
        {"aspect": "Budget", "evidence": "e", "reason": "SHOULD-NOT-SHOW"},
        {"aspect": "Darkroom", "evidence": "e", "reason": "r"},
    ]
    pair = parse_pair(record)
    with ProviderServer(reply=lambda r: "[2, 1]") as running:
        plain = ProviderSpec(name="gold", model="openai/gold-judge", api_key_env=None, paid=False)
        assert with_params(plain, gold_params(repo)).params == {"max_tokens": 32, "temperature": 0.0}
        # A reasoning model gets room for its reasoning and no temperature it does not take (test_param_rules).
        spec = replace(
            with_params(resolve_provider("gpt-5.1", api_base=running.url), gold_params(repo)), rpm=None
        )
        judge = gold_judge(spec, Gateway(None, retry=RetryPolicy(max_attempts=1)), "per-answer", repo)
        (request,) = judge.requests(pair, "an answer")
        assert request.messages[0]["content"] == "TEST-GOLD-SYSTEM line."
        assert request.messages[1]["content"] == f"TEST-GOLD {pair.question} | an answer | Budget, Darkroom"
        grade = await judge.grade(pair, "an answer")
        assert (
            grade.status == "ok" and grade.aspect_scores == [2.0, 1.0] and grade.score == pytest.approx(0.75)
        )
        running.reply = lambda r: "It is good."
        failed = await gold_judge(spec, Gateway(None), "per-answer", repo).grade(pair, "another answer")
        assert failed.status == "parse_error"  # the official script would score it 0


async def test_served_llm_judge_answers_on_zero_one_in_official_mode() -> None:
    from prbj.judges.generative import PointwiseLLMJudge
    from prbj.serve.server import RewardService, ScoreRequest

    class Fixed(PointwiseLLMJudge):
        def __init__(self) -> None:
            self.name, self.context = "fixed", "none"

        async def score(self, view, answers):  # type: ignore[no-untyped-def]
            return [10.0, 1.0, 5.5][: len(answers)]

    view = JudgeView(pair_id="p", subset="S", question="q?", profile=(), context="none")
    requests = [ScoreRequest(view, answer) for answer in ("a", "b", "c")]
    assert await RewardService(Fixed(), protocol="official").score(requests) == pytest.approx([1.0, 0.0, 0.5])
    assert await RewardService(Fixed()).score(requests) == pytest.approx([10.0, 1.0, 5.5])


@pytest.mark.parametrize("protocol", ["official", "prbj"])
def test_an_official_repo_that_is_not_there_is_refused_even_when_no_judge_reads_it(
    tmp_path: Path, protocol: str
) -> None:
    """Issue 26: `--official-repo` pointing nowhere was accepted when no judge read it (offline judges)."""
    from click.testing import CliRunner

    from prbj.cli import main

    args = ["judge", "--no-progress", "-p", "length", "--limit", "1", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(
        main, [*args, "--protocol", protocol, "--official-repo", str(tmp_path / "nowhere")]
    )
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"error: --official-repo {tmp_path / 'nowhere'}: no such folder (your clone of "
        "https://github.com/Martin-qyma/Personalized-RewardBench)"
    ]
    assert not (tmp_path / "out").exists()
