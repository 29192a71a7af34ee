"""Issue 22 (items 7, 8): the provider batch APIs (tests/loopback_batches.py) through the real clients (LiteLLM's
OpenAI batch functions, the Anthropic and Google SDKs): a line cut at its output cap or refused ends exactly as
the live reply would, and a provider refusing to create or show a job ends the run in one line, exit 1, with the
ledger intact and nothing bought twice on the rerun."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner, Result
from loopback import ProviderServer
from test_conformance import kind, pair_of, right_or_blocked

from prbj.cli import main

PROFILES = {"openai": "gpt-5.1", "anthropic": "claude-sonnet-4-5", "gemini": "gemini-3-flash"}
KEY = "sk-batch-conformance-0123456789"


@pytest.fixture(scope="module")
def server():
    with ProviderServer() as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server: ProviderServer, monkeypatch: pytest.MonkeyPatch):
    server.reset()
    server.reply = right_or_blocked
    server.reasoning = lambda request: 100_000 if kind(pair_of(request).id) == "reasoning" else 0
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(variable, KEY)
    monkeypatch.setenv("PRBJ_BATCH_POLL_SECONDS", "0.05")


def judge(server: ProviderServer, tmp_path: Path, family: str, name: str, *args: str) -> Result:
    command = ["judge", "--no-progress", "-p", PROFILES[family], "--api-base", server.url, "--limit", "4"]
    command += ["--cache-dir", str(tmp_path / f"cache-{name}"), "--out", str(tmp_path / f"out-{name}"), *args]
    return CliRunner().invoke(main, [*command, "--context", "none"])


def outcomes(tmp_path: Path, name: str) -> dict[str, tuple[str, str | None]]:
    run = max((tmp_path / f"out-{name}").iterdir(), key=lambda p: p.stat().st_mtime_ns)
    frame = pl.read_parquet(run / "judgments.parquet")
    return {pair: (status, cause) for pair, status, cause in frame.select("pair_id", "status", "cause").iter_rows()}


def ledger(tmp_path: Path, name: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((tmp_path / f"cache-{name}" / "batches").glob("*.json"))]


@pytest.mark.parametrize("family", list(PROFILES))
def test_batch_lines_cut_off_or_refused_end_as_the_live_replies(server, tmp_path, family) -> None:
    live = judge(server, tmp_path, family, "live")
    bought = judge(server, tmp_path, family, "batch", "--batch")
    assert bought.exit_code == 0, bought.output
    assert server.batches.submitted  # the batch run bought its answers in a job
    expected = outcomes(tmp_path, "live")
    assert live.exit_code == 0 and {kind(p) for p in expected} == {"reasoning", "blocked", "answer"}
    assert outcomes(tmp_path, "batch") == expected
    assert {expected[p][0] for p in expected if kind(p) == "reasoning"} == {"truncated"}
    assert {expected[p][0] for p in expected if kind(p) == "blocked"} == {"refused"}
    # Stored with their status: a --cache-only rerun of the batch-bought cache sends nothing, says the same.
    sent = server.count()
    replay = judge(server, tmp_path, family, "batch", "--cache-only")
    assert replay.exit_code == 0 and server.count() == sent
    assert outcomes(tmp_path, "batch") == expected


@pytest.mark.parametrize("family", list(PROFILES))
@pytest.mark.parametrize(
    ("refusal", "cause", "state"),
    [("bad key at create", "401 Unauthorized", "submitting"), ("server error at poll", "500", "submitted")],
)
def test_a_refused_create_or_poll_is_one_line_and_exit_1(server, tmp_path, family, refusal, cause, state) -> None:
    server.reply = lambda request: "Result: A"
    server.reasoning = 0
    if refusal == "bad key at create":
        server.batches.keys = {"the-key-the-provider-knows"}
    else:
        server.batches.refuse = {"poll": 500}
    result = judge(server, tmp_path, family, "run", "--batch")
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert line.startswith("error: --batch: ") and f"({cause}" in line and "nothing is bought twice" in line
    assert KEY not in result.output
    records = ledger(tmp_path, "run")
    assert [r["state"] for r in records] == [state]
    # The cause fixed, the same command finishes the run: a submitted job is polled, not bought again.
    server.batches.keys, server.batches.refuse = None, {}
    again = judge(server, tmp_path, family, "run", "--batch")
    assert again.exit_code == 0, again.output
    assert server.batches.twice() == []
    assert {status for status, _ in outcomes(tmp_path, "run").values()} == {"ok"}
