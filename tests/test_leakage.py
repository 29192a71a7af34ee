"""The scoring standard (narrative, rubric aspects) must reach a judge only in the oracle setting."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import make_record
from prbj.data.validate import parse_pair
from prbj.errors import LeakageError
from prbj.judges.base import PairTask
from prbj.judges.baselines import BASELINES, make_baseline


@pytest.fixture
def pair():
    return parse_pair(make_record(1))


@pytest.mark.parametrize("context", ["none", "profile", "planner"])
def test_non_oracle_views_hold_no_scoring_standard(pair, context) -> None:
    view = pair.view(context)
    with pytest.raises(LeakageError, match="oracle"):
        _ = view.narrative
    with pytest.raises(LeakageError, match="oracle"):
        _ = view.rubric_aspects
    # Not merely hidden behind a property: the text is not in the object at all.
    dump = repr(view) + repr(dataclasses.astuple(view))
    assert "SECRET" not in dump


def test_oracle_view_exposes_the_standard(pair) -> None:
    view = pair.view("oracle")
    assert view.narrative.startswith("SECRET-NARRATIVE")
    assert view.rubric_aspects[0].aspect == "SECRET-ASPECT budget"


def test_question_only_view_has_no_profile(pair) -> None:
    assert pair.view("none").profile == ()
    assert len(pair.view("profile").profile) == 3


def test_views_never_say_which_answer_is_chosen(pair) -> None:
    fields = {f.name for f in dataclasses.fields(pair.view("oracle"))}
    assert not fields & {"chosen", "rejected"}


def test_unknown_context_is_refused(pair) -> None:
    with pytest.raises(ValueError, match="unknown context"):
        pair.view("gold")


@pytest.mark.parametrize("name", list(BASELINES))
async def test_baselines_judge_without_touching_the_standard(pair, name) -> None:
    judge = make_baseline(name, seed=1)
    assert judge.context != "oracle"
    judgment = await judge.judge(PairTask(pair, judge.context))
    assert judgment.status == "ok"
