"""Offline stand-ins for a best-of-N policy and gold judge, so that the whole BoN pipeline runs on the bundled
sample without a model or a key (`prbj bon sample --policy demo`, `prbj bon evaluate --gold demo`).

**A demo, not a result.** The demo policy writes no answer of its own: sample i of a question stitches together
a few of the user's past posts (the question's top --k-profile posts, picked by a seeded draw of seed + i),
after a fixed opening line. The demo gold judge grades each rubric aspect by word overlap between the answer and
the aspect (its text, evidence and reason): 2 when a quarter or more of the aspect's content words occur in the
answer, 1 when any do, else 0. Both are deterministic and free; the curves they give only show that the stages
connect, and say nothing about any reward model.
"""

from __future__ import annotations

import random
import re
from typing import Any

from prbj.bon.gold import MAX_MATCH, GoldGrade, GoldJudge
from prbj.context.retrieval import rank_profile
from prbj.data.schema import Pair
from prbj.llm.gateway import Gateway
from prbj.llm.providers import ProviderSpec

DEMO = "demo"
DEMO_NOTE = "offline demo stand-in (no model): its figures say nothing about any reward model"
OPENING = "Here is what I would suggest, given what you have shared before."
_WORD = re.compile(r"[a-z']{4,}")
_STOP = frozenset(
    "about after again also because been before being between both could does doing down during each from "
    "have having here into just like made make more most much must only other over same should some such than "
    "that their them then there these they this those through under very want wants what when where which while "
    "with would your user users".split()
)


def demo_provider(role: str) -> ProviderSpec:
    """A ProviderSpec that names the demo in run.json; nothing is ever sent to it."""
    return ProviderSpec(
        name=DEMO,
        model=f"prbj-demo/{role}",
        api_key_env=None,
        api_key_required=False,
        paid=False,
        input_price=0.0,
        output_price=0.0,
        price_source="demo",
    )


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def demo_answer(pair: Pair, index: int, *, k_profile: int, seed: int | None) -> str:
    """Sample `index` of the demo policy for `pair`: an opening line and one to three of the top posts."""
    view = pair.view("profile")  # question and posts only: this view cannot read the rubric
    posts = [post.text for post in rank_profile(view.question, view.profile, k=max(1, k_profile))]
    draw = random.Random(f"{seed}:{pair.id}:{index}")
    picked = draw.sample(posts, k=min(len(posts), draw.randint(1, 3))) if posts else []
    return " ".join([OPENING, *picked])


def aspect_grade(answer: str, aspect_text: str) -> int:
    wanted = content_words(aspect_text)
    if not wanted:
        return 0
    share = len(wanted & content_words(answer)) / len(wanted)
    return MAX_MATCH if share >= 0.25 else 1 if share > 0 else 0


class DemoGoldJudge(GoldJudge):
    """Grades by word overlap with the rubric aspects, without a call (see the module's note)."""

    def __init__(self, gateway: Gateway) -> None:
        super().__init__(demo_provider("gold"), gateway, "per-answer")

    def describe(self) -> dict[str, Any]:
        return {"provider": DEMO, "model": self.provider.model, "mode": "word overlap", "note": DEMO_NOTE,
                "example_score": "sum of aspect scores (0/1/2) / (2 * aspects), in [0, 1]"}  # fmt: skip

    async def grade(self, pair: Pair, answer: str) -> GoldGrade:
        aspects = pair.view("oracle").rubric_aspects
        if not aspects:
            return GoldGrade(status="no_rubric", error=f"question {pair.id} has no rubric aspects to grade")
        scores = [aspect_grade(answer, f"{a.aspect} {a.evidence} {a.reason}") for a in aspects]
        return GoldGrade(status="ok", aspect_scores=scores)
