"""The provider parameter rules (prbj.llm.param_rules), checked before any call on every command that calls
models: against a loopback provider that answers 400 for the combinations each provider documents as rejected
and spends hidden reasoning tokens from the output cap, through the real CLI, LiteLLM and its mapping."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bon_script import reply as bon_reply
from click.testing import CliRunner
from loopback import ChatRequest, ProviderServer, spends
from test_generative import unpaced_profiles

from conftest import make_record, write_jsonl
from prbj.cli import main
from prbj.errors import ConfigError
from prbj.llm.param_rules import RULES
from prbj.llm.params import Asked, with_params
from prbj.llm.providers import resolve_provider

KEYS = {"OPENAI_API_KEY": "sk-rules", "ANTHROPIC_API_KEY": "ant-rules", "GEMINI_API_KEY": "gem-rules"}
# Hidden reasoning a request spends, by the effort it asked for: more than the official gold call's 32 tokens
# at every effort but none.
REASONING = spends({"minimal": 200, "low": 600, "medium": 2000, "high": 6000})


def reply(request: ChatRequest) -> str:
    """best-of-N's scripted policy, RM and gold judge (tests/bon_script.py); the official gold call (its test
    prompts, tests/test_protocol.py) gets a list of scores; a pairwise judge picks A."""
    if request.system.startswith("TEST-GOLD"):
        return "[2, 1]"
    return (
        "Weighing both.\nResult: A"
        if "Result: A" in request.system + request.last_user
        else bon_reply(request)
    )


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer(reply=reply, strict_params=True, reasoning=REASONING) as running:
        yield running


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled profiles, unpaced (no rpm or tpm wait)."""
    folder = unpaced_profiles(tmp_path_factory.mktemp("rules") / "providers")
    for profile in folder.glob("*.toml"):
        profile.write_text(re.sub(r"(?m)^tpm\s*=.*$", "", profile.read_text()))
    return folder


def prbj(server: ProviderServer, profiles: Path, tmp: Path, *args: str) -> tuple[int, str]:
    shared = ["--api-base", server.url, "--cache-dir", str(tmp / "cache"), "--providers-dir", str(profiles)]
    result = CliRunner().invoke(main, [*args, *shared], env=KEYS, catch_exceptions=False, terminal_width=200)
    return result.exit_code, result.output


def rejected(server: ProviderServer) -> list[str]:
    """What the strict loopback would have refused among the requests it answered (none may be)."""
    from loopback import provider_rejection

    return [f"{r.model}: {problem[0]}" for r in server.requests if (problem := provider_rejection(r))]


def settled(name: str, **asked: Asked) -> Any:
    return with_params(resolve_provider(name), asked).settled


def option(value: Any, flag: str) -> Asked:
    return Asked(value, flag, "option")


# --- the table ----------------------------------------------------------------------------------------------


def test_every_rule_names_its_models_its_fix_and_the_provider_documentation() -> None:
    names = [rule.name for rule in RULES]
    assert len(names) == len(set(names))
    for rule in RULES:
        assert rule.source.startswith("https://"), rule.name
        assert rule.models and rule.fix, rule.name


def test_a_typed_value_the_provider_rejects_is_refused_naming_rule_and_fix() -> None:
    with pytest.raises(ConfigError) as caught:
        settled("gpt-5.1", temperature=option(0.7, "--temperature"))
    message = str(caught.value)
    assert "temperature 0.7 (--temperature)" in message and "openai-reasoning-sampling" in message
    assert "fix: add --reasoning-effort none" in message and "platform.openai.com" in message
    assert "\n" not in message
    # Where the provider takes it, it is sent as typed.
    ok = settled("gpt-5.1", temperature=option(0.7, "--temperature"), reasoning_effort=option("none", "-r"))
    assert ok.wire["temperature"] == 0.7 and ok.wire["reasoning_effort"] == "none"
    with pytest.raises(ConfigError, match=r"claude-temperature-or-top-p.*give only one"):
        settled("claude-sonnet-4-6", temperature=option(0.5, "--temperature"), top_p=option(0.8, "--top-p"))
    with pytest.raises(ConfigError, match=r"does not take.*openai-reasoning-effort-level"):
        settled("gpt-5.1", reasoning_effort=option("minimal", "--reasoning-effort"))
    with pytest.raises(ConfigError, match=r"with thinking on.*claude-thinking-sampling"):
        settled(
            "claude-sonnet-4-6",
            temperature=option(0.5, "--temperature"),
            reasoning_effort=option("low", "-r"),
        )


def test_reasoning_effort_on_claude_changes_the_profile_in_a_documented_way() -> None:
    """Before: thinking.budget_tokens == max_tokens with temperature 0, two documented 400s. Now the profile's
    temperature is left out and the cap leaves room for the answer, each change printed."""
    dated = settled("litellm:anthropic/claude-sonnet-4-5-20250929", reasoning_effort=option("low", "-r"))
    assert dated.wire["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert dated.wire["max_tokens"] > 1024
    assert any("claude-thinking-budget" in change for change in dated.changes)
    adaptive = settled("claude-sonnet-4-6", reasoning_effort=option("low", "-r"))
    assert "temperature" not in adaptive.wire and adaptive.wire["output_config"] == {"effort": "low"}
    assert any(
        change.startswith("temperature 0 (profile claude-sonnet-4-6) not sent") for change in adaptive.changes
    )
    # None on Claude is what the model does unasked: honoured, and not claimed in the parameters (nor the key).
    plain = settled("claude-sonnet-4-6", reasoning_effort=option("none", "-r"))
    assert "reasoning_effort" not in plain.params and plain.wire == {"temperature": 0, "max_tokens": 1024}


def test_gemini_3_below_temperature_1_is_warned_and_sent() -> None:
    result = settled("gemini-3-flash", temperature=option(0.2, "--temperature"))
    assert result.wire["temperature"] == 0.2
    assert any("gemini-3-temperature" in warning for warning in result.warnings)


def test_a_parameter_litellm_would_drop_is_left_out_of_what_is_keyed() -> None:
    result = settled("claude-sonnet-4-6", seed=Asked(42, "--seed, + sample index"))
    assert "seed" in result.unsent and "seed" not in result.params
    assert any("litellm-drops" in change for change in result.changes)


# --- every command, at the loopback -------------------------------------------------------------------------


def test_judge_refuses_before_any_call_and_sends_what_run_json_records(
    server: ProviderServer, profiles: Path, tmp_path: Path
) -> None:
    dataset = write_jsonl(tmp_path / "pairs.jsonl", [make_record(i) for i in range(1, 3)])
    server.reset()
    base = [
        "judge",
        "--no-progress",
        "--dataset",
        str(dataset),
        "--personal-data",
        "any",
        "--out",
        str(tmp_path / "out"),
        "-p",
        "gpt-5.1",
    ]
    typed = ["--context", "none", "--temperature", "0.7", "--samples", "3"]
    code, output = prbj(server, profiles, tmp_path, *base, *typed)
    assert code == 2 and "openai-reasoning-sampling" in output and "--reasoning-effort none" in output
    assert server.requests == []  # refused before any call
    code, output = prbj(
        server,
        profiles,
        tmp_path,
        *base,
        "--context",
        "none",
        "--temperature",
        "0.7",
        "--reasoning-effort",
        "none",
    )
    assert code == 0, output
    bodies = [r.body for r in server.requests]
    assert bodies and all(b["temperature"] == 0.7 and b["reasoning_effort"] == "none" for b in bodies)
    assert all(b["max_completion_tokens"] == 5120 and "max_tokens" not in b for b in bodies)
    run_json = json.loads(next((tmp_path / "out").glob("*/run.json")).read_text())
    (usage,) = run_json["usage"]
    (params,) = usage["params"]
    assert params["sent"] == {"max_completion_tokens": 5120, "temperature": 0.7, "reasoning_effort": "none"}
    assert rejected(server) == []


@pytest.mark.parametrize("effort", [None, "low"])
def test_bon_on_the_claude_and_gpt_profiles_sends_nothing_the_rules_reject(
    server: ProviderServer, profiles: Path, tmp_path: Path, effort: str | None
) -> None:
    """`prbj bon sample | score | evaluate` with their defaults (temperature 1.0 and top-p 0.9, the official
    gold call's 32 tokens at temperature 0) on the Claude and GPT profiles: the strict loopback answers 400 for
    any combination the providers reject, and spends hidden reasoning tokens from the cap."""
    server.reset()
    extra = ["--reasoning-effort", effort] if effort else []
    repo = official_repo(tmp_path / "official")
    for profile in ("claude-sonnet-4-6", "gpt-5.1"):
        out = tmp_path / f"bon-{profile}"
        code, output = prbj(
            server, profiles, tmp_path, "bon", "sample", "--policy", profile, "--n", "2", "--limit", "1",
            "--out", str(out), "--no-progress", *extra,
        )  # fmt: skip
        assert code == 0, output
        assert "note:" in output  # the BoN defaults the provider does not take are left out, and said so
        run_dir = next(out.iterdir())
        code, output = prbj(
            server, profiles, tmp_path, "bon", "score", str(run_dir), "-p", profile, "--context", "none",
            "--no-progress", *extra,
        )  # fmt: skip
        assert code == 0, output
        code, output = prbj(
            server, profiles, tmp_path, "bon", "evaluate", str(run_dir), "--gold", profile, "--protocol",
            "official", "--official-repo", str(repo), "--no-progress", *extra,
        )  # fmt: skip
        assert code == 0, output
        gold = json.loads((run_dir / "run.json").read_text())["evaluate"]
        assert gold["counts"] == {"ok": gold["graded_picks"]}  # every gold call came back with its scores
    assert rejected(server) == []
    assert all(r.body.get("max_completion_tokens") != 32 for r in server.requests if r.family == "openai")


def test_official_gold_grading_on_a_reasoning_model_gets_room_for_its_reasoning(
    server: ProviderServer,
) -> None:
    """The official gold call asks 32 tokens at temperature 0; a reasoning model spends them on hidden
    reasoning and answers nothing (before: every grade a parse error). Settled, the cap gets the reasoning's
    room and the temperature the model does not take is left out, both printed."""
    from prbj.bon.gold import gold_params
    from prbj.judges.official import OfficialRepo

    official = gold_params(OfficialRepo(Path(".")))
    spec = with_params(resolve_provider("gpt-5.1"), official)
    assert spec.params["max_tokens"] == 32 + 4096 and "temperature" not in spec.params
    server.reset()
    # What the loopback does with the call as it was sent before: reasoning takes all 32 tokens.
    exhausted = _ask(server, {"model": "gpt-5.1", "max_completion_tokens": 32, "reasoning_effort": "low"})
    assert exhausted["choices"][0] == {
        "index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "length"
    }  # fmt: skip
    assert exhausted["usage"]["completion_tokens_details"] == {"reasoning_tokens": 32}
    roomy = _ask(server, {"model": "gpt-5.1", "max_completion_tokens": 32 + 4096, "reasoning_effort": "low"})
    assert roomy["choices"][0]["finish_reason"] == "stop"


def _ask(server: ProviderServer, body: dict[str, Any]) -> dict[str, Any]:
    import httpx

    body = {**body, "messages": [{"role": "user", "content": "End with Result: A or Result: B."}]}
    return httpx.post(
        f"{server.url}/chat/completions", json=body, headers={"Authorization": "Bearer k"}
    ).json()


def official_repo(root: Path) -> Path:
    from test_protocol import official_repo as written

    return written(root)


def test_the_strict_loopback_answers_what_the_providers_document(server: ProviderServer) -> None:
    """The 400s these tests rely on, in each provider's shape."""
    import httpx

    anthropic = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "x"}],
    }
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    both = httpx.post(
        f"{server.url}/v1/messages", json={**anthropic, "temperature": 1, "top_p": 0.9}, headers=headers
    )
    assert both.status_code == 400 and both.json()["error"]["type"] == "invalid_request_error"
    thinking = {**anthropic, "temperature": 0, "thinking": {"type": "enabled", "budget_tokens": 1024}}
    assert httpx.post(f"{server.url}/v1/messages", json=thinking, headers=headers).status_code == 400
    gpt = _ask(
        server,
        {"model": "gpt-5.1", "max_completion_tokens": 10, "temperature": 0.5, "reasoning_effort": "low"},
    )
    assert gpt["error"]["param"] == "temperature"


@pytest.mark.parametrize(
    "command", [("judge",), ("build",), ("bon", "sample"), ("bon", "score"), ("bon", "evaluate"), ("serve",)]
)
def test_every_command_that_calls_models_takes_reasoning_effort(command: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*command, "--help"], terminal_width=200)
    assert result.exit_code == 0 and "--reasoning-effort [none|minimal|low|medium|high]" in result.output


def test_reasoning_effort_is_sent_and_keyed(server: ProviderServer, profiles: Path, tmp_path: Path) -> None:
    dataset = write_jsonl(tmp_path / "pairs.jsonl", [make_record(1)])
    base = [
        "judge",
        "--no-progress",
        "--dataset",
        str(dataset),
        "--personal-data",
        "any",
        "--out",
        str(tmp_path / "out"),
        "-p",
        "gemini-3-flash",
    ]
    efforts = []
    for effort in ("low", "low", "high"):
        server.reset()
        code, output = prbj(
            server, profiles, tmp_path, *base, "--context", "none", "--reasoning-effort", effort
        )
        assert code == 0, output
        efforts.append(
            [r.body["generationConfig"]["thinkingConfig"]["thinkingLevel"] for r in server.requests]
        )
    # Asked once at low; the same run again is served from the cache; high is another answer, bought anew.
    assert efforts == [["low"], [], ["high"]]


@pytest.mark.parametrize(
    "command",
    [
        ("judge", "-p", "gpt-5.1", "--limit", "1"),
        (
            "build",
            "--input",
            "{lamp}",
            "--personal-data",
            "any",
            "--out",
            "{out}",
            "-p",
            "gpt-5.1",
            "--limit",
            "1",
        ),
        ("bon", "sample", "--policy", "gpt-5.1", "--limit", "1", "--out", "{out}"),
        ("serve", "-p", "gpt-5.1", "--port", "0"),
    ],
)
def test_every_command_refuses_a_rejected_value_before_any_call(
    server: ProviderServer, profiles: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    from lamp_fixture import write_fixture

    lamp = write_fixture(tmp_path / "lamp.jsonl")
    args = [part.format(lamp=lamp, out=tmp_path / "out") for part in command]
    server.reset()
    code, output = prbj(server, profiles, tmp_path, *args, "--reasoning-effort", "minimal")
    assert code == 2, output
    assert (
        "reasoning_effort 'minimal' (--reasoning-effort)" in output
        and "openai-reasoning-effort-level" in output
    )
    assert server.requests == []
