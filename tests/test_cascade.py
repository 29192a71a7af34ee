"""Cascades against loopback providers: a cheap judge whose probabilities are known (Gemini shape, from
test_confidence) hands the pairs it is unsure of to a strong judge (OpenAI shape) that is always right."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from loopback import ChatRequest, ProviderServer
from test_confidence import chosen_probability, unsure_judge, verdict_logprobs
from test_generative import Harness, chosen_letter, pair_index, records

from prbj.analysis.cascade import CascadePlan, cascade_rows
from prbj.analysis.confidence import with_confidence
from prbj.analysis.position import position_fairness

THRESHOLD = 0.8
CASCADE = "cascade(gemini-3-flash→gpt-5.1)"


def reply(request: ChatRequest) -> str:
    if request.family == "openai":
        return f"The second judge is sure.\nResult: {chosen_letter(request)}"
    return unsure_judge(request)


@pytest.fixture
def server() -> Any:
    with ProviderServer(reply=reply, logprobs=verdict_logprobs) as running:
        yield running


@pytest.fixture
def harness(tmp_path: Path, server: ProviderServer) -> Harness:
    return Harness(tmp_path, server)


def test_a_cascade_asks_the_strong_judge_only_below_the_threshold(
    harness: Harness, server: ProviderServer
) -> None:
    run = harness.judge(
        harness.dataset(records(24)),
        "--context",
        "none",
        "--confidence",
        "logprobs",
        "--escalate-to",
        "gpt-5.1",
        "--escalate-below",
        str(THRESHOLD),
        provider="gemini-3-flash",
    )
    assert run.exit_code == 0, run.output
    cheap = [r for r in server.requests if r.family == "gemini"]
    strong = [r for r in server.requests if r.family == "openai"]
    # The cheap judge's confidence is max(q, 1 − q) for the order it saw: exactly those below go on.
    unsure = {
        pair_index(r.prompt)
        for r in cheap
        if max(chosen_probability(r), 1 - chosen_probability(r)) < THRESHOLD
    }
    assert len(cheap) == 24 and unsure
    assert sorted(pair_index(r.prompt) for r in strong) == sorted(unsure)

    frame = run.judgments
    first = frame.filter(pl.col("judge") == "gemini-3-flash").sort("pair_id")
    second = frame.filter(pl.col("judge") == "gpt-5.1 (escalated)").sort("pair_id")
    cascade = frame.filter(pl.col("judge") == CASCADE).sort("pair_id")
    assert second.height == len(unsure) and cascade.height == 24
    # Each pair is decided by the stage the threshold says, with that stage's verdict.
    by_second = dict(zip(second["pair_id"], second["correct"], strict=True))
    for pid, stage, correct, confidence in zip(
        cascade["pair_id"], cascade["cascade_stage"], cascade["correct"], first["confidence"], strict=True
    ):
        assert stage == (2 if confidence < THRESHOLD else 1)
        assert correct == (
            by_second[pid] if stage == 2 else first.filter(pl.col("pair_id") == pid)["correct"][0]
        )
    # Its cost is both stages' cost on the same pairs.
    first_cost = dict(zip(first["pair_id"], first["cost_usd"], strict=True))
    second_cost = dict(zip(second["pair_id"], second["cost_usd"], strict=True))
    for pid, cost in zip(cascade["pair_id"], cascade["cost_usd"], strict=True):
        assert cost == pytest.approx(first_cost[pid] + second_cost.get(pid, 0.0), abs=1e-15)
    assert first["cost_usd"].sum() > 0 and second["cost_usd"].sum() > 0

    summary = json.loads((run.run_dir / "summary.json").read_text())  # type: ignore[operator]
    (stats,) = summary["cascades"]
    assert stats["name"] == CASCADE and stats["escalated"] == len(unsure)
    assert stats["share_escalated"] == pytest.approx(len(unsure) / 24)
    assert stats["accuracy"] == pytest.approx(cascade["correct"].mean())
    assert stats["coverage_first"] + stats["coverage_second"] == pytest.approx(1.0)
    assert stats["cost_usd"] == pytest.approx(first["cost_usd"].sum() + second["cost_usd"].sum())
    # The strong judge did not judge every pair here: its cost alone is estimated from the escalated ones.
    assert stats["second_alone_cost_estimated"] is True
    assert stats["second_alone_cost_per_100"] == pytest.approx(100 * second["original_cost_usd"].mean())
    # The cascade is a judge of its own on the leaderboard, and a point of the cost chart.
    assert any(r["judge"] == CASCADE and r["subset"] == "all" for r in summary["results"])
    html = (run.run_dir / "report.html").read_text()  # type: ignore[operator]
    assert "Accuracy against cost" in html and "Cascades" in html


def test_a_strong_judge_that_ran_on_every_pair_is_measured_not_estimated(
    harness: Harness, server: ProviderServer
) -> None:
    dataset = harness.dataset(records(12))
    args = ["--context", "none", "--confidence", "logprobs", "--escalate-to", "gpt-5.1"]
    run = harness.judge(
        dataset, *args, "--escalate-below", str(THRESHOLD), "-p", "gpt-5.1", provider="gemini-3-flash"
    )
    assert run.exit_code == 0, run.output
    # One call per pair for each judge: the strong judge's own judgments serve the cascade.
    assert len([r for r in server.requests if r.family == "openai"]) == 12
    summary = json.loads((run.run_dir / "summary.json").read_text())  # type: ignore[operator]
    (stats,) = summary["cascades"]
    assert stats["second_alone_cost_estimated"] is False
    assert stats["second_alone_accuracy"] == 1.0
    assert "gpt-5.1 (escalated)" not in set(run.judgments["judge"])


def test_a_pair_the_strong_judge_decided_carries_its_per_order_verdicts() -> None:
    """Issue 31: a cascade row kept the cheap judge's per-order verdicts beside the strong judge's verdict, so
    four pairs the strong judge decided consistently and rightly counted as inconsistent, primacy-preferred
    pairs (position consistency 0, preference fairness −1)."""
    pairs = [f"p{i}" for i in range(4)]

    def rows(judge: str, in_a: str, in_b: str, verdict: str, reply: str) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "pair_id": pairs,
                "subset": ["s"] * 4,
                "judge": [judge] * 4,
                "context": ["none"] * 4,
                "status": ["ok"] * 4,
                "verdict": [verdict] * 4,
                "correct": [verdict == "chosen"] * 4,
                "tie": [False] * 4,
                "chosen_position": ["both"] * 4,
                "verdict_chosen_a": [in_a] * 4,
                "verdict_chosen_b": [in_b] * 4,
                "reply": [reply] * 4,
                "cost_usd": [0.001] * 4,
            }
        )

    # The cheap judge said A in both orders (inconsistent: confidence 0.5); the strong one picked the chosen
    # answer in both.
    frame = with_confidence(
        pl.concat(
            [
                rows("cheap", "chosen", "rejected", "inconsistent", "A, then A"),
                rows("strong (escalated)", "chosen", "chosen", "chosen", "the chosen one twice"),
            ]
        )
    )
    plan = CascadePlan("cheap", "strong", "strong (escalated)", "none", 0.8, second_ran_alone=False)
    cascade, stats = cascade_rows(frame, plan)
    assert cascade["cascade_stage"].to_list() == [2] * 4 and stats.accuracy == 1.0
    assert cascade["verdict_chosen_a"].to_list() == ["chosen"] * 4
    assert cascade["verdict_chosen_b"].to_list() == ["chosen"] * 4
    assert cascade["reply"].to_list() == ["the chosen one twice"] * 4
    assert cascade["confidence"].to_list() == [1.0] * 4
    assert cascade["cost_usd"].to_list() == pytest.approx([0.002] * 4)
    (row,) = [r for r in position_fairness(cascade) if r.judge.startswith("cascade")]
    assert (row.position_consistency, row.preference_fairness, row.primacy) == (1.0, 0.0, 0)
