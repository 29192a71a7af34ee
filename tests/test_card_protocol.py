"""A benchmark card's [protocol] (issue 40, item 4): how its authors score, read from the card with one-line errors;
the judging order it sets for every pairwise judge; and `--protocol official --benchmark personal-reward-bench`,
which reproduces SynthesizeMe's released evaluation (both orders, each judgment max(0, r), the mean over the 2n
judgments, scipy's basic bootstrap over judgments) and prints prbj's own figures beside it. Every expected figure
here is computed by hand in its docstring or comment, never by the code under test."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner, Result
from loopback import ChatRequest, ProviderServer
from scipy.stats import bootstrap

from prbj.analysis.headline import Headline, headline_figure, run_headline
from prbj.cli import main
from prbj.data.card_protocol import ScoringProtocol
from prbj.data.cards import read_card, resolve_card
from prbj.data.schema import Pair
from prbj.errors import ConfigError
from prbj.judges.base import PairTask
from prbj.judges.orders import OrderRead, PairwiseJudge

ROOT = Path(__file__).resolve().parents[1]
PRB_SAMPLE = ROOT / "prbj" / "data" / "benchmarks" / "personal-reward-bench" / "preferences.jsonl"

CARD = """[benchmark]
name = "mine"
version = "1"

[data]
loader = "per-user"

[protocol]
order = "both"
unit = "judgments"
failures = "wrong"
ties = "half"
interval = "basic-bootstrap"
source = "our paper, section 4"
"""


def invoke(*args: str | Path) -> Result:
    return CliRunner(env={"COLUMNS": "400"}).invoke(main, [str(a) for a in args], catch_exceptions=False)


# --- the card field ----------------------------------------------------------------------------------------------


def test_the_shipped_cards_say_how_their_authors_score() -> None:
    """PersonalRewardBench: SynthesizeMe's DefaultJudge.evaluate (personalrm/default_judge.py) calls
    predict_pairwise on (chosen, rejected) and on (rejected, chosen), keeps max(0, r) of each, takes the mean of
    the 2n values and scipy.stats.bootstrap(method='basic') over them. PRISM publishes no accuracy of reward
    models: no source. PersonaFeedback reports the binary choice's accuracy per pair; PRB has no [protocol]
    (its official mode is the official scripts', docs/protocol.md)."""
    prb_bench = resolve_card("personal-reward-bench").protocol
    assert prb_bench is not None
    assert (prb_bench.order, prb_bench.unit, prb_bench.failures, prb_bench.ties, prb_bench.interval) == (
        "both",
        "judgments",
        "wrong",
        "wrong",
        "basic-bootstrap",
    )
    assert prb_bench.source is not None and "default_judge.py" in prb_bench.source
    prism = resolve_card("prism").protocol
    assert prism is not None and prism.unit == "users" and not prism.reproducible
    feedback = resolve_card("persona-feedback").protocol
    assert feedback is not None and feedback.unit == "pairs" and feedback.reproducible
    assert resolve_card("prb").protocol is None


def test_a_card_without_protocol_keeps_prbj_s_rules(tmp_path: Path) -> None:
    path = tmp_path / "card.toml"
    path.write_text(CARD.split("[protocol]")[0])
    card = read_card(path)
    assert card.protocol is None
    assert run_headline(card.protocol, "official") == Headline()
    assert Headline().unit == "users" and Headline().native


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ('unit = "judgments"', 'unit = "pair"'),
            ":10: field 'protocol.unit': unknown value 'pair'; did you mean 'pairs'?",
        ),
        (
            ('order = "both"', 'order = "bothh"'),
            ":9: field 'protocol.order': unknown value 'bothh'; did you mean 'both'?",
        ),
        (
            ('ties = "half"', "ties = 0.5"),
            ":12: field 'protocol.ties': expected one of wrong, excluded, half, got 0.5",
        ),
        (
            ('interval = "basic-bootstrap"', 'intervall = "basic-bootstrap"'),
            ":13: field 'protocol.intervall': unknown field; did you mean 'interval'?",
        ),
        (
            ('failures = "wrong"', 'failures = "dropped"'),
            ":11: field 'protocol.failures': unknown value 'dropped'; expected one of wrong, excluded, half",
        ),
        (
            ('source = "our paper, section 4"', 'source = ""'),
            ":14: field 'protocol.source': expected a non-empty",
        ),
        (("[protocol]", "[protocl]"), ":8: field 'protocl': unknown field; did you mean 'protocol'?"),
    ],
)
def test_a_protocol_given_wrong_is_one_line_naming_file_line_field_and_the_nearest_value(
    tmp_path: Path, edit: tuple[str, str], message: str
) -> None:
    path = tmp_path / "card.toml"
    path.write_text(CARD.replace(*edit))
    with pytest.raises(ConfigError) as caught:
        read_card(path)
    assert str(caught.value).startswith(f"{path}{message}"), caught.value
    result = CliRunner().invoke(
        main, ["judge", "--benchmark", str(path), "--dataset", str(path), "--no-progress"]
    )
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output


# --- the judging order, for every pairwise judge ------------------------------------------------------------------


class FirstUnlessShorter(PairwiseJudge):
    """A judge shown both answers that picks the first unless it has fewer words, and fails on a question
    containing 'fail' when the chosen answer is shown second: as a plugin RM's `prefer` would be asked."""

    name = "first-unless-shorter"

    def __init__(self, order: str) -> None:
        self.order = "both" if order == "both" else "random"
        self.asked: list[tuple[str, str]] = []

    async def read_order(self, task: PairTask, first: str, second: str) -> OrderRead:
        self.asked.append((first, second))
        if "fail" in task.pair.question and second == task.pair.chosen:
            return OrderRead("parse_error", error="no pick")
        return OrderRead("ok", "B" if len(first.split()) < len(second.split()) else "A")


def pair(question: str, chosen: str, rejected: str) -> Pair:
    return Pair(
        id=question[:8],
        category="default",
        question=question,
        profile=(),
        narrative="",
        rubric_aspects=(),
        chosen=chosen,
        rejected=rejected,
        user_id="u1",
    )


def test_a_pairwise_judge_of_any_kind_is_asked_in_both_orders_and_each_order_is_kept() -> None:
    import asyncio

    judge = FirstUnlessShorter("both")
    longer = pair("which one", "a long right answer here", "short")
    failing = pair("this will fail", "a long right answer here", "short")
    judge.prepare([longer, failing])
    first = asyncio.run(judge.judge(PairTask(longer, "none")))
    # Chosen shown as A: A is longer → "A" (chosen). Chosen shown as B: A ("short") is shorter → "B" (chosen).
    assert judge.asked == [(longer.chosen, longer.rejected), (longer.rejected, longer.chosen)]
    assert (first.chosen_position, first.verdict_chosen_a, first.verdict_chosen_b, first.verdict) == (
        "both",
        "chosen",
        "chosen",
        "chosen",
    )
    second = asyncio.run(judge.judge(PairTask(failing, "none")))
    # The order with the chosen answer first still counts; the judgment as a whole failed.
    assert (second.status, second.verdict_chosen_a, second.verdict_chosen_b) == (
        "parse_error",
        "chosen",
        None,
    )
    one = FirstUnlessShorter("random")
    one.prepare([longer])
    asyncio.run(one.judge(PairTask(longer, "none")))
    assert len(one.asked) == 1


def test_the_card_sets_the_judging_order_and_the_command_line_overrides_it(
    server: ProviderServer, openai_profiles: Path, tmp_path: Path
) -> None:
    """The dry run's plan: 16 test pairs of the PersonalRewardBench sample, two calls each (both orders, the
    card's order), one each with --order random; PRISM's card sets none (26 pairs, one call each)."""

    def planned(*extra: str) -> int:
        result = invoke(
            "judge",
            "-p",
            "judge",
            "--dry-run",
            "--no-progress",
            *extra,
            *gateway(server, openai_profiles, tmp_path),
        )
        assert result.exit_code == 0, result.output
        row = next(line for line in result.output.splitlines() if line.split()[:1] == ["judge"])
        return int(row.split()[1])

    assert planned("--benchmark", "personal-reward-bench") == 32
    assert planned("--benchmark", "personal-reward-bench", "--order", "random") == 16
    assert planned("--benchmark", "prism") == 26
    assert planned("--benchmark", "prism", "--order", "both") == 52


# --- --protocol official on a card ---------------------------------------------------------------------------------


def test_official_is_refused_where_the_card_names_no_source_or_the_order_contradicts_it(
    tmp_path: Path,
) -> None:
    result = invoke(
        "judge", "--benchmark", "prism", "-p", "length", "--protocol", "official", "--no-progress"
    )
    assert result.exit_code == 2
    assert "the prism card has no [protocol] source" in result.output and result.output.count("\n") == 1
    result = invoke(
        "judge",
        "--benchmark",
        "personal-reward-bench",
        "--protocol",
        "official",
        "--order",
        "random",
        "--no-progress",
    )
    assert result.exit_code == 2 and "judge each pair in both orders; leave --order out" in result.output
    result = invoke(
        "judge",
        "--benchmark",
        "personal-reward-bench",
        "--protocol",
        "official",
        "--official-repo",
        tmp_path,
        "--no-progress",
    )
    assert result.exit_code == 2 and "reads none: leave it out" in result.output


def length_outcomes() -> list[int]:
    """The length judge on the PersonalRewardBench sample's 16 test pairs, in file order (chosen words vs
    rejected words, `wc -w` by eye): user101 9<45 ✗, 10<43 ✗; user102 33<41 ✗, 35<36 ✗; user103 25>19 ✓, 20>15 ✓;
    user104 36<43 ✗, 29>13 ✓; user105 36>15 ✓, 43>13 ✓; user106 19>9 ✓, 20>16 ✓; user107 22>10 ✓, 20>10 ✓;
    user108 33<44 ✗, 36>11 ✓ — 10 of 16 right, no tie."""
    return [0, 0, 0, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1]


def summary_of(out: Path) -> dict:
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return json.loads((run_dir / "summary.json").read_text())


def overall(summary: dict, judge: str) -> dict:
    return next(r for r in summary["results"] if r["judge"] == judge and r["subset"] == "all")


def test_each_cards_official_figure_on_its_bundled_sample(tmp_path: Path) -> None:
    """PersonalRewardBench, length judge: it sees no order, so each of its 16 outcomes stands for both orders:
    2 × 10 right of 32 judgments = 0.625; the interval is scipy's basic bootstrap over those 32 scores (the 16
    outcomes, then the same 16 again) with the run's seed. PersonaFeedback, length judge (words per file, by eye):
    general easy 22>17 ✓ 21<41 ✗, hard 30>21 ✓ 34<48 ✗, medium 31>12 ✓ 28>11 ✓ 29>13 ✓; specific easy 25>13 ✓
    17>10 ✓, hard 15<32 ✗ 22>9 ✓ 22<41 ✗, medium 26<38 ✗ 33>12 ✓ — 9 of 14 pairs = 9/14."""
    out = tmp_path / "prb-bench"
    result = invoke(
        "judge",
        "--benchmark",
        "personal-reward-bench",
        "-p",
        "length",
        "--protocol",
        "official",
        "--seed",
        "7",
        "--out",
        out,
        "--no-progress",
    )
    assert result.exit_code == 0, result.output
    summary = summary_of(out)
    assert summary["headline"]["protocol"] == "official" and summary["headline"]["unit"] == "judgments"
    row = overall(summary, "length")
    assert row["headline"] == 20 / 32
    scores = np.array(length_outcomes() * 2, dtype=np.float64)
    expected = bootstrap(
        (scores,), np.mean, method="basic", confidence_level=0.95, rng=np.random.default_rng(7)
    ).confidence_interval
    assert (row["headline_ci_low"], row["headline_ci_high"]) == (expected.low, expected.high)
    assert "62.5" in result.output

    out = tmp_path / "feedback"
    result = invoke(
        "judge",
        "--benchmark",
        "persona-feedback",
        "-p",
        "length",
        "--protocol",
        "official",
        "--out",
        out,
        "--no-progress",
    )
    assert result.exit_code == 0, result.output
    row = overall(summary_of(out), "length")
    # Pairs by prbj's rules where the paper says nothing else: the figure is pair accuracy itself.
    assert (
        summary_of(out)["headline"]["unit"] == "pairs" and row["accuracy"] == 9 / 14 and "headline" not in row
    )


# --- the acceptance run: unreadable replies from a loopback judge -------------------------------------------------


def sample_test_rows() -> list[dict]:
    rows = [json.loads(line) for line in PRB_SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [row for row in rows if row["split"] == "test"]


def _answer_a(prompt: str) -> str:
    return prompt.split("## Answer A\n", 1)[1].split("\n\n## Answer B", 1)[0].strip()


def scripted(request: ChatRequest) -> str:
    """users 101-104: always the chosen answer; 105-106: always "A" (right only when the chosen answer is shown
    first); 107-108: a reply with no verdict (a parse error)."""
    shown = _answer_a(request.last_user)
    for row in sample_test_rows():
        chosen, rejected = row["chosen"]["content"].strip(), row["rejected"]["content"].strip()
        if shown not in (chosen, rejected):
            continue
        user = row["user_id"]
        if user in ("user107", "user108"):
            return "Both answers have merits; I cannot decide."
        if user in ("user105", "user106"):
            return "Result: A"
        return "Result: A" if shown == chosen else "Result: B"
    raise AssertionError(f"answer not in the sample: {shown[:60]!r}")


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer(reply=scripted) as running:
        yield running


def gateway(server: ProviderServer, profiles: Path, tmp_path: Path) -> Sequence[str | Path]:
    return ["--api-base", server.url, "--providers-dir", profiles, "--cache-dir", tmp_path / "cache"]


def test_official_personal_reward_bench_counts_both_orders_and_failures_wrong(
    server: ProviderServer, openai_profiles: Path, tmp_path: Path
) -> None:
    """The acceptance run. 16 test pairs × 2 orders = 32 judgments:
    - users 101-104 (8 pairs): right in both orders → 16 right;
    - users 105-106 (4 pairs): "A" every time → right with the chosen answer in A, wrong in B → 4 right of 8;
    - users 107-108 (4 pairs): unreadable in both orders → 8 failures.
    Official (failures wrong, the mean over 2n = 32): (16 + 4) / 32 = 0.625, which is also the mean of the two
    orders' accuracies with failures wrong, (12/16 + 8/16) / 2.
    prbj's default on the same card (its unit, judgments; failures apart): 20 right of 24 read = 5/6.
    prbj's own figures beside it: pairs right in both orders 8 of the 12 read (66.7%); users 101-104 at 1.0 and
    105-106 at 0.0, 107-108 without a decided pair → user accuracy 4/6 (66.7%); 4 of 16 judgments failed."""
    shared = [
        *gateway(server, openai_profiles, tmp_path),
        "-p",
        "judge",
        "--context",
        "none",
        "--no-progress",
    ]
    before = server.count()
    official = invoke(
        "judge",
        "--benchmark",
        "personal-reward-bench",
        "--protocol",
        "official",
        "--out",
        tmp_path / "official",
        *shared,
    )
    assert official.exit_code == 0, official.output
    row = overall(summary_of(tmp_path / "official"), "judge")
    assert row["headline"] == 0.625
    assert row["accuracy"] == 8 / 12 and row["user_accuracy"] == 4 / 6 and row["n"] - row["n_ok"] == 4
    # Each pair was asked in both orders: 32 calls, none repeated.
    assert server.count() - before == 32
    board = [line for line in official.output.splitlines() if line.lstrip().startswith("judge none")]
    assert len(board) == 1
    assert re.search(r"judge none\s+62\.5\s+\S+\s+66\.7\s+\S+\s+66\.7", board[0]), board[0]
    assert "4/16" in board[0]
    assert "official:" in official.output and "default_judge.py" in official.output

    default = invoke("judge", "--benchmark", "personal-reward-bench", "--out", tmp_path / "default", *shared)
    assert default.exit_code == 0, default.output
    mine = overall(summary_of(tmp_path / "default"), "judge")
    assert mine["headline"] == 5 / 6 and mine["headline"] != row["headline"]
    # Served from the cache: the default run asked nothing new.
    assert server.count() - before == 32


def test_the_headline_rules_on_hand_made_judgments() -> None:
    """Two users. u1: p1 right in both orders, p2 right with the chosen answer in A only (inconsistent);
    u2: p3 right in A and unreadable in B, p4 a tie (a scored judge, no order).
    - judgments, failures and ties wrong: p1 1+1, p2 1+0, p3 1+0, p4 0+0 (twice: both orders) → 4/8;
    - judgments, prbj's rules (failures left out, ties wrong): 4 right of 7 → 4/7;
    - judgments, failures left out, ties half: (4 + 2 × 1/2) / 7 = 5/7;
    - pairs, failures wrong: p1 1, p2 0 (inconsistent), p3 0 (failed), p4 0 → 1/4;
    - users, failures wrong: u1 (1+0)/2, u2 (0+0)/2 → 1/4; failures left out: u1 1/2, u2 (tie) 0/1 → 1/4;
    - users, ties half, failures excluded: u1 1/2, u2 1/2 → 1/2."""
    rows = [
        {"pair_id": "p1", "user_id": "u1", "status": "ok", "verdict": "chosen", "correct": True, "tie": False,
         "chosen_position": "both", "verdict_chosen_a": "chosen", "verdict_chosen_b": "chosen"},
        {"pair_id": "p2", "user_id": "u1", "status": "ok", "verdict": "inconsistent", "correct": False, "tie": False,
         "chosen_position": "both", "verdict_chosen_a": "chosen", "verdict_chosen_b": "rejected"},
        {"pair_id": "p3", "user_id": "u2", "status": "parse_error", "verdict": None, "correct": False, "tie": False,
         "chosen_position": "both", "verdict_chosen_a": "chosen", "verdict_chosen_b": None},
        {"pair_id": "p4", "user_id": "u2", "status": "ok", "verdict": "tie", "correct": False, "tie": True,
         "chosen_position": None, "verdict_chosen_a": None, "verdict_chosen_b": None},
    ]  # fmt: skip
    frame = pl.DataFrame(rows)
    authors = ScoringProtocol(
        order="both", unit="judgments", failures="wrong", ties="wrong", interval="basic-bootstrap"
    )

    def value(**change: str) -> float | None:
        rules = ScoringProtocol(**{**authors.__dict__, **change})
        return headline_figure(frame, rules, seed=0).value

    assert value() == 4 / 8
    assert value(failures="excluded") == 4 / 7
    assert value(failures="excluded", ties="half") == 5 / 7
    assert value(unit="pairs") == 1 / 4
    assert value(unit="users") == 1 / 4
    assert value(unit="users", failures="excluded") == 1 / 4
    assert value(unit="users", failures="excluded", ties="half") == 1 / 2
    figure = headline_figure(frame, authors, seed=3)
    assert figure.n == 8
    # The judgments in the order they are scored: each pair's order A, then each pair's order B, then p4 twice.
    scores = np.array([1, 1, 1, 1, 0, 0, 0, 0], dtype=np.float64)
    expected = bootstrap((scores,), np.mean, method="basic", rng=np.random.default_rng(3)).confidence_interval
    assert (figure.ci_low, figure.ci_high) == (expected.low, expected.high)


def test_a_tie_in_one_shown_order_counts_as_a_tie_not_as_a_failure() -> None:
    """A plugin's `prefer` of exactly 1/2 favours neither answer in that order: under a unit of judgments each
    such order counts as the rules count a tie (prbj's rules: wrong), never as a failure left out. u1: p1 a tie
    in both orders; p2 right in A, a tie in B."""
    rows = [
        {"pair_id": "p1", "user_id": "u1", "status": "ok", "verdict": "tie", "correct": False, "tie": True,
         "chosen_position": "both", "verdict_chosen_a": "tie", "verdict_chosen_b": "tie"},
        {"pair_id": "p2", "user_id": "u1", "status": "ok", "verdict": "inconsistent", "correct": False,
         "tie": False, "chosen_position": "both", "verdict_chosen_a": "chosen", "verdict_chosen_b": "tie"},
    ]  # fmt: skip
    frame = pl.DataFrame(rows)
    prbj_rules = ScoringProtocol(order="both", unit="judgments")
    assert headline_figure(frame, prbj_rules, seed=0).value == 1 / 4
    assert (
        headline_figure(frame, ScoringProtocol(order="both", unit="judgments", ties="half"), seed=0).value
        == (1 + 3 / 2) / 4
    )
    assert (
        headline_figure(frame, ScoringProtocol(order="both", unit="judgments", ties="excluded"), seed=0).value
        == 1
    )


def test_prbjs_interval_of_a_card_unit_counts_items_not_half_points() -> None:
    """Ten users, each right on exactly half of their four judgments (two pairs in both orders): no spread between
    users, so the effective size is capped at the items scored, 40 judgments; the interval is the one prbj draws
    for 20 right of 40 over 10 users, not for 40 of 80 (half-points counted as items)."""
    from prbj.analysis.clusters import accuracy_intervals

    rows = [
        {"pair_id": f"{user}-{n}", "user_id": user, "status": "ok", "verdict": "inconsistent", "correct": False,
         "tie": False, "chosen_position": "both", "verdict_chosen_a": "chosen", "verdict_chosen_b": "rejected"}
        for user in (f"u{i}" for i in range(10)) for n in (1, 2)
    ]  # fmt: skip
    figure = headline_figure(pl.DataFrame(rows), ScoringProtocol(order="both", unit="judgments"), seed=0)
    assert figure.value == 0.5 and figure.n == 40
    expected = accuracy_intervals(np.full(10, 2), np.full(10, 4), confidence=0.95)
    assert expected is not None
    assert (figure.ci_low, figure.ci_high) == expected.pooled
