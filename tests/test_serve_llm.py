"""`prbj serve` with an LLM judge: scores go through the gateway to the loopback provider, share the cache with
`prbj judge`, and respect --max-cost; requests are counted at the provider."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from loopback import ChatRequest, ProviderServer

from prbj.cli import main
from prbj.data import load_dataset

KEY = "gem-serve-test-key"


def score_reply(request: ChatRequest) -> str:
    answer = request.last_user.split("## Answer\n", 1)[1].split("\n\nHow well", 1)[0]
    return f"Reasoning.\nScore: {1 + len(answer.split()) % 10}"


@pytest.fixture(scope="module")
def provider() -> Iterator[ProviderServer]:
    with ProviderServer(reply=score_reply) as running:
        yield running


def _get(url: str) -> tuple[int, Any]:
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.status, json.loads(response.read())


def _post(url: str, body: Any) -> tuple[int, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@contextmanager
def serving(monkeypatch: pytest.MonkeyPatch, *args: str) -> Iterator[str]:
    """Run the real `prbj serve` command on a thread of this process (LiteLLM is imported once per test run,
    not once per server); yields its URL and stops it like Ctrl-C would."""
    import prbj.serve.server

    real_serve = prbj.serve.server.serve
    state: dict[str, Any] = {}
    ready = threading.Event()

    async def serve_until_told(judge: Any, **kwargs: Any) -> None:
        state["loop"], state["stop"] = asyncio.get_running_loop(), asyncio.Event()
        announce = kwargs.pop("on_ready")

        def on_ready(url: str) -> None:
            announce(url)
            state["url"] = url
            ready.set()

        await real_serve(judge, **kwargs, on_ready=on_ready, stop=state["stop"])

    def run() -> None:
        try:
            main.main(args=["serve", "--port", "0", *args], prog_name="prbj", standalone_mode=False)
        except BaseException as err:  # reported to the test below
            state["error"] = err
        finally:
            ready.set()

    monkeypatch.setattr(prbj.serve.server, "serve", serve_until_told)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(120)
    if "url" not in state:
        raise AssertionError(f"server did not start: {state.get('error')!r}")
    try:
        yield state["url"]
    finally:
        state["loop"].call_soon_threadsafe(state["stop"].set)
        thread.join(60)
    assert "error" not in state, state.get("error")


def test_served_llm_scores_equal_prbj_judge_and_come_from_its_cache(
    provider: ProviderServer,
    small_dataset: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    common = ["-p", "gemini-3-flash", "--api-base", provider.url, "--cache-dir", str(cache)]
    provider.reset()
    judged = CliRunner().invoke(
        main,
        [
            "judge",
            "--no-progress",
            "--mode",
            "pointwise",
            "--dataset",
            str(small_dataset),
            "--personal-data",
            "any",
            "--out",
            str(tmp_path / "out"),
            *common,
        ],
        catch_exceptions=False,
    )
    assert judged.exit_code == 0, judged.output
    pairs = load_dataset(str(small_dataset)).pairs
    assert provider.count() == 2 * len(pairs)
    (run_dir,) = list((tmp_path / "out").iterdir())
    judgments = pl.read_parquet(run_dir / "judgments.parquet")
    expected = {
        (row["pair_id"], which): row[f"score_{which}"]
        for row in judgments.iter_rows(named=True)
        for which in ("chosen", "rejected")
    }
    assert len(set(expected.values())) > 1  # different answers get different scores

    # A budget far below one call's worst case: only what the cache holds can be served.
    with serving(monkeypatch, *common, "--max-cost", "0.0001") as url:
        provider.reset()
        items = []
        for pair in pairs:
            profile = [{"id": p.id, "category": p.category, "text": p.text} for p in pair.profile]
            for which in ("chosen", "rejected"):
                body = {"response_text": getattr(pair, which), "query": pair.question, "profile": profile}
                status, answer = _post(f"{url}/score", body)
                assert status == 200, answer
                assert answer["score"] == expected[(pair.id, which)]
                items.append(body)
        status, answer = _post(f"{url}/score/batch", {"items": items})
        assert status == 200
        assert answer["scores"] == [expected[(p.id, w)] for p in pairs for w in ("chosen", "rejected")]
        _, health = _get(f"{url}/health")
        assert health["judge"] == "gemini-3-flash:pointwise" and health["context"] == "profile"
        assert provider.count() == 0  # every score came from the cache prbj judge filled

        status, answer = _post(
            f"{url}/score", {**items[0], "response_text": "An answer nobody has scored yet."}
        )
        assert status == 500 and "max-cost" in answer["error"]
        assert provider.count() == 0  # refused before sending: the budget holds
    out = capsys.readouterr().out
    assert "listening on" in out and "Model calls" in out and "stopped" in out


def test_serve_llm_needs_its_key_and_refuses_a_dry_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    args = ["serve", "-p", "gemini-3-flash", "--port", "0", "--cache-dir", str(tmp_path / "cache")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "GEMINI_API_KEY" in result.output
    result = CliRunner().invoke(main, [*args, "--dry-run"])
    assert result.exit_code == 2 and "--dry-run" in result.output


def test_a_cut_off_or_refused_reply_is_never_served_as_a_reward(
    provider: ProviderServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 22: a reward read from a reply cut at its cap is served when the visible text holds the score; a
    reply whose cap went to hidden reasoning, or a refusal, is an error naming its status, never a number."""
    from loopback import LENGTH, Reply

    def reply(request: ChatRequest) -> str | Reply:
        answer = request.last_user.split("## Answer\n", 1)[1].split("\n\nHow well", 1)[0]
        if "blocked" in answer:
            return Reply(blocked="SAFETY")
        if "long-winded" in answer:
            return Reply("", LENGTH, reasoning_tokens=4096)
        return Reply("Fits the user.\nScore: 7 and then more", LENGTH)

    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    provider.reset()
    monkeypatch.setattr(provider, "reply", reply)
    common = ["-p", "gemini-3-flash", "--api-base", provider.url, "--cache-dir", str(tmp_path / "cache")]
    with serving(monkeypatch, *common) as url:
        body = {"query": "Which camera?", "profile": []}
        assert _post(f"{url}/score", {**body, "response_text": "A cut answer."}) == (200, {"score": 7.0})
        status, answer = _post(f"{url}/score", {**body, "response_text": "A long-winded answer."})
        assert status == 500 and "truncated: the reply reached its output cap" in answer["error"]
        status, answer = _post(f"{url}/score", {**body, "response_text": "A blocked answer."})
        assert (
            status == 500
            and "refused: the provider refused to answer (prompt blocked: SAFETY)" in answer["error"]
        )
