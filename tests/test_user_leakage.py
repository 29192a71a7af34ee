"""A judge sees its pair's user's own history and nobody else's, and never a row that is judged: checked on what
each kind of judge really reads on per-user data. Every history text carries its user's marker (HISTu1n2,
PERSONAu1, FACTu1) and every judged row its own (TESTu1t1), so a request that shows another user's history, or
another judged row of the same user, is caught.

- LLM judges, pairwise and pointwise, and the planner: every request as the loopback provider received it.
- Scalar reward models (chat and official inputs): every conversation a real tiny reward model is asked to score.
- Offline baselines (bm25-profile, embed-profile): the profile texts each score call reads.
In the `swapped-profile` context the history shown is exactly one other user's; in `none`, nobody's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from loopback import ChatRequest, ProviderServer
from per_user_fixture import HISTORY_ROWS, USERS, user_records
from tiny_rm import build_reward_model

from conftest import write_jsonl
from prbj.cli import main
from prbj.data import load_dataset
from prbj.judges.baselines import BM25ProfileJudge, EmbedProfileJudge, make_baseline
from prbj.judges.registry import resolve_judges
from prbj.judges.scalar import ScalarJudge
from prbj.judges.setup import JudgeOptions
from prbj.llm.cache import ResponseCache
from prbj.llm.gateway import Gateway
from prbj.llm.setup import GatewayOptions
from prbj.local.models import ScalarOptions
from prbj.runs.execute import RunConfig, execute

_HISTORY = re.compile(r"(?:HIST|PERSONA|FACT)(u\d+)")
_JUDGED = re.compile(r"TEST(u\d+)t(\d+)")


def whose_history(text: str) -> set[str]:
    """The users whose history (earlier choices, persona, facts) a text shows."""
    return set(_HISTORY.findall(text))


def judged_rows(text: str) -> set[tuple[str, str]]:
    return set(_JUDGED.findall(text))


def history_shown(text: str, user: str) -> int:
    return len(set(re.findall(rf"HIST{user}n\d+", text)))


def check(text: str, context: str, pair_user: str | None = None) -> None:
    """What one input to a judge may hold: its own judged row only, and its user's history (profile), exactly one
    other user's (swapped-profile) or none."""
    rows = judged_rows(text)
    assert len(rows) == 1, f"not exactly one judged row: {sorted(rows)}"
    user = pair_user or next(iter(rows))[0]
    shown = whose_history(text)
    if context == "profile":
        assert shown == {user}
        assert history_shown(text, user) == HISTORY_ROWS
    elif context == "swapped-profile":
        assert len(shown) == 1 and user not in shown
    else:
        assert shown == set()


def reply(request: ChatRequest) -> str:
    if "infer what THIS user will expect" in request.system:
        return "- wants a bright prime lens\n- shoots portraits on film"
    if "evaluator of an answer" in request.system:
        return "It fits.\nScore: 7"
    return "A fits better.\nResult: A"


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer(reply=reply) as running:
        yield running


@pytest.fixture
def users(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "users.jsonl", user_records())


def ask(server: ProviderServer, openai_profiles: Path, tmp_path: Path, *args: str) -> list[ChatRequest]:
    server.reset()
    shared = [
        "--api-base",
        server.url,
        "--providers-dir",
        str(openai_profiles),
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    shared += ["--personal-data", "any"]  # made-up users
    result = CliRunner().invoke(
        main, ["judge", *args, *shared, "--out", str(tmp_path / "out"), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    return list(server.requests)


@pytest.mark.parametrize("mode", ["pairwise", "pointwise"])
@pytest.mark.parametrize("context", ["profile", "swapped-profile", "none"])
def test_llm_judges_see_their_users_history_only(
    server: ProviderServer, openai_profiles: Path, users: Path, tmp_path: Path, mode: str, context: str
) -> None:
    requests = ask(server, openai_profiles, tmp_path, "--dataset", str(users), "-p", "judge", "--context", context,
                   "--mode", mode)  # fmt: skip
    calls_per_pair = 1 if mode == "pairwise" else 2
    assert len(requests) == len(USERS) * 2 * calls_per_pair
    for request in requests:
        check(request.prompt, context)


def test_the_planner_sees_its_users_history_only_and_the_judge_its_aspects(
    server: ProviderServer, openai_profiles: Path, users: Path, tmp_path: Path
) -> None:
    requests = ask(server, openai_profiles, tmp_path, "--dataset", str(users), "-p", "judge", "--context", "planner",
                   "--planner", "planner")  # fmt: skip
    planned = [r for r in requests if "infer what THIS user will expect" in r.system]
    judged = [r for r in requests if r not in planned]
    assert len(planned) == len(judged) == len(USERS) * 2
    for request in planned:
        check(request.prompt, "profile")
        # A profile that is not past posts is asked about as what is known about the user.
        assert "## What is known about the user" in request.prompt
    for request in judged:
        check(request.prompt, "none")
        assert "wants a bright prime lens" in request.prompt


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = [" ".join(str(v) for v in r.values()) for r in user_records()]
    texts.append(
        "what is known about this user persona stated preferences earlier choices asked preferred over"
    )
    return build_reward_model(tmp_path_factory.mktemp("leak-rm") / "rm", texts)


@pytest.mark.parametrize("scalar_input", ["chat", "official"])
def test_scalar_reward_models_score_their_users_history_only(
    tiny_rm: Path, users: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scalar_input: str
) -> None:
    seen: list[tuple[str, str]] = []
    original = ScalarJudge._cached_score

    async def recorded(self: ScalarJudge, messages: list[dict[str, str]]) -> dict[str, Any]:
        seen.append((self.context, "\n".join(m["content"] for m in messages)))
        return await original(self, messages)

    monkeypatch.setattr(ScalarJudge, "_cached_score", recorded)
    options = JudgeOptions(
        contexts=("profile", "swapped-profile", "none"), scalar=ScalarOptions(scalar_input=scalar_input)
    )
    gateway = Gateway(ResponseCache(tmp_path / "cache"))
    judges = resolve_judges([f"hf:{tiny_rm}"], options, GatewayOptions(), gateway)
    data = load_dataset(str(users))
    config = RunConfig("users", (), None, 42, tmp_path / "out", show_progress=False)
    result = execute(data, judges, config, gateway=gateway)
    assert (result.judgments["status"] == "ok").all()
    assert len(seen) == 3 * len(data.pairs) * 2
    for context, text in seen:
        check(text, context)


@pytest.mark.parametrize("judge_class", [BM25ProfileJudge, EmbedProfileJudge])
def test_offline_profile_baselines_read_their_users_history_only(
    users: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judge_class: type
) -> None:
    read: list[str] = []
    original = judge_class.score

    async def recorded(self: Any, view: Any, answers: Any) -> list[float]:
        # What the baseline reads: the profile texts, and the answers (the judged row's own).
        read.append("\n".join([*view.user_profile.texts(), *answers]))
        return await original(self, view, answers)

    monkeypatch.setattr(judge_class, "score", recorded)
    data = load_dataset(str(users))
    config = RunConfig("users", (), None, 42, tmp_path / "out", show_progress=False)
    execute(data, [make_baseline(judge_class.name, seed=42)], config)
    assert len(read) == len(data.pairs)
    for text in read:
        check(text, "profile")


def test_views_and_profiles_hold_no_judged_row_of_the_same_user(users: Path) -> None:
    """A user's other judged rows are not history: no view of any context shows them."""
    data = load_dataset(str(users))
    for pair in data.pairs:
        for context in ("profile", "planner", "none"):
            view = pair.view(context)  # type: ignore[arg-type]
            texts = "\n".join(view.user_profile.texts())
            assert not judged_rows(texts)
