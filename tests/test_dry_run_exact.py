"""Issue 26: a dry run's count is the calls a run then sends, and its cost an upper bound on what the run then
spends, for every combination of mode × context × order × samples × planner (repair-free), and for `prbj bon`
and `prbj build`.

Each combination runs twice against the loopback provider (real HTTP, the real LiteLLM stack), each time with a
fresh cache: first `--dry-run` (its "Plan (nothing sent)" table is what a user reads), then for real. The
estimate's stated bound is every call's prompt tokens as counted plus its `max_tokens` of output, at the
profile's prices; the real run spends its prompt tokens plus the tokens really written."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from loopback import ChatRequest, ProviderServer

from prbj.cli import main

# USD per million tokens; max_tokens bounds each reply. Output is dear so that the bound is visible.
MAX_TOKENS = 40
PROFILE = (
    'model = "openai/{model}"\napi_key_env = "OPENAI_API_KEY"\nmax_concurrency = 8\n'
    f"[price]\ninput = 3\noutput = 15\n[params]\ntemperature = 0\nmax_tokens = {MAX_TOKENS}\n"
)


def reply(request: ChatRequest) -> str:
    system = request.system
    if "infer what THIS user will expect" in system:
        return "- keeps to a budget\n- prefers film cameras\n- develops at home"
    if "evaluator of an answer" in system:
        return "It fits.\nScore: 7"
    return "A fits better.\nResult: A"


@dataclass(frozen=True)
class Plan:
    calls: int
    cached: int
    tokens_in: int
    tokens_out: int
    usd: float


def plan_of(output: str, provider: str) -> Plan:
    """The provider's row of the printed plan table (drawn whole at the width the test gives)."""
    row = next(line for line in output.splitlines() if line.split()[:1] == [provider])
    calls, cached, tokens_in, tokens_out, usd = row.split()[1:6]
    return Plan(int(calls), int(cached), int(tokens_in.replace(",", "")), int(tokens_out.replace(",", "")),
                float(usd))  # fmt: skip


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer(reply=reply) as running:
        yield running


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dry-run")
    (tmp_path / "providers").mkdir()
    for name in ("dry", "planner"):
        (tmp_path / "providers" / f"{name}.toml").write_text(PROFILE.replace("{model}", f"{name}-model"))
    return tmp_path


def prbj(folder: Path, server: ProviderServer, cache: str, *args: str) -> str:
    shared = ["--api-base", server.url, "--cache-dir", str(folder / cache), "--providers-dir",
              str(folder / "providers"), "--no-progress"]  # fmt: skip
    result = CliRunner(env={"COLUMNS": "400"}).invoke(main, [*args, *shared])
    assert result.exit_code == 0, (args, result.output)
    return result.output


def spent(run_dir: Path, provider: str) -> tuple[int, float]:
    usage = json.loads((run_dir / "run.json").read_text())["usage"]
    row = next(r for r in usage if r["provider"] == provider)
    return row["requests_sent"], row["cost_usd"]


def counted_prompt_tokens(server: ProviderServer) -> int:
    """The prompt tokens of every request the server received, counted as prbj counts them for an estimate."""
    from prbj.llm.litellm_setup import count_prompt_tokens

    total = 0
    for request in server.requests:
        messages = [{"role": "system", "content": request.system}, *request.messages]
        total += count_prompt_tokens(f"openai/{request.model}", messages)
    return total


# Contexts that show the judge what is known before any call, and the planner's, whose aspects come from a call.
CONTEXT_GROUPS = {"known": ("none", "profile", "oracle"), "planner": ("planner",)}
AXES = (("pairwise", "pointwise"), ("random", "both"), (1, 2), tuple(CONTEXT_GROUPS))
COMBINATIONS = [
    (mode, order, samples, group)
    for mode, order, samples, group in itertools.product(*AXES)
    if not (mode == "pointwise" and order == "both")  # pointwise judges see one answer at a time: no order
]


@pytest.mark.parametrize(("mode", "order", "samples", "group"), COMBINATIONS)
def test_judge_dry_run_counts_what_the_run_sends(server, folder, mode, order, samples, group) -> None:
    contexts = [a for context in CONTEXT_GROUPS[group] for a in ("--context", context)]
    args = ["judge", "-p", "dry", "--limit", "1", "--mode", mode, *contexts, "--order", order,
            "--samples", str(samples), "--out", str(folder / "runs")]  # fmt: skip
    providers = ["dry"]
    if group == "planner":
        args += ["--planner", "planner"]
        providers.append("planner")
    server.reset()
    output = prbj(folder, server, "plan-cache", *args, "--dry-run")
    plans = {name: plan_of(output, name) for name in providers}
    assert server.count() == 0
    prbj(folder, server, "live-cache", *args)
    (run,) = (folder / "runs").iterdir()
    for name, plan in plans.items():
        sent, usd = spent(run, name)
        assert (plan.calls, plan.cached) == (sent, 0), (name, plan, sent)
        # The stated bound: prompt tokens as counted plus max_tokens of output per call.
        assert plan.tokens_out == plan.calls * MAX_TOKENS
        assert plan.usd == pytest.approx((plan.tokens_in * 3 + plan.tokens_out * 15) / 1e6, abs=1e-4)
        assert 0 < usd <= plan.usd, (name, usd, plan)
    assert sum(plan.calls for plan in plans.values()) == server.count()
    counted = counted_prompt_tokens(server)
    tokens_in = sum(plan.tokens_in for plan in plans.values())
    # Exact when every prompt is known in advance; with a planner, its aspects are estimated at their longest.
    assert tokens_in == counted if group == "known" else tokens_in > counted, (tokens_in, counted)


def _step(folder: Path, server: ProviderServer, *args: str) -> tuple[dict[str, Plan], str]:
    """One step's dry run, then the step itself, on the same cache: the plans and the step's output."""
    server.reset()
    output = prbj(folder, server, "cache", *args, "--dry-run")
    assert server.count() == 0
    plans = {name: plan_of(output, name) for name in ("dry", "planner") if f"\n{name} " in output}
    return plans, prbj(folder, server, "cache", *args)


def _assert_exact(plans: dict[str, Plan], server: ProviderServer, usage: list[dict]) -> None:
    for name, plan in plans.items():
        row = next(r for r in usage if r["provider"] == name)
        assert plan.calls == row["requests_sent"], (name, plan, row)
        assert 0 < row["cost_usd"] <= plan.usd, (name, plan, row)
    assert sum(plan.calls for plan in plans.values()) == server.count()


@pytest.mark.parametrize("gold_mode", ["per-answer", "per-aspect"])
def test_bon_dry_runs_count_what_each_step_sends(server, folder, gold_mode: str) -> None:
    import bon_script

    server.reply = bon_script.reply
    try:
        plans, _ = _step(folder, server, "bon", "sample", "--policy", "dry", "--n", "3", "--limit", "1",
                         "--out", str(folder / "bon"))  # fmt: skip
        (run,) = (folder / "bon").iterdir()
        history = lambda: json.loads((run / "run.json").read_text())["history"]  # noqa: E731
        _assert_exact(plans, server, history()[-1]["usage"])
        plans, _ = _step(folder, server, "bon", "score", str(run), "-p", "dry", "-p", "length")
        _assert_exact(plans, server, history()[-1]["usage"])
        plans, _ = _step(
            folder, server, "bon", "evaluate", str(run), "--gold", "dry", "--gold-mode", gold_mode
        )
        _assert_exact(plans, server, history()[-1]["usage"])
    finally:
        server.reply = reply


@pytest.mark.parametrize("plan", ["planner", "gold"])
def test_build_dry_run_counts_what_the_build_sends(server, folder, plan: str) -> None:
    import lamp_fixture

    # soc-2's chosen answer runs past --max-words: the build drops it before its two checks, which a dry run
    # cannot know; every other record sends what the plan counts.
    refs = tuple(ref for ref in lamp_fixture.REFS if ref != "soc-2")
    lamp_fixture.write_fixture(folder / "lamp.jsonl", refs)
    server.reply = lamp_fixture.reply
    try:
        roles = ["-p", "dry"] + (
            ["--planner-provider", "planner"] if plan == "planner" else ["--plan", "gold"]
        )
        # The fixture's records are made up: they may go to any provider.
        plans, _ = _step(folder, server, "build", "--input", str(folder / "lamp.jsonl"), "--personal-data", "any",
                         "--out", str(folder / "built"), *roles)  # fmt: skip
        usage = json.loads((folder / "built" / "run.json").read_text())["usage"]
        _assert_exact(plans, server, usage)
    finally:
        server.reply = reply
