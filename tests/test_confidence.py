"""How sure is the judge: verdict-token log-probabilities through the real LiteLLM stack, the probability per
judgment, the calibration figures, and that a run asking for none of it is the run it always was.

The loopback judge knows, per pair, the probability q it gives the chosen answer; it writes the verdict that q
favours and returns log-probabilities in its provider's own wire shape (OpenAI `choices[].logprobs`, Gemini
`logprobsResult`) for the letters at the verdict position, the two letters sharing 99% of the mass with a third
token, so that prbj's normalisation over the two letters is what recovers q.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from loopback import ChatRequest, ProviderServer, TokenLogprobs, certain_tokens
from test_generative import Harness, chosen_letter, other, pair_index, records

from prbj.analysis.calibration import BIN_EDGES
from prbj.llm.cache import ResponseCache

# The chosen answer's probability per pair, in both orders (different on purpose, to see the mean of the two).
Q_A = {i: 0.05 + 0.9 * ((7 * i) % 19) / 18 for i in range(1, 31)}
Q_B = {i: min(0.97, max(0.03, Q_A[i] + 0.04 * (-1) ** i)) for i in range(1, 31)}
OTHER_MASS = 0.01  # a third token at the verdict position: the letters share 1 − this


def chosen_probability(request: ChatRequest) -> float:
    index = pair_index(request.prompt)
    return Q_A[index] if chosen_letter(request) == "A" else Q_B[index]


def unsure_judge(request: ChatRequest) -> str:
    """Writes the verdict its probability favours (so the verdict and the probability agree)."""
    letter = chosen_letter(request)
    verdict = letter if chosen_probability(request) >= 0.5 else other(letter)
    return f"Weighing both for this user.\nResult: {verdict}"


def verdict_logprobs(request: ChatRequest, text: str) -> TokenLogprobs:
    """Certain tokens everywhere but at the verdict letter, where A and B carry q and 1 − q of the letters' mass."""
    tokens = certain_tokens(request, text)
    letter = chosen_letter(request)
    q = chosen_probability(request)
    p_a = q if letter == "A" else 1.0 - q
    share = 1.0 - OTHER_MASS
    alternatives = sorted(
        [
            (" A", math.log(share * p_a)),
            (" B", math.log(share * (1.0 - p_a))),
            (" The", math.log(OTHER_MASS)),
        ],
        key=lambda item: -item[1],
    )
    token, _, _ = tokens[-1]
    assert token.strip() in "AB"
    tokens[-1] = (token, dict(alternatives)[token], alternatives)
    return tokens


@pytest.fixture
def server() -> Any:
    with ProviderServer(reply=unsure_judge, logprobs=verdict_logprobs) as running:
        yield running


@pytest.fixture
def harness(tmp_path: Path, server: ProviderServer) -> Harness:
    return Harness(tmp_path, server)


def direct_figures(confidence: np.ndarray, correct: np.ndarray, p_chosen: np.ndarray) -> dict[str, float]:
    """ECE, Brier and AUROC written out from their definitions, one judgment and one pair at a time; `correct`
    is 0.5 for a verdict that took no side (right in one half, wrong in the other)."""
    n = len(confidence)
    ece = 0.0
    for low, high in itertools.pairwise(BIN_EDGES):
        members = [
            i for i in range(n) if (low < confidence[i] <= high) or (low == 0.0 and confidence[i] == 0.0)
        ]
        if members:
            accuracy = sum(correct[i] for i in members) / len(members)
            mean = sum(confidence[i] for i in members) / len(members)
            ece += len(members) / n * abs(accuracy - mean)
    brier = sum((p - 1.0) ** 2 for p in p_chosen) / n
    wins = pairs = 0.0
    for i in range(n):
        for j in range(n):
            weight = correct[i] * (1.0 - correct[j])
            pairs += weight
            wins += weight * (
                1.0 if confidence[i] > confidence[j] else 0.5 if confidence[i] == confidence[j] else 0.0
            )
    return {"ece": ece, "brier": brier, "auroc": wins / pairs}


def no_side_half(frame: pl.DataFrame) -> np.ndarray:
    """Correctness as the calibration figures count it: a tie or an inconsistent pair is half right."""
    sided = frame["verdict"].is_in(["chosen", "rejected"]).to_numpy()
    return np.where(sided, frame["correct"].cast(pl.Float64).to_numpy(), 0.5)


@pytest.mark.parametrize(
    ("provider", "family", "order"),
    [
        ("openai-compatible", "openai", "random"),
        ("gemini-3-flash", "gemini", "random"),
        ("gemini-3-flash", "gemini", "both"),
    ],
)
def test_p_chosen_is_the_verdict_tokens_probability_and_the_figures_follow(
    harness: Harness, server: ProviderServer, provider: str, family: str, order: str
) -> None:
    run = harness.judge(
        harness.dataset(records(30)),
        "--context",
        "none",
        "--order",
        order,
        "--confidence",
        "logprobs",
        provider=provider,
    )
    assert run.exit_code == 0, run.output
    # Asked in the provider's own terms, with the number of alternatives.
    for request in server.requests:
        assert request.family == family
        if family == "openai":
            assert request.body["logprobs"] is True and request.body["top_logprobs"] == 5
        else:
            config = request.body["generationConfig"]
            assert config["responseLogprobs"] is True and config["logprobs"] == 5

    frame = run.judgments.sort("pair_id")
    index = [int(p.split("-")[1]) for p in frame["pair_id"]]
    if order == "both":
        expected = [(Q_A[i] + Q_B[i]) / 2 for i in index]
    else:
        expected = [
            Q_A[i] if pos == "A" else Q_B[i] for i, pos in zip(index, frame["chosen_position"], strict=True)
        ]
    assert frame["confidence_source"].to_list() == ["logprobs"] * 30
    assert np.max(np.abs(frame["p_chosen"].to_numpy() - np.array(expected))) < 1e-9
    confidence = frame["confidence"].to_numpy()
    verdicts = frame["verdict"].to_list()
    for p, c, v in zip(expected, confidence, verdicts, strict=True):
        assert c == pytest.approx(p if v == "chosen" else 1 - p if v == "rejected" else 0.5, abs=1e-9)

    summary = json.loads((run.run_dir / "summary.json").read_text())  # type: ignore[operator]
    (row,) = summary["calibration"]
    direct = direct_figures(confidence, no_side_half(frame), frame["p_chosen"].to_numpy())
    for figure in ("ece", "brier", "auroc"):
        assert row[figure] == pytest.approx(direct[figure], abs=1e-9), figure
        assert (
            row[f"{figure}_ci_low"] <= row[figure] + 1e-6 and row[figure] - 1e-6 <= row[f"{figure}_ci_high"]
        )
    assert row["n"] == 30 and row["sources"] == {"logprobs": 30}
    assert sum(b["n"] for b in row["bins"]) == 30
    assert row["curve"][-1]["coverage"] == 1.0


def test_a_run_that_does_not_ask_is_unchanged_and_asking_never_reuses_its_answers(
    harness: Harness, server: ProviderServer
) -> None:
    dataset = harness.dataset(records(12))
    plain = harness.judge(dataset, "--context", "none")
    assert plain.exit_code == 0, plain.output
    # Nothing asked for log-probabilities, and the run's files hold nothing new.
    assert all("logprobs" not in r.body and "top_logprobs" not in r.body for r in server.requests)
    summary = json.loads((plain.run_dir / "summary.json").read_text())  # type: ignore[operator]
    assert set(summary) == {"prbj_version", "dataset", "seed", "bootstrap", "results"}
    assert all("abstained" not in row for row in summary["results"])
    assert not {"p_chosen", "confidence", "confidence_source"} & set(plain.judgments.columns)
    plain_keys = set(ResponseCache(harness.cache).keys())
    assert len(plain_keys) == 12
    # Each cached answer is exactly what it was: no logprobs field.
    cache = ResponseCache(harness.cache)
    assert all("logprobs" not in cache.get(key) for key in plain_keys)

    # --confidence available adds figures but asks nothing new: every call is a cache hit.
    server.reset()
    available = harness.judge(dataset, "--context", "none", "--confidence", "available")
    assert available.exit_code == 0 and server.count() == 0
    assert available.summary == plain.summary

    # --confidence logprobs is a different request: new keys, bought anew, the plain entries untouched.
    logprobs = harness.judge(dataset, "--context", "none", "--confidence", "logprobs")
    assert logprobs.exit_code == 0 and server.count() == 12
    keys = set(ResponseCache(harness.cache).keys())
    assert plain_keys < keys and len(keys) == 24
    # The verdicts are the same either way.
    assert logprobs.judgments["verdict"].to_list() == plain.judgments["verdict"].to_list()

    # And the plain run again: all hits, the same summary.
    server.reset()
    again = harness.judge(dataset, "--context", "none")
    assert server.count() == 0 and again.summary == plain.summary


def test_logprobs_are_replayed_from_the_cache(harness: Harness, server: ProviderServer) -> None:
    dataset = harness.dataset(records(8))
    first = harness.judge(dataset, "--context", "none", "--confidence", "logprobs")
    server.reset()
    replay = harness.judge(dataset, "--context", "none", "--confidence", "logprobs", "--cache-only")
    assert replay.exit_code == 0 and server.count() == 0
    assert replay.judgments["p_chosen"].to_list() == first.judgments["p_chosen"].to_list()


def test_a_model_that_returns_no_logprobs_falls_back_to_both_orders(
    harness: Harness, server: ProviderServer
) -> None:
    """Anthropic returns none (and its profile says so, so none are asked): with both orders the probability
    comes from the two hard verdicts."""
    run = harness.judge(
        harness.dataset(records(6)),
        "--context",
        "none",
        "--order",
        "both",
        "--confidence",
        "logprobs",
        provider="claude-sonnet-4-6",
    )
    assert run.exit_code == 0, run.output
    assert "no log-probabilities asked (the model returns none)" in run.output
    assert all("logprobs" not in str(r.body) for r in server.requests)
    frame = run.judgments
    assert set(frame["confidence_source"]) == {"orders"}
    in_a = (frame["verdict_chosen_a"] == "chosen").cast(pl.Float64)
    in_b = (frame["verdict_chosen_b"] == "chosen").cast(pl.Float64)
    assert frame["p_chosen"].to_list() == ((in_a + in_b) / 2).to_list()


def test_a_reasoning_model_is_not_asked_for_logprobs_it_would_refuse(
    harness: Harness, server: ProviderServer
) -> None:
    """An OpenAI reasoning model reasoning (effort low): the provider rule leaves the log-probabilities out (it
    would answer 400 for them, as the strict loopback does), and the run goes on without them."""
    server.strict_params = True
    run = harness.judge(
        harness.dataset(records(4)),
        "--context",
        "none",
        "--confidence",
        "logprobs",
        "--reasoning-effort",
        "low",
        provider="litellm:openai/gpt-5.1",
    )
    assert run.exit_code == 0, run.output
    assert "top_logprobs 5 (--confidence logprobs) not sent" in run.output
    assert server.count() == 4 and all("logprobs" not in r.body for r in server.requests)
    assert run.judgments["p_chosen"].null_count() == 4


def test_position_consistency_and_preference_fairness_with_both_orders(
    harness: Harness, server: ProviderServer
) -> None:
    """A judge that says A on the first six pairs whatever it is shown, and is right elsewhere."""

    def first_always_early(request: ChatRequest) -> str:
        return "Result: A" if pair_index(request.prompt) <= 6 else f"Result: {chosen_letter(request)}"

    server.reply = first_always_early
    dataset = harness.dataset(records(10))
    plain = harness.judge(dataset, "--context", "none", "--order", "both")
    # Not asked: summary.json is what it always was, the report shows the figures all the same.
    assert "position_fairness" not in json.loads((plain.run_dir / "summary.json").read_text())  # type: ignore[operator]
    assert "preference fairness" in (plain.run_dir / "report.md").read_text()  # type: ignore[operator]
    run = harness.judge(dataset, "--context", "none", "--order", "both", "--confidence", "available")
    summary = json.loads((run.run_dir / "summary.json").read_text())  # type: ignore[operator]
    (row,) = summary["position_fairness"]
    assert (row["pairs"], row["consistent"], row["primacy"], row["recency"]) == (10, 4, 6, 0)
    assert row["position_consistency"] == pytest.approx(0.4)
    assert row["preference_fairness"] == pytest.approx(-0.6)
    # The same figure as today's order_consistency, beside it.
    assert run.overall()["order_consistency"] == pytest.approx(0.4)
