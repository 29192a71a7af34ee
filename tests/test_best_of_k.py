"""Items of k answers (issue 41 items 7-9): a row holds k candidates with the preferred one, a ranking or a score
each; judges pick the best of k (scoring judges by the argmax, pairwise LLM judges by a round-robin of A/B
calls); accuracy = the preferred one ranked first, read against its chance level 1/k; scores and rankings become
pairs with a tie margin where a card asks. And the new cards' loaders, checked against their authors' rules."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from loopback import ChatRequest, ProviderServer

from conftest import write_jsonl
from prbj.analysis.chance import chance_of
from prbj.cli import main
from prbj.data import load_dataset
from prbj.data.cards import read_card
from prbj.data.loaders import Dataset
from prbj.data.pal_tldr_loader import MAJORITY_UNSEEN
from prbj.data.personal_llm_loader import MODELS, REWARD_MODELS
from prbj.data.schema import Pair
from prbj.judges.base import PairTask, best_of
from prbj.judges.baselines import LengthJudge
from prbj.judges.tournament import match_positions

ROOT = Path(__file__).resolve().parents[1]


def _card(path: Path, data: str = "") -> Path:
    path.write_text(f'[benchmark]\nname = "mine"\nversion = "1"\n\n[data]\nloader = "per-user"\n{data}\n')
    return path


def _item(user: str, n: int, split: str = "test", **answers: object) -> dict[str, object]:
    return {"user_id": user, "id": f"{user}-{n}", "prompt": f"question {n}", "split": split, **answers}


RESPONSES = ["the one they liked", "a second answer", "a third answer", "a fourth answer"]


# --- reading --------------------------------------------------------------------------------------------------


def test_a_row_of_k_answers_is_one_item_with_the_preferred_one_first(tmp_path: Path) -> None:
    rows = [
        _item("u1", 1, responses=["zero", "one", "two"], preferred=2),
        _item("u1", 2, responses=["zero", "one", "two", "three"], ranking=[3, 0]),
        _item("u1", 3, "train", responses=["past best", "past other", "past third"], preferred=0),
    ]
    data = load_dataset(str(write_jsonl(tmp_path / "k.jsonl", rows)))
    first, second = data.pairs
    assert first.candidates == ("two", "zero", "one") and first.k == 3
    assert second.candidates == ("three", "zero", "one", "two")
    # A history row of k answers: the preferred one over each other.
    assert [(h.chosen, h.rejected) for h in first.history] == [
        ("past best", "past other"),
        ("past best", "past third"),
    ]


def test_scores_pick_the_best_or_make_no_item_when_the_top_two_are_within_the_margin(tmp_path: Path) -> None:
    rows = [
        _item("u1", 1, responses=["low", "top", "mid"], scores=[1.0, 9.0, 5.0]),
        _item("u1", 2, responses=["a", "b", "c"], scores=[8.0, 7.5, 1.0]),
    ]
    path = write_jsonl(tmp_path / "s.jsonl", rows)
    card = read_card(_card(tmp_path / "card.toml", "tie_margin = 1"))
    data = load_dataset(str(path), card)
    (item,) = data.pairs
    assert item.candidates == ("top", "low", "mid")
    assert data.notes == (
        "1 record of several answers had no clear best (the top two scores 1 points apart or closer) and made no "
        "item (dropped)",
    )


def test_scores_and_rankings_become_pairs_with_a_tie_margin(tmp_path: Path) -> None:
    rows = [
        _item("u1", 1, responses=["a", "b", "c", "d"], scores=[9.0, 8.5, 5.0, 1.0]),
        _item("u1", 2, responses=["w", "x", "y"], ranking=[1, 2, 0]),
        _item("u1", 3, responses=["p", "q", "r"], preferred=0),
    ]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    data = load_dataset(
        str(path), read_card(_card(tmp_path / "card.toml", 'items = "pairs"\ntie_margin = 1'))
    )
    pairs = {(p.id, p.chosen, p.rejected) for p in data.pairs}
    assert {(i, c, r) for i, c, r in pairs if i.startswith("u1-1-")} == {
        ("u1-1-1", "a", "c"), ("u1-1-2", "a", "d"), ("u1-1-3", "b", "c"), ("u1-1-4", "b", "d"), ("u1-1-5", "c", "d"),
    }  # fmt: skip
    assert {(c, r) for i, c, r in pairs if i.startswith("u1-2-")} == {("x", "y"), ("x", "w"), ("y", "w")}
    assert {(c, r) for i, c, r in pairs if i.startswith("u1-3-")} == {("p", "q"), ("p", "r")}
    assert all(not p.others for p in data.pairs)
    assert data.notes == ("1 tied rating (scores 1 points apart or closer) made no pair (dropped)",)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"preferred": 4}, "field 'preferred': expected an index into 'responses' (0 to 3), got 4"),
        ({"preferred": None, "ranking": [1, 1]}, "field 'ranking': names an answer twice"),
        (
            {"preferred": None, "scores": [1, 2]},
            "field 'scores': expected 4 numbers, one per response, got 2 items",
        ),
        ({"preferred": None}, "field 'preferred': missing (give one of 'preferred', 'ranking' or 'scores'"),
        ({"chosen": "x"}, "field 'responses': give either 'chosen' and 'rejected', or 'responses', not both"),
        ({"responses": ["only one"]}, "field 'responses': expected a list of at least 2 answers, got 1 item"),
    ],
)
def test_a_k_way_row_given_wrong_is_one_line(tmp_path: Path, change: dict[str, object], message: str) -> None:
    row = {**_item("u1", 1, responses=RESPONSES, preferred=0), **change}
    path = write_jsonl(tmp_path / "bad.jsonl", [{k: v for k, v in row.items() if v is not None}])
    with pytest.raises(Exception, match=re.escape(f"{path}:1: {message}")):
        load_dataset(str(path))


# --- judging --------------------------------------------------------------------------------------------------


def test_a_scoring_judge_picks_the_argmax() -> None:
    assert best_of([3.0, 1.0, 2.0, 0.5]) == ("chosen", 3.0, 2.0)
    assert best_of([3.0, 1.0, 3.0]) == ("tie", 3.0, 3.0)
    assert best_of([1.0, 4.0, 2.0]) == ("rejected", 1.0, 4.0)


def _pair(candidates: list[str]) -> Pair:
    return Pair(
        id="i1",
        category="default",
        question="Which?",
        profile=(),
        narrative="",
        rubric_aspects=(),
        chosen=candidates[0],
        rejected=candidates[1],
        user_id="u1",
        others=tuple(candidates[2:]),
    )


@pytest.mark.parametrize(
    ("candidates", "verdict"),
    [
        (["the longest answer of them all here", "short", "a bit longer", "mid length one"], "chosen"),
        (["two words", "short", "a much much longer answer", "one"], "rejected"),
        (["three words here", "one", "three words too"], "tie"),
    ],
)
def test_offline_baselines_judge_the_best_of_k(candidates: list[str], verdict: str) -> None:
    judgment = asyncio.run(LengthJudge().judge(PairTask(_pair(candidates), "none")))
    words = [len(c.split()) for c in candidates]
    assert judgment.verdict == verdict
    assert (judgment.score_chosen, judgment.score_rejected) == (words[0], max(words[1:]))


def test_a_scalar_reward_model_scores_every_candidate(tmp_path: Path) -> None:
    from tiny_rm import build_reward_model

    from prbj.judges.scalar import ScalarOptions, make_scalar_judge
    from prbj.llm.cache import ResponseCache
    from prbj.llm.gateway import Gateway

    candidates = ["a rangefinder", "a mirrorless camera", "a phone", "a disposable camera"]
    folder = build_reward_model(tmp_path / "rm", ["Which camera?", *candidates])
    judge = make_scalar_judge(
        str(folder),
        context="none",
        options=ScalarOptions(),
        gateway=Gateway(ResponseCache(tmp_path / "cache")),
        seed=42,
    )
    task = PairTask(_pair(candidates), "none")
    scores = asyncio.run(judge.score(task.view, candidates))
    judgment = asyncio.run(judge.judge(task))
    assert (judgment.score_chosen, judgment.score_rejected) == (scores[0], max(scores[1:]))
    assert judgment.verdict == best_of(scores)[0]


@pytest.fixture(scope="module")
def favourite() -> Iterator[ProviderServer]:
    """A judge that prefers the answer marked BEST, and otherwise the one marked GOOD, whatever its position."""

    def reply(request: ChatRequest) -> str:
        a, b = re.search(r"## Answer A\n(.*?)\n\n## Answer B\n(.*?)\n\nWhich", request.prompt, re.S).groups()
        rank = {"BEST": 2, "GOOD": 1}
        score_a = max((v for k, v in rank.items() if k in a), default=0)
        score_b = max((v for k, v in rank.items() if k in b), default=0)
        return "Result: A" if score_a >= score_b else "Result: B"

    with ProviderServer(reply=reply) as server:
        yield server


def _kway_file(tmp_path: Path, preferred_is_best: bool) -> Path:
    marked = ["BEST pick", "GOOD pick", "plain one", "plain two"]
    responses = marked if preferred_is_best else ["GOOD pick", "BEST pick", "plain one", "plain two"]
    return write_jsonl(tmp_path / "items.jsonl", [_item("u1", 1, responses=responses, preferred=0)])


@pytest.mark.parametrize(("order", "calls"), [("random", 6), ("both", 12)])
def test_a_pairwise_judge_plays_a_round_robin(
    favourite: ProviderServer, openai_profiles: Path, tmp_path: Path, order: str, calls: int
) -> None:
    before = favourite.count()
    for preferred_is_best, verdict in ((True, "chosen"), (False, "rejected")):
        out = tmp_path / f"out-{preferred_is_best}"
        args = ["judge", "--dataset", str(_kway_file(tmp_path, preferred_is_best)), "-p", "judge"]
        args += ["--context", "none", "--order", order, "--api-base", favourite.url, "--personal-data", "any"]
        args += [
            "--providers-dir",
            str(openai_profiles),
            "--cache-dir",
            str(tmp_path / f"c{order}{preferred_is_best}"),
        ]
        result = CliRunner(env={"COLUMNS": "200"}).invoke(main, [*args, "--out", str(out), "--no-progress"])
        assert result.exit_code == 0, result.output
        assert "chance level (a judge picking at random): 25.0% (best of 4)" in result.output
        (run_dir,) = out.iterdir()
        (row,) = pl.read_parquet(run_dir / "judgments.parquet").to_dicts()
        assert row["verdict"] == verdict and row["candidates"] == 4
        # The BEST answer won its three matches, the GOOD one two of them.
        assert (row["score_chosen"], row["score_rejected"]) == (
            (3.0, 2.0) if preferred_is_best else (2.0, 3.0)
        )
    # k(k-1)/2 matches, each in one order drawn per match or in both.
    assert favourite.count() - before == 2 * calls


def test_match_positions_are_drawn_per_item_and_match() -> None:
    drawn = {match_positions(f"item-{n}", 0, j, 42) for n in range(20) for j in (1, 2, 3)}
    assert drawn == {"A", "B"}
    assert match_positions("x", 0, 1, 42) == match_positions("x", 0, 1, 42)


def test_the_chance_level_is_the_mean_of_one_over_k() -> None:
    frame = pl.DataFrame({"pair_id": ["a", "a", "b", "c"], "candidates": [4, 4, 2, 8]})
    chance = chance_of(frame)
    assert chance is not None and chance.level == pytest.approx((1 / 4 + 1 / 2 + 1 / 8) / 3)
    assert chance.label == "29.2% (best of 2 to 8)"
    assert chance_of(pl.DataFrame({"pair_id": ["a"], "candidates": [2]})) is None
    assert chance_of(pl.DataFrame({"pair_id": ["a"]})) is None


# --- the new cards' loaders -----------------------------------------------------------------------------------


def test_personamem_reads_four_options_and_the_context_before_the_question() -> None:
    data = load_dataset(None, "personamem")
    item = next(p for p in data.pairs if p.id == "32k-q-101")
    assert item.k == 4 and item.chosen.startswith("A ginger and basil chicken stir-fry")
    assert not any(c.startswith("(") for c in item.candidates)  # the file's (a)-(d) labels are not shown
    # The context up to end_index_in_shared_context, without the system message that names the persona.
    assert [p.category for p in item.profile][:2] == ["user", "assistant"] and len(item.profile) == 8
    recall = next(p for p in data.pairs if p.id == "32k-q-103")
    assert len(recall.profile) == 4  # end index 5: the system message and four turns, the system left out
    assert dict(item.groups) == {
        "question_type": "acknowledge_latest_user_preferences",
        "topic": "foodRecommendation",
    }
    assert data.subsets == ["32k"]


def test_personal_llm_scores_responses_by_the_users_weights(tmp_path: Path) -> None:
    models = MODELS
    prompt = {"prompt": "Pick one.", **{f"response_{n}": f"response {n}" for n in range(1, 4)}}
    for n in range(1, 4):
        for model in models:
            prompt[f"response_{n}_{model}"] = REWARD_MODELS[model][0]  # every score at its model's mean...
    prompt[f"response_2_{models[0]}"] = REWARD_MODELS[models[0]][0] + 2 * REWARD_MODELS[models[0]][1]
    prompt[f"response_3_{models[1]}"] = REWARD_MODELS[models[1]][0] + 3 * REWARD_MODELS[models[1]][1]
    users = [
        {"person_id": 1, "person_weight": [1.0] + [0.0] * 9, "test_prompt": "Pick one."},
        {"person_id": 2, "person_weight": [0.0, 1.0] + [0.0] * 8, "test_prompt": "Pick one."},
        {"person_id": 3, "person_weight": [0.7, 0.3] + [0.0] * 8, "test_prompt": "Pick one."},
        {"person_id": 4, "person_weight": [0.6, 0.4] + [0.0] * 8, "test_prompt": "Pick one."},
    ]
    write_jsonl(tmp_path / "prompts.jsonl", [prompt])
    write_jsonl(tmp_path / "users.jsonl", users)
    data = load_dataset(str(tmp_path), "personal-llm")
    # ...but response 2 is 2 sd above on the first model (by name) and response 3 is 3 sd above on the second.
    assert {p.user_id: p.chosen for p in data.pairs} == {
        "1": "response 2",
        "2": "response 3",
        "3": "response 2",
    }
    # User 4: 0.6 × 2 = 1.2 against 0.4 × 3 = 1.2, no clear best: no item. The weights are never shown.
    assert any("1 record of several answers had no clear best" in note for note in data.notes)
    assert all(not p.facts and not p.persona for p in data.pairs)


def test_pal_tldr_follows_pals_seen_and_unseen_workers() -> None:
    data = load_dataset(None, "pal-tldr")
    seen = {p.user_id for p in data.pairs if p.seen}
    unseen = {p.user_id for p in data.pairs if p.seen is False}
    assert seen == {"w-seen-a", "w-seen-b", "w-seen-c", "w-seen-d", "w-seen-e"}
    assert unseen == {"RMwrIV50cNusBthNvLs1wSNdqFpQAg", "w-unseen-minority"}
    taste = {p.user_id: dict(p.groups)["taste"] for p in data.pairs}
    # Ranks 4 and 5 of the seen workers (0-based 3 and 4) are PAL's minority; among the unseen, its fixed list.
    assert taste["w-seen-d"] == taste["w-seen-e"] == "shorter" and taste["w-seen-a"] == "longer"
    assert (
        taste["RMwrIV50cNusBthNvLs1wSNdqFpQAg"] == "longer"
        and "RMwrIV50cNusBthNvLs1wSNdqFpQAg" in MAJORITY_UNSEEN
    )
    assert taste["w-unseen-minority"] == "shorter"
    for pair in data.pairs:
        longer = len(pair.chosen) > len(pair.rejected)
        assert longer == (taste[pair.user_id] == "longer") or len(pair.chosen) == len(pair.rejected)
    # An unseen worker's 100 comparisons: the 10 PAL adapts on are the last 10 of RandomState(42)'s permutation.
    rows = [p for p in data.pairs if p.user_id == "w-unseen-minority"]
    assert len(rows) == 90 and len(rows[0].history) == 10
    rows_in_file = [
        json.loads(line)
        for line in (
            ROOT / "prbj/data/benchmarks/pal-tldr/comparisons/validation-00000-of-00001.jsonl"
        ).open()
        if '"w-unseen-minority"' in line
    ]
    adapted = sorted(int(i) for i in np.random.RandomState(42).permutation(100)[90:])
    assert [h.prompt for h in rows[0].history] == [rows_in_file[i]["info"]["post"] for i in adapted]
    # The comparison of a PPO policy is left out, as PAL leaves it.
    assert not any("ppo" in p.question for p in data.pairs)


def test_persona_numbers_its_personas_and_judges_the_second_half_of_their_rows() -> None:
    data = load_dataset(None, "persona")
    assert {p.user_id for p in data.pairs} == {"persona-1", "persona-2", "persona-3"}
    first = [p for p in data.pairs if p.user_id == "persona-1"]
    assert len(first) == 2 and all(len(p.history) == 2 for p in first)
    assert first[0].persona.startswith("age: 34")


def test_a_best_of_k_dataset_fingerprint_names_its_candidates() -> None:
    one = Dataset("mem", (_pair(["a", "b", "c"]),))
    other = Dataset("mem", (_pair(["a", "b", "d"]),))
    assert one.fingerprint() != other.fingerprint()


def test_any_judge_shown_two_answers_plays_the_tournament() -> None:
    """A judge that only says which of two answers it prefers (a plugin's `prefer`) plugs in at PairwiseJudge:
    a best-of-k item is a round-robin of its reads there, as for LLM judges."""
    from prbj.judges.orders import OrderRead, PairwiseJudge

    class Prefers(PairwiseJudge):
        name = "prefers-best"

        async def read_order(self, task: PairTask, first: str, second: str) -> OrderRead:
            rank = {"BEST": 2, "GOOD": 1}
            score = [max((v for k, v in rank.items() if k in text), default=0) for text in (first, second)]
            return OrderRead("ok", "A" if score[0] >= score[1] else "B")

    judge = Prefers()
    right = asyncio.run(judge.judge(PairTask(_pair(["BEST pick", "GOOD pick", "plain", "plainer"]), "none")))
    wrong = asyncio.run(judge.judge(PairTask(_pair(["GOOD pick", "BEST pick", "plain", "plainer"]), "none")))
    assert (right.verdict, right.score_chosen, right.score_rejected) == ("chosen", 3.0, 2.0)
    assert (wrong.verdict, wrong.score_chosen, wrong.score_rejected) == ("rejected", 2.0, 3.0)


def test_a_privacy_step_rewrites_every_candidate_of_an_item() -> None:
    """Under `--personal-data pseudonymized` answers are rewritten: a best-of-k item's other candidates too."""
    from prbj.privacy.pseudonyms import rewrite

    item = _pair(["Ana's pick", "Ana's second", "Ana's third", "Ana's fourth"])
    rewritten = rewrite(item, lambda text: text.replace("Ana", "PERSON_1"), answers=True)
    assert all("Ana" not in text for text in rewritten.candidates)
    assert rewrite(item, lambda text: text.replace("Ana", "PERSON_1"), answers=False).others == item.others


def test_show_and_the_viewer_present_every_candidate_of_an_item(tmp_path: Path) -> None:
    """`prbj show` and the viewer's pair page list all four PersonaMem options, the preferred one first (scores
    name the best of the others), and the viewer asks no A-or-B label of an item that is not a pair."""
    from aiohttp.test_utils import TestClient, TestServer

    from prbj.view.catalog import Catalog
    from prbj.view.server import Viewer, make_app

    out = tmp_path / "runs"
    judged = CliRunner().invoke(
        main, ["judge", "--no-progress", "--benchmark", "personamem", "-p", "length", "--out", str(out),
               "--cache-dir", str(tmp_path / "cache")],
    )  # fmt: skip
    assert judged.exit_code == 0, judged.output
    (run_dir,) = out.iterdir()
    pair = next(p for p in load_dataset(benchmark="personamem").pairs if p.id == "32k-q-101")
    assert pair.k == 4
    shown = CliRunner().invoke(main, ["show", str(run_dir), "--pair", pair.id], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    for n, text in enumerate(pair.candidates, start=1):
        assert f"Answer {n} ({'preferred' if n == 1 else 'other'})" in shown.output and text in shown.output
    assert "/ best other " in shown.output

    async def page() -> str:
        client = TestClient(TestServer(make_app(Viewer(Catalog.open([run_dir]), "alice"))))
        await client.start_server()
        try:
            return await (await client.get(f"/run/{run_dir.name}/pair/{pair.id}")).text()
        finally:
            await client.close()

    html = asyncio.run(page())
    for n in range(1, 5):
        assert f'id="answer-{n}"' in html
    assert all(text.replace("'", "&#39;") in html for text in pair.candidates)
    assert "A best-of-4 item" in html and 'id="label-form"' not in html


def test_length_control_is_computed_on_pairs_only() -> None:
    """Of a best-of-k item a judgment records the words of the preferred answer and of the first other, not of the
    one picked: `length` picks the longest of four (the third here), which the first other is not, and length
    control would count it as having picked the shorter answer. Items are left out; pairs keep their figures."""
    from prbj.analysis.stats import summarize
    from prbj.runs.execute import JUDGMENT_SCHEMA

    item = {"pair_id": "i1", "subset": "s", "judge": "length", "context": "none", "status": "ok",
            "verdict": "rejected", "correct": False, "tie": False, "chosen_words": 5, "rejected_words": 2,
            "candidates": 4}  # fmt: skip
    pair = {**item, "pair_id": "p1", "verdict": "chosen", "correct": True, "candidates": 2}
    schema = {**JUDGMENT_SCHEMA, "candidates": pl.Int64}
    (only_items,) = [r for r in summarize(pl.DataFrame([item], schema=schema), seed=0) if r.subset == "all"]
    assert only_items.length_controlled_accuracy is None and only_items.picked_longer is None
    (mixed,) = [r for r in summarize(pl.DataFrame([item, pair], schema=schema), seed=0) if r.subset == "all"]
    assert (mixed.length_controlled_accuracy, mixed.picked_longer) == (1.0, 1.0)
