from __future__ import annotations

import pytest

from conftest import make_record
from prbj.data.validate import parse_pair
from prbj.judges.base import PairTask
from prbj.judges.baselines import BM25ProfileJudge, EmbedProfileJudge, LengthJudge, RandomJudge


def _pair(chosen: str, rejected: str, **overrides):
    return parse_pair(make_record(1, chosen=chosen, rejected=rejected, **overrides))


async def _verdict(judge, pair) -> str:
    return (await judge.judge(PairTask(pair, judge.context))).verdict


async def test_length_prefers_more_words() -> None:
    judge = LengthJudge()
    assert await _verdict(judge, _pair("one two three four", "one two three")) == "chosen"
    assert await _verdict(judge, _pair("one two", "one two three")) == "rejected"


async def test_length_tie_is_a_tie_not_a_win() -> None:
    judgment = await LengthJudge().judge(PairTask(_pair("alpha beta", "gamma delta"), "none"))
    assert judgment.verdict == "tie"
    assert judgment.tie and not judgment.correct


async def test_random_is_seeded_and_order_free() -> None:
    pair = _pair("first answer", "second answer")
    view = pair.view("none")
    a = await RandomJudge(seed=3).score(view, ["first answer", "second answer"])
    b = await RandomJudge(seed=3).score(view, ["second answer", "first answer"])
    c = await RandomJudge(seed=4).score(view, ["first answer", "second answer"])
    assert a == b[::-1]
    assert a != c
    assert all(0.0 <= s < 1.0 for s in a)


async def test_random_is_near_chance_over_many_pairs() -> None:
    judge = RandomJudge(seed=0)
    wins = 0
    for i in range(400):
        pair = parse_pair(make_record(i, chosen=f"chosen text {i}", rejected=f"rejected text {i}"))
        wins += (await judge.judge(PairTask(pair, "none"))).correct
    assert 160 < wins < 240


PROFILE = [
    {
        "id": "p1",
        "category": "outdoors",
        "text": "Planning a hiking trip through alpine trails with my tent.",
    },
    {"id": "p2", "category": "outdoors", "text": "Which trail shoes grip best on wet granite when hiking?"},
    {"id": "p3", "category": "outdoors", "text": "Camping above the treeline: how cold does the tent get?"},
]
ON_TOPIC = "Pack layers for the alpine trails; nights in a tent above the treeline get cold."
OFF_TOPIC = "Stamp collectors value perforation gauges and watermark detection for rare issues."


async def test_bm25_profile_prefers_the_answer_near_the_profile() -> None:
    judge = BM25ProfileJudge()
    assert await _verdict(judge, _pair(ON_TOPIC, OFF_TOPIC, profile=PROFILE)) == "chosen"
    assert await _verdict(judge, _pair(OFF_TOPIC, ON_TOPIC, profile=PROFILE)) == "rejected"


async def test_bm25_profile_is_not_won_by_padding() -> None:
    judge = BM25ProfileJudge()
    view = _pair(ON_TOPIC, OFF_TOPIC, profile=PROFILE).view("profile")
    padded = ON_TOPIC + " " + " ".join(f"filler{i}" for i in range(40))
    plain, long = await judge.score(view, [ON_TOPIC, padded])
    assert long < plain


async def test_bm25_profile_without_shared_words_ties() -> None:
    judgment = await BM25ProfileJudge().judge(
        PairTask(_pair("zebra quartz", "yodel xylophone", profile=PROFILE), "profile")
    )
    assert judgment.verdict == "tie"
    assert judgment.score_chosen == judgment.score_rejected == 0.0


async def test_embed_profile_prefers_the_answer_near_the_profile() -> None:
    judge = EmbedProfileJudge()
    view = _pair(ON_TOPIC, OFF_TOPIC, profile=PROFILE).view("profile")
    near, far = await judge.score(view, [ON_TOPIC, OFF_TOPIC])
    assert near > far
    assert -1.0 <= far <= 1.0 and -1.0 <= near <= 1.0
    # Scoring one answer alone gives the same number: scores do not depend on the other answer.
    assert (await judge.score(view, [OFF_TOPIC]))[0] == pytest.approx(far, abs=1e-9)
