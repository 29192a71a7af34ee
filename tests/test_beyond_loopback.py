"""Beyond accuracy end to end: the real `prbj judge` against a loopback provider scripted as a judge whose
behaviour is known in advance, so profile reliance, self-consistency and juries have exact expected values."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from loopback import ChatRequest, ProviderServer
from test_generative import (  # the harness and data of the LLM judge tests
    Harness,
    chosen_letter,
    knowing_judge,
    other,
    pair_index,
    records,
)

from prbj.llm.cache import ResponseCache

RIGHT = {1, 2, 4, 5, 7, 8, 10}  # 7 of 10


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


@pytest.fixture
def harness(tmp_path: Path, server: ProviderServer) -> Harness:
    return Harness(tmp_path, server)


OWNER = "PROFILE-OWNER-{:03d}"


def own_profiles(n: int) -> list[dict[str, Any]]:
    """The records of test_generative, each user with a profile of their own that names them."""
    out = records(n)
    for i, record in enumerate(out, start=1):
        record["profile"] = [
            {
                "id": f"t-{i:03d}-p1",
                "category": "photo",
                "text": f"{OWNER.format(i)} shoots film on a budget.",
            },
            {
                "id": f"t-{i:03d}-p2",
                "category": "photo",
                "text": f"{OWNER.format(i)} develops rolls at home.",
            },
        ]
    return out


def profile_user(request: ChatRequest) -> str:
    """Right on the RIGHT pairs when shown the pair's own user's profile; wrong whenever the profile is another
    user's or missing: a judge that uses the profile."""
    i = pair_index(request.prompt)
    letter = chosen_letter(request)
    verdict = letter if OWNER.format(i) in request.prompt and i in RIGHT else other(letter)
    return f"Result: {verdict}"


def summary(run_dir: Path | None) -> dict[str, Any]:
    assert run_dir is not None
    return json.loads((run_dir / "summary.json").read_text())


CONTEXTS = ("--context", "profile", "--context", "swapped-profile", "--context", "none")


def test_a_judge_that_ignores_the_profile_has_reliance_zero(harness: Harness, server: ProviderServer) -> None:
    server.reply = knowing_judge(RIGHT)
    run = harness.judge(harness.dataset(own_profiles(10)), *CONTEXTS)
    assert run.exit_code == 0, run.output
    (row,) = summary(run.run_dir)["profile_reliance"]
    assert row["judge"] == "gemini-3-flash" and row["n"] == 10
    assert row["accuracy_profile"] == row["accuracy_swapped"] == row["accuracy_none"] == pytest.approx(0.7)
    assert row["reliance"] == 0.0
    assert row["ci_low"] <= 0.0 <= row["ci_high"]
    # The swapped prompts showed another user of the same subset, never the pair's own, never the rubric.
    for request in server.requests:
        i = pair_index(request.prompt)
        assert "SECRET" not in request.prompt
        shown = {int(m) for m in re.findall(r"PROFILE-OWNER-(\d{3})", request.prompt)}
        assert len(shown) <= 1
        if shown and shown != {i}:
            (donor,) = shown
            assert (donor - 1) % 3 == (i - 1) % 3  # same subset
    report = (run.run_dir / "report.md").read_text()  # type: ignore[operator]
    assert "## Profile reliance" in report
    assert "Profile reliance" in (run.run_dir / "report.html").read_text()  # type: ignore[operator]


def test_a_judge_that_uses_the_profile_shows_the_scripted_drop(
    harness: Harness, server: ProviderServer
) -> None:
    server.reply = profile_user
    run = harness.judge(harness.dataset(own_profiles(10)), *CONTEXTS)
    assert run.exit_code == 0, run.output
    (row,) = summary(run.run_dir)["profile_reliance"]
    assert (row["accuracy_profile"], row["accuracy_swapped"], row["accuracy_none"]) == (0.7, 0.0, 0.0)
    assert row["reliance"] == pytest.approx(0.7)
    assert 0.0 < row["ci_low"] <= 0.7 <= row["ci_high"]
    swapped = run.judgments.filter(pl.col("context") == "swapped-profile")
    assert swapped.height == 10 and not swapped["correct"].any()


def test_k_samples_make_k_cache_entries_and_the_documented_agreement(
    harness: Harness, server: ProviderServer, tmp_path: Path
) -> None:
    # Per pair, the judge is right on its first two answers and wrong on the third on pairs 1-3; right on all
    # three elsewhere: agreement 7/10, majority-vote accuracy 10/10 whatever order the samples arrive in.
    seen: Counter[int] = Counter()

    def wavering(request: ChatRequest) -> str:
        i = pair_index(request.prompt)
        seen[i] += 1
        letter = chosen_letter(request)
        return f"Result: {other(letter) if i <= 3 and seen[i] == 3 else letter}"

    server.reply = wavering
    dataset = harness.dataset(own_profiles(10))
    run = harness.judge(dataset, "--context", "profile", "--samples", "3")
    assert run.exit_code == 0, run.output
    assert server.count() == 30
    assert len(list(ResponseCache(harness.cache).keys())) == 30
    (row,) = summary(run.run_dir)["self_consistency"]
    assert (row["samples"], row["n"], row["n_all_answered"]) == (3, 10, 10)
    assert row["agreement"] == pytest.approx(0.7)
    assert row["majority_accuracy"] == 1.0
    verdicts = run.judgments.sort("pair_id")["sample_verdicts"].to_list()
    assert all(len(v.split("|")) == 3 for v in verdicts)
    assert "## Self-consistency" in (run.run_dir / "report.md").read_text()  # type: ignore[operator]
    # K = 1 reuses sample 0 from the cache: nothing new is sent, and summary.json has no self_consistency.
    again = harness.judge(dataset, "--context", "profile")
    assert server.count() == 30
    assert "self_consistency" not in summary(again.run_dir)


def test_jury_verdict_equals_the_majority_by_hand(harness: Harness, server: ProviderServer) -> None:
    right = {"gemini": {1, 2, 3, 4, 5}, "openai": {1, 2, 6, 7, 8}, "anthropic": {3, 6, 9}}

    def by_family(request: ChatRequest) -> str:
        letter = chosen_letter(request)
        return f"Result: {letter if pair_index(request.prompt) in right[request.family] else other(letter)}"

    server.reply = by_family
    dataset = harness.dataset(own_profiles(10))
    args = ["--context", "none", "-p", "gpt-5.1", "-p", "claude-sonnet-4-6"]
    run = harness.judge(
        dataset, *args, "--jury", "trio=gemini-3-flash,gpt-5.1,claude-sonnet-4-6", "--compare"
    )
    assert run.exit_code == 0, run.output
    majority = {i for i in range(1, 11) if sum(i in s for s in right.values()) >= 2}
    jury = run.judgments.filter(pl.col("judge") == "trio").sort("pair_id")
    assert jury["correct"].to_list() == [i in majority for i in range(1, 11)]
    assert server.count() == 30  # the jury asked nothing
    document = summary(run.run_dir)
    (stats,) = document["juries"]
    assert (stats["name"], stats["context"], stats["n"], stats["ties"]) == ("trio", "none", 10, 0)
    overall = next(r for r in document["results"] if r["judge"] == "trio" and r["subset"] == "all")
    assert overall["accuracy"] == pytest.approx(len(majority) / 10)
    assert len(document["comparisons"]["pairs"]) == 6  # four entries, every two compared
    html = (run.run_dir / "report.html").read_text()  # type: ignore[operator]
    assert 'id="table-juries"' in html and 'id="figure-comparison-matrix"' in html
    # A member that did not run is refused before any call.
    before = server.count()
    bad = harness.judge(dataset, "--context", "none", "--jury", "duo=gemini-3-flash,gpt-5.1")
    assert bad.exit_code == 2 and server.count() == before


def test_temperature_reaches_the_provider_and_keys_the_cache(
    harness: Harness, server: ProviderServer
) -> None:
    server.reply = lambda request: f"Result: {chosen_letter(request)}"
    dataset = harness.dataset(own_profiles(4))
    first = harness.judge(dataset, "--context", "profile", "--samples", "2", "--temperature", "0.7")
    assert first.exit_code == 0, first.output
    assert server.count() == 8
    assert {_temperature(r) for r in server.requests} == {0.7}
    # Answers at the profile's own temperature are other answers: asked anew, without a temperature override.
    server.reset()
    default = harness.judge(dataset, "--context", "profile")
    assert default.exit_code == 0, default.output
    assert server.count() == 4
    assert all(_temperature(r) != 0.7 for r in server.requests)
    # The same temperature again is all cache.
    server.reset()
    again = harness.judge(dataset, "--context", "profile", "--samples", "2", "--temperature", "0.7")
    assert again.exit_code == 0 and server.count() == 0


def _temperature(request: ChatRequest) -> object:
    # Gemini carries it in generationConfig; the OpenAI and Anthropic formats at the top of the body.
    return request.body.get("generationConfig", {}).get("temperature", request.body.get("temperature"))
