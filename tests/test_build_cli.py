"""`prbj build` end to end against the loopback provider: a scripted model plays planner, chosen writer, rejected
writer and check judge over real HTTP; requests are counted at the server."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from lamp_fixture import DROPPED, FULL_BUILD_REQUESTS, KEPT, REFS, reply, role_of, write_fixture
from loopback import ProviderServer

from prbj.cli import main
from prbj.data import load_dataset

KEYS = {"OPENAI_API_KEY": "sk-build-test", "ANTHROPIC_API_KEY": "ant-build-test"}


def _profile(model: str, key: str, *, output_price: float = 100.0, max_tokens: int = 200) -> str:
    # Input is free and output costs $0.0001 a token: a call's worst case is $0.02, a scripted reply (one token
    # per word, never more than max_tokens) costs about $0.001, a whole fixture build about $0.07.
    return (
        f'model = "{model}"\napi_key_env = "{key}"\nmax_concurrency = 16\n'
        f"[price]\ninput = 0\noutput = {output_price}\n[params]\nmax_tokens = {max_tokens}\n"
    )


@pytest.fixture(scope="module")
def server():
    with ProviderServer(reply=reply) as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server: ProviderServer, monkeypatch: pytest.MonkeyPatch):
    server.reset()
    server.latency = 0.0
    server.reply = reply
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    providers = tmp_path / "providers"
    providers.mkdir()
    (providers / "writer.toml").write_text(_profile("openai/writer-model", "OPENAI_API_KEY"))
    (providers / "critic.toml").write_text(_profile("anthropic/claude-sonnet-4-6", "ANTHROPIC_API_KEY"))
    write_fixture(tmp_path / "lamp.jsonl")
    return tmp_path


def build(server: ProviderServer, workspace: Path, *args: str, out: str = "out") -> tuple[int, str]:
    command = [
        "build",
        "--input",
        str(workspace / "lamp.jsonl"),
        "--out",
        str(workspace / out),
        "--api-base",
        server.url,
        "--cache-dir",
        str(workspace / "cache"),
        "--providers-dir",
        str(workspace / "providers"),
        "--no-progress",
        # The fixture's records are made up: they may go to any provider.
        "--personal-data",
        "any",
        *args,
    ]
    result = CliRunner().invoke(main, command, catch_exceptions=False)
    return result.exit_code, result.output


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_build_end_to_end_keeps_good_pairs_and_explains_every_drop(server, workspace) -> None:
    code, output = build(
        server,
        workspace,
        "-p",
        "writer",
        "--planner-provider",
        "critic",
        "--check-provider",
        "critic",
        "--balance-length",
    )
    assert code == 0, output
    # Each role went to its own provider: planner and checks over the Anthropic wire format, writers over OpenAI.
    roles = {(role_of(r), r.family) for r in server.requests}
    assert roles == {
        ("planner", "anthropic"),
        ("check", "anthropic"),
        ("chosen", "openai"),
        ("rejected", "openai"),
    }
    assert server.count() == FULL_BUILD_REQUESTS
    out = workspace / "out"

    # The pairs are benchmark data: the benchmark's own loader validates them, and `prbj judge` runs on them.
    dataset = load_dataset(str(out / "pairs.jsonl"))
    assert sorted(p.id for p in dataset.pairs) == sorted(f"lamp-{r}" for r in KEPT)
    pair = next(p for p in dataset.pairs if p.id == "lamp-art-2")
    assert pair.chosen.startswith("Thrifty start (art-2)") and pair.rejected.startswith(
        "Premium start (art-2)"
    )
    assert pair.narrative.startswith("GOLD-NARRATIVE art-2") and len(pair.profile) == 3
    judged = CliRunner().invoke(
        main,
        [
            "judge",
            "--no-progress",
            "--dataset",
            str(out / "pairs.jsonl"),
            "-p",
            "length",
            "--out",
            str(workspace / "r"),
        ],
    )
    assert judged.exit_code == 0, judged.output
    assert "length" in judged.output

    rejects = {r["id"]: r for r in read_jsonl(out / "rejects.jsonl")}
    assert {k: v["reason"] for k, v in rejects.items()} == {
        f"lamp-{r}": reason for r, reason in DROPPED.items()
    }
    assert rejects["lamp-life-3"]["unreadable_check_replies"]["chosen"].startswith("This answer seems")
    assert rejects["lamp-art-3"]["checks"]["rejected"]["adherence"] == 4
    assert read_jsonl(out / "incomplete.jsonl") == []

    provenance = {p["id"]: p for p in read_jsonl(out / "provenance.jsonl")}
    assert sorted(provenance) == sorted(f"lamp-{r}" for r in KEPT)
    art1 = provenance["lamp-art-1"]
    assert art1["models"]["planner"]["model"] == "anthropic/claude-sonnet-4-6"
    assert art1["models"]["chosen"]["model"] == "openai/writer-model"
    assert set(art1["template_hashes"]) == {"planner", "chosen", "rejected", "check"}
    assert art1["checks"]["chosen"] == {"factuality": 5, "relevance": 5, "helpfulness": 4, "adherence": 5}
    assert art1["adherence_gap"] == 4
    assert art1["plan"]["aspects"][0].startswith("Keep costs low for art-1")

    summary = json.loads((out / "build_summary.json").read_text())
    assert summary["counts"]["kept"] == 5 and summary["counts"]["dropped"] == 4
    assert summary["by_subset"]["Society_and_Culture"]["drop_reasons"] == {
        "chosen_too_long": 1,
        "low_quality_rejected": 1,
    }
    kept_rejected = summary["scores"]["kept"]["rejected"]["adherence"]
    assert kept_rejected == {"n": 5, "mean": 1.0, "histogram": {"1": 5}}
    # Four of the five kept pairs have the longer chosen answer: 80% > 60%, so --balance-length warns.
    assert summary["length"]["chosen_longer_share"] == 0.8 and summary["length"]["warning"] is True
    assert "longer in 80% of kept pairs" in output
    report = (out / "report.md").read_text()
    assert "`check_parse_error`" in report and "longer in 80% of kept pairs" in report
    run = json.loads((out / "run.json").read_text())
    assert run["command"] == "build" and run["config"]["plan"] == "planner"
    assert {u["provider"] for u in run["usage"]} == {"writer", "critic"}

    # A rerun buys nothing and writes the same pairs.
    pairs_before = (out / "pairs.jsonl").read_bytes()
    summary_before = (out / "build_summary.json").read_bytes()
    server.reset()
    code, output = build(
        server,
        workspace,
        "-p",
        "writer",
        "--planner-provider",
        "critic",
        "--check-provider",
        "critic",
        "--balance-length",
    )
    assert code == 0, output
    assert server.count() == 0
    assert (out / "pairs.jsonl").read_bytes() == pairs_before
    assert (out / "build_summary.json").read_bytes() == summary_before

    # `prbj judge --context planner` with the build's planner finds the aspects in the cache: only judge calls.
    judged = CliRunner().invoke(
        main,
        [
            "judge",
            "--no-progress",
            "--dataset",
            str(out / "pairs.jsonl"),
            "--personal-data",
            "any",
            "-p",
            "writer",
            "--context",
            "planner",
            "--planner",
            "critic",
            "--out",
            str(workspace / "r"),
            "--api-base",
            server.url,
            "--cache-dir",
            str(workspace / "cache"),
            "--providers-dir",
            str(workspace / "providers"),
        ],
    )
    assert judged.exit_code == 0, judged.output
    assert [role_of(r) for r in server.requests] == ["judge"] * len(KEPT)


def test_gold_plan_sends_no_planner_call_and_thresholds_are_options(server, workspace) -> None:
    code, output = build(
        server, workspace, "-p", "writer", "--plan", "gold", "--min-gap", "1", "--subset", "art"
    )
    assert code == 0, output
    assert {role_of(r) for r in server.requests} == {"chosen", "rejected", "check"}
    chosen_prompt = next(r.last_user for r in server.requests if role_of(r) == "chosen")
    assert "GOLD-ASPECT low budget: student" in chosen_prompt
    # With --min-gap 1 the art-3 pair (adherence 5 vs 4) is kept too.
    kept = {p["id"] for p in read_jsonl(workspace / "out" / "pairs.jsonl")}
    assert kept == {"lamp-art-1", "lamp-art-2", "lamp-art-3"}
    provenance = read_jsonl(workspace / "out" / "provenance.jsonl")
    assert provenance[0]["models"]["planner"] == {"source": "gold rubric_aspects"}
    # The balance check is off without --balance-length: the share is reported, no warning is raised.
    summary = json.loads((workspace / "out" / "build_summary.json").read_text())
    assert summary["length"]["warning"] is False and summary["length"]["chosen_longer_share"] == 1.0
    # Issue 26: a build directory given to the commands that read judge runs is named for what it is, and
    # the way it points to (judging its pairs) works.
    for args in (["report", str(workspace / "out")], ["show", str(workspace / "out")]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, result.output
        assert "a build directory (prbj build), not a judge run" in result.output
    judged = CliRunner().invoke(
        main,
        ["judge", "--no-progress", "-p", "length", "--dataset", str(workspace / "out" / "pairs.jsonl"),
         "--out", str(workspace / "runs")],
    )  # fmt: skip
    assert judged.exit_code == 0, judged.output


def test_budget_stops_before_the_cap_and_a_rerun_finishes_only_the_rest(server, workspace) -> None:
    # A call reserves its worst case ($0.02) before it is sent, so under $0.05 two calls fit in flight at first
    # and one once about $0.01 is spent; calls that do not fit are skipped, never sent.
    code, output = build(server, workspace, "-p", "writer", "--max-cost", "0.05", "--concurrency", "1")
    assert code == 0, output
    first = server.count()
    assert 5 <= first < FULL_BUILD_REQUESTS
    run = json.loads((workspace / "out" / "run.json").read_text())
    assert sum(u["cost_usd"] for u in run["usage"]) <= 0.05
    summary = json.loads((workspace / "out" / "build_summary.json").read_text())
    assert summary["counts"]["incomplete_reasons"]["skipped_budget"] == summary["counts"]["incomplete"] > 0
    assert "rerun to finish them" in output
    assert {r["reason"] for r in read_jsonl(workspace / "out" / "incomplete.jsonl")} == {"skipped_budget"}

    answered_before = [(r.last_user, r.system) for r in server.requests]
    server.reset()
    code, output = build(server, workspace, "-p", "writer", "--max-cost", "5", "--concurrency", "2")
    assert code == 0, output
    assert server.count() == FULL_BUILD_REQUESTS - first
    assert not set(answered_before) & {(r.last_user, r.system) for r in server.requests}
    assert len(read_jsonl(workspace / "out" / "pairs.jsonl")) == len(KEPT)


def test_an_interrupted_build_resumes_from_the_cache(server, workspace) -> None:
    server.latency = 0.2
    interrupted_at = 8

    finished = threading.Event()

    def interrupt_when_busy() -> None:
        while server.count() < interrupted_at:
            if finished.wait(0.01):
                return  # the build ended first: never signal a test that is no longer building
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, delivered to this process's main thread

    watcher = threading.Thread(target=interrupt_when_busy, daemon=True)
    watcher.start()
    try:
        code, output = build(server, workspace, "-p", "writer", "--concurrency", "2")
    finally:
        finished.set()
        watcher.join()
    assert code == 130, output
    assert "rerun the same command to resume" in output
    assert not (workspace / "out" / "pairs.jsonl").exists()
    sent_before = {r.last_user for r in server.requests}
    count_before = server.count()
    assert count_before < FULL_BUILD_REQUESTS

    server.reset()
    server.latency = 0.0
    code, output = build(server, workspace, "-p", "writer", "--concurrency", "2")
    assert code == 0, output
    repeated = sent_before & {r.last_user for r in server.requests}
    # Only calls still in flight at the interruption are sent again: 2 records at once, 2 calls each at most.
    assert len(repeated) <= 4
    assert server.count() == FULL_BUILD_REQUESTS - count_before + len(repeated)
    assert len(read_jsonl(workspace / "out" / "pairs.jsonl")) == len(KEPT)


def test_dry_run_and_cache_only_send_nothing(server, workspace) -> None:
    code, output = build(server, workspace, "-p", "writer", "--dry-run")
    assert code == 0, output
    assert server.count() == 0
    assert "Plan (nothing sent)" in output
    plan_row = next(line for line in output.splitlines() if line.startswith("writer"))
    # 5 calls per record are planned: stand-in answers let the later steps be estimated too.
    assert plan_row.split()[1:3] == [str(5 * len(REFS)), "0"]
    assert not (workspace / "out").exists()

    code, output = build(server, workspace, "-p", "writer", "--cache-only")
    assert code == 0, output
    assert server.count() == 0
    summary = json.loads((workspace / "out" / "build_summary.json").read_text())
    assert summary["counts"]["incomplete_reasons"] == {"skipped_cache": len(REFS)}


def test_api_errors_leave_records_incomplete_and_exit_1(server, workspace) -> None:
    server.inject("401")  # not retryable: the planner call of the only record fails at once
    code, output = build(server, workspace, "-p", "writer", "--subset", "art", "--limit", "1")
    assert code == 1, output
    assert "records incomplete" in output
    (row,) = read_jsonl(workspace / "out" / "incomplete.jsonl")
    assert row["reason"] == "api_error" and row["step"] == "planner" and "HTTP 401" in row["error"]
    assert server.count() == 1


def test_usage_errors(server, workspace) -> None:
    code, output = build(server, workspace)
    assert code == 2 and "--chosen-provider: no provider for this step" in output
    code, output = build(server, workspace, "-p", "writer", "--subset", "music")
    assert code == 2 and "--subset 'music': not in this dataset" in output
    result = CliRunner().invoke(main, ["build", "--out", "x", "annotate", str(workspace)])
    assert result.exit_code == 2 and "belong to `prbj build` itself" in result.output
    assert server.count() == 0
