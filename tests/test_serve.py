"""`prbj serve`: real HTTP on a loopback port; served scores must equal what `prbj judge` computes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import polars as pl
import pytest
from click.testing import CliRunner

from conftest import SUBSET_NAMES, make_record, write_jsonl
from prbj.cli import main
from prbj.data.loaders import load_dataset
from prbj.judges.baselines import EmbedProfileJudge, RandomJudge
from prbj.serve.server import parse_profile, serve

ROOT = Path(__file__).resolve().parents[1]


def _official_profile_string(profile: list[dict[str, str]]) -> str:
    """The profile as the official verl data preparation formats it into extra_info."""
    return "\n".join(f"Post {i} (Category: {p['category']}):\n{p['text']}" for i, p in enumerate(profile, 1))


def _records() -> list[dict[str, Any]]:
    records = [make_record(i, SUBSET_NAMES[(i - 1) % 3]) for i in range(1, 5)]
    # Vary the profiles so that scores differ between pairs, not only between answers.
    records[1]["profile"][0]["text"] = "Mirrorless autofocus and fast primes are all I care about."
    records[2]["profile"].append({"id": "x", "category": "music", "text": "Vinyl only, analog forever."})
    return records


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], pl.DataFrame]:
    """The records and the judgments `prbj judge -p bm25-profile` writes for them."""
    folder = tmp_path_factory.mktemp("judge")
    records = _records()
    dataset = write_jsonl(folder / "pairs.jsonl", records)
    args = ["judge", "--no-progress", "-p", "bm25-profile", "--dataset", str(dataset), "--out", str(folder)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    (run_dir,) = [p for p in folder.iterdir() if p.is_dir()]
    return records, pl.read_parquet(run_dir / "judgments.parquet")


class _Server:
    """`python -m prbj serve` in a subprocess on an ephemeral loopback port."""

    def __init__(self, *args: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "prbj", "serve", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout=60)
        if not line or "listening on" not in line[0]:
            self.process.kill()
            raise AssertionError(f"server did not start: {line} {self.process.stderr.read()}")
        self.banner = line[0]
        self.url = line[0].split("listening on ")[1].split()[0]

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=30)
        return self.process.returncode, out


async def _post(session: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    async with session.post(url, json=body) as response:
        return response.status, await response.json()


async def test_served_scores_equal_prbj_judge_scores(
    judged: tuple[list[dict[str, Any]], pl.DataFrame],
) -> None:
    records, judgments = judged
    server = _Server("-p", "bm25-profile")
    try:
        assert server.url.startswith("http://127.0.0.1:")
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{server.url}/health") as response:
                health = await response.json()
            assert health["status"] == "ok" and health["judge"] == "bm25-profile"
            assert health["context"] == "profile"

            expected: dict[tuple[str, str], float] = {}
            for row in judgments.iter_rows(named=True):
                expected[(row["pair_id"], "chosen")] = row["score_chosen"]
                expected[(row["pair_id"], "rejected")] = row["score_rejected"]

            # Single requests, with the profile as objects and as the official verl string.
            for record in records:
                for which in ("chosen", "rejected"):
                    for profile in (record["profile"], _official_profile_string(record["profile"])):
                        body = {
                            "response_text": record[which],
                            "query": record["question"],
                            "profile": profile,
                        }
                        status, answer = await _post(session, f"{server.url}/score", body)
                        assert status == 200, answer
                        assert answer["score"] == pytest.approx(expected[(record["id"], which)], rel=1e-12)

            # One batch holding every answer, interleaved across pairs.
            items = [
                {"response_text": r[which], "query": r["question"], "profile": r["profile"]}
                for which in ("rejected", "chosen")
                for r in records
            ]
            status, answer = await _post(session, f"{server.url}/score/batch", {"items": items})
            assert status == 200, answer
            want = [expected[(r["id"], which)] for which in ("rejected", "chosen") for r in records]
            assert answer["scores"] == pytest.approx(want, rel=1e-12)
            # Scores differ across answers: equality above is not equality of constants.
            assert len(set(answer["scores"])) > 2
    finally:
        code, out = server.stop()
    assert code == 0 and "stopped" in out


@pytest.fixture
async def in_process() -> AsyncIterator[tuple[str, asyncio.Event]]:
    """Serve a given judge in this event loop; yields a starter."""
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []

    async def start(judge: Any, concurrency: int = 4) -> str:
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        tasks.append(
            asyncio.create_task(
                serve(
                    judge,
                    host="127.0.0.1",
                    port=0,
                    concurrency=concurrency,
                    on_ready=ready.set_result,
                    stop=stop,
                )
            )
        )
        return await asyncio.wait_for(ready, 30)

    yield start  # type: ignore[misc]
    stop.set()
    await asyncio.gather(*tasks)


async def test_embed_judge_and_many_concurrent_requests(in_process: Any, small_dataset: Path) -> None:
    judge = EmbedProfileJudge()
    url = await in_process(judge, concurrency=3)
    pairs = load_dataset(str(small_dataset)).pairs
    expected = []
    bodies = []
    for pair in pairs:
        chosen, rejected = await judge.score(pair.view("profile"), [pair.chosen, pair.rejected])
        for text, score in ((pair.chosen, chosen), (pair.rejected, rejected)):
            profile = [{"id": p.id, "category": p.category, "text": p.text} for p in pair.profile]
            bodies.append({"response_text": text, "query": pair.question, "profile": profile})
            expected.append(score)
    async with aiohttp.ClientSession() as session:
        # 5 copies of every request in flight at once, more than the judge concurrency of 3.
        answers = await asyncio.gather(*(_post(session, f"{url}/score", b) for b in bodies * 5))
    assert all(status == 200 for status, _ in answers)
    assert [a["score"] for _, a in answers] == pytest.approx(expected * 5)


async def test_random_judge_matches_when_the_pair_id_is_given(in_process: Any, small_dataset: Path) -> None:
    judge = RandomJudge(seed=42)
    url = await in_process(judge)
    pair = load_dataset(str(small_dataset)).pairs[0]
    chosen, _ = await judge.score(pair.view("none"), [pair.chosen, pair.rejected])
    body = {"response_text": pair.chosen, "query": pair.question, "profile": [], "pair_id": pair.id}
    async with aiohttp.ClientSession() as session:
        status, answer = await _post(session, f"{url}/score", body)
    assert status == 200 and answer["score"] == chosen


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/score", {"query": "q", "profile": []}, "field 'response_text': missing"),
        ("/score", {"response_text": 3, "query": "q"}, "field 'response_text': expected a string, got int"),
        (
            "/score",
            {"response_text": "a", "profile": [{"category": "c"}]},
            "field 'profile[0].text': missing",
        ),
        ("/score", {"response_text": "a", "profile": 7}, "field 'profile': expected a list or a string"),
        ("/score", [1, 2], "body: expected a JSON object"),
        (
            "/score/batch",
            {"items": [{"response_text": "a", "query": "q"}, {"query": "q"}]},
            "field 'items[1].response_text'",
        ),
        ("/score/batch", {"answers": []}, "field 'items'"),
    ],
)
async def test_malformed_requests_are_400_naming_the_field(
    in_process: Any, path: str, body: Any, message: str
) -> None:
    url = await in_process(RandomJudge())
    async with aiohttp.ClientSession() as session:
        status, answer = await _post(session, f"{url}{path}", body)
        async with session.post(
            f"{url}/score", data=b"{not json", headers={"Content-Type": "application/json"}
        ) as response:
            assert response.status == 400 and "invalid JSON" in (await response.json())["error"]
    assert status == 400
    assert message in answer["error"]


def test_profile_shapes() -> None:
    official = _official_profile_string(
        [
            {"category": "photo", "text": "Film on a budget.\nSecond line."},
            {"category": "food", "text": "Sourdough."},
        ]
    )
    posts = parse_profile(official)
    assert [(p.category, p.text) for p in posts] == [
        ("photo", "Film on a budget.\nSecond line."),
        ("food", "Sourdough."),
    ]
    assert [p.text for p in parse_profile(["one", "two"])] == ["one", "two"]
    assert [p.text for p in parse_profile("free text about me")] == ["free text about me"]
    assert parse_profile("") == () and parse_profile(None) == ()


def test_serve_refuses_an_oracle_judge_and_a_busy_port_and_names_the_context() -> None:
    from prbj.errors import ConfigError
    from prbj.serve.server import served_context

    class Oracle(RandomJudge):
        context = "oracle"

    with pytest.raises(ConfigError, match="oracle"):
        served_context(Oracle())

    blocker = _Server("-p", "length")
    try:
        assert "judge length (context none)" in blocker.banner
        port = blocker.url.rsplit(":", 1)[1]
        result = CliRunner().invoke(main, ["serve", "-p", "length", "--port", port])
        assert result.exit_code == 2 and "cannot listen" in result.output
    finally:
        blocker.stop()


def test_cli_rejects_unknown_judge() -> None:
    result = CliRunner().invoke(main, ["serve", "-p", "nope", "--port", "0"])
    assert result.exit_code == 2 and "unknown judge" in result.output


class _Broken(RandomJudge):
    name = "broken"

    async def score(self, view: Any, answers: Any) -> list[float]:
        if answers[0] == "nan":
            return [float("nan")]
        raise RuntimeError("model fell over")


async def test_judge_failures_are_500_never_a_score(in_process: Any) -> None:
    url = await in_process(_Broken())
    async with aiohttp.ClientSession() as session:
        status, answer = await _post(session, f"{url}/score", {"response_text": "x", "query": "q"})
        assert status == 500 and "model fell over" in answer["error"]
        status, answer = await _post(session, f"{url}/score", {"response_text": "nan", "query": "q"})
        assert status == 500 and "non-finite" in answer["error"]


async def test_openrlhf_endpoint_splits_prompt_and_reads_labels(in_process: Any, small_dataset: Path) -> None:
    judge = EmbedProfileJudge()
    url = await in_process(judge)
    pair = load_dataset(str(small_dataset)).pairs[0]
    chosen, rejected = await judge.score(pair.view("profile"), [pair.chosen, pair.rejected])
    profile = [{"id": p.id, "category": p.category, "text": p.text} for p in pair.profile]
    prompt = f"<|user|>{pair.question}<|assistant|>"
    label = json.dumps({"query": pair.question, "profile": profile})
    body = {
        "query": [prompt + pair.chosen, prompt + pair.rejected],
        "prompts": [prompt, prompt],
        "labels": [label, json.loads(label)],  # a JSON string or an object
    }
    async with aiohttp.ClientSession() as session:
        status, answer = await _post(session, f"{url}/get_reward?scale=0.1", body)
        assert status == 200, answer
        assert answer["rewards"] == pytest.approx([chosen / 10, rejected / 10])
        status, answer = await _post(session, f"{url}/get_reward", {**body, "labels": ["x", "y"]})
        assert status == 400 and "labels[0]" in answer["error"]
        status, answer = await _post(session, f"{url}/get_reward", {"query": ["a"], "prompts": ["a"]})
        assert status == 400 and "--label_key" in answer["error"]
        status, answer = await _post(session, f"{url}/score?scale=ten", {"response_text": "a"})
        assert status == 400 and "scale" in answer["error"]


async def test_verl_and_trl_reward_functions_call_the_server(
    in_process: Any, small_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prbj.serve import client as reward_client

    judge = EmbedProfileJudge()
    url = await in_process(judge)
    pairs = load_dataset(str(small_dataset)).pairs[:2]
    expected = []
    for pair in pairs:
        expected += await judge.score(pair.view("profile"), [pair.chosen, pair.rejected])
    texts = [text for pair in pairs for text in (pair.chosen, pair.rejected)]
    infos = [
        {
            "query": pair.question,
            "profile": _official_profile_string(
                [{"category": p.category, "text": p.text} for p in pair.profile]
            ),
        }
        for pair in pairs
        for _ in range(2)
    ]
    monkeypatch.setenv(reward_client.URL_ENV, url)
    monkeypatch.delenv(reward_client.DIVISOR_ENV, raising=False)
    # verl, per sample and batched: the official scaling, reward = score / 10.
    single = await asyncio.to_thread(
        lambda: [
            reward_client.compute_score("pr", t, None, info) for t, info in zip(texts, infos, strict=True)
        ]
    )
    assert single == pytest.approx([s / 10 for s in expected])
    monkeypatch.setenv(reward_client.DIVISOR_ENV, "1")
    batch = await asyncio.to_thread(reward_client.compute_score_batch, ["pr"] * 4, texts, [None] * 4, infos)
    assert batch == pytest.approx(expected)
    # TRL: conversational completions, extra dataset columns as keyword lists.
    reward = reward_client.trl_reward_function(url, divisor=2.0)
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    queries = [info["query"] for info in infos]
    profiles = [info["profile"] for info in infos]
    trl = await asyncio.to_thread(reward, ["p"] * 4, completions, query=queries, profile=profiles)
    assert trl == pytest.approx([s / 2 for s in expected])


async def test_reward_client_raises_instead_of_inventing_a_reward(in_process: Any) -> None:
    from prbj.serve.client import RewardClient, RewardServerError

    url = await in_process(_Broken())
    client = RewardClient(url, retries=1, backoff=0.01)
    with pytest.raises(RewardServerError, match="model fell over"):
        await asyncio.to_thread(client.score, "x", "q")
    with pytest.raises(RewardServerError, match="400"):
        await asyncio.to_thread(client.score_batch, [{"query": "no answer"}])
    dead = RewardClient("http://127.0.0.1:9", retries=1, backoff=0.01)
    with pytest.raises(RewardServerError, match="2 attempts"):
        await asyncio.to_thread(dead.score, "x", "q")
