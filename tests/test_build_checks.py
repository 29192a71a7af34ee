"""The build's quality gate (check-reply parsing, keep/drop reasons) and Cohen's κ against hand-computed values."""

from __future__ import annotations

import pytest

from prbj.build.checks import (
    CheckScores,
    Thresholds,
    answer_problems,
    check_problems,
    parse_check,
)
from prbj.build.kappa import cohen_kappa
from prbj.build.pipeline import clean_answer

FULL = CheckScores(5, 5, 5, 5)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"factuality": 5, "relevance": 4, "helpfulness": 4, "adherence": 2}', (5, 4, 4, 2)),
        # Reasoning first, then a fenced block with renamed keys and a number as text.
        (
            'Thinking.\n```json\n{"Factual accuracy": 4, "Relevance": 5, "Helpfulness": "3", '
            '"Personal adherence": 1}\n```',
            (4, 5, 3, 1),
        ),
        # Nested scores with reasons; an earlier incomplete object is ignored for the complete one.
        (
            '{"note": 1} then {"scores": {"factuality": {"score": 3, "why": "x"}, "relevance": 3, '
            '"helpfulness": 3, "adherence": 5}}',
            (3, 3, 3, 5),
        ),
        # No JSON at all, but one "name: N" line per dimension.
        ("Factuality: 5\nRelevance: 5\nHelpfulness: 4\nAdherence: 3", (5, 5, 4, 3)),
        (
            '<think>{"factuality": 1}</think>{"factuality":2,"relevance":2,"helpfulness":2,"adherence":2}',
            (2, 2, 2, 2),
        ),
    ],
)
def test_check_replies_are_read_in_their_usual_shapes(reply: str, expected: tuple[int, ...]) -> None:
    scores = parse_check(reply)
    assert scores is not None
    assert (scores.factuality, scores.relevance, scores.helpfulness, scores.adherence) == expected


@pytest.mark.parametrize(
    "reply",
    [
        None,
        "",
        "This answer seems rather good overall.",
        '{"factuality": 5, "relevance": 5, "helpfulness": 5}',  # adherence missing
        '{"factuality": 7, "relevance": 5, "helpfulness": 5, "adherence": 5}',  # off the 1-5 scale
        '{"factuality": 0, "relevance": 5, "helpfulness": 5, "adherence": 5}',
        '{"factuality": "high", "relevance": 5, "helpfulness": 5, "adherence": 5}',
    ],
)
def test_unreadable_check_replies_are_none_never_a_guess(reply: str | None) -> None:
    assert parse_check(reply) is None


def test_answer_problems_need_no_model() -> None:
    limits = Thresholds(max_words=5)
    assert answer_problems("one two three", "four five six", limits) == []
    assert answer_problems("Same  answer here", "same answer HERE", limits) == ["identical_answers"]
    assert answer_problems("", "x", limits) == ["empty_chosen"]
    assert answer_problems("a b c d e f", "a b c d e f g", limits) == ["chosen_too_long", "rejected_too_long"]
    assert answer_problems("a b c d e", "v w x y z", limits) == []  # the limit itself is allowed


def test_check_problems_apply_quality_floor_and_adherence_gap() -> None:
    limits = Thresholds(min_quality=4, min_gap=2)
    assert check_problems(CheckScores(5, 4, 4, 5), CheckScores(4, 5, 4, 3), limits) == []
    assert check_problems(CheckScores(5, 4, 4, 5), CheckScores(4, 5, 4, 4), limits) == ["small_adherence_gap"]
    assert check_problems(CheckScores(3, 5, 5, 5), CheckScores(5, 5, 3, 1), limits) == [
        "low_quality_chosen",
        "low_quality_rejected",
    ]
    # Adherence is not a general-quality score: a rejected answer may (should) score low on it.
    assert check_problems(FULL, CheckScores(5, 5, 5, 1), limits) == []


def test_clean_answer_drops_reasoning_labels_and_quotes() -> None:
    assert clean_answer('<think>plan it</think>\n Answer: "Use film." ') == "Use film."
    assert clean_answer("Plain text.") == "Plain text."


def test_kappa_unweighted_matches_the_hand_computation() -> None:
    # 10 items; agreement on 7 (p_o = 0.7). Rater 1 says Y 7 times, rater 2 6 times:
    # p_e = 0.7·0.6 + 0.3·0.4 = 0.54, κ = (0.7 − 0.54) / (1 − 0.54) = 0.16 / 0.46 = 8/23.
    first = list("YYYNNYYNYY")
    second = list("YNYNNYYYYN")
    assert cohen_kappa(first, second) == pytest.approx(8 / 23)


def test_kappa_quadratic_matches_the_hand_computation() -> None:
    # Pairs (1,1) (2,3) (3,3) (3,2): Σ w·O = (¼ + ¼) / 4 = 0.125 (w = (i−j)²/(k−1)², k = 3).
    # Marginals ¼, ¼, ½ for both raters: Σ w·E = 2·¼·(1/16) + 2·1·(1/8) + 2·¼·(1/8) = 0.34375.
    # κ = 1 − 0.125 / 0.34375 = 7/11.
    first, second = [1, 2, 3, 3], [1, 3, 3, 2]
    assert cohen_kappa(first, second, categories=[1, 2, 3], weights="quadratic") == pytest.approx(7 / 11)
    # Unused points at the end of a 1-5 scale scale every weight by the same factor: κ is unchanged.
    assert cohen_kappa(first, second, categories=[1, 2, 3, 4, 5], weights="quadratic") == pytest.approx(
        7 / 11
    )
    # Unweighted on the same data: p_o = ½, p_e = 1/16 + 1/16 + ¼ = 0.375, κ = 0.125 / 0.625 = 0.2.
    assert cohen_kappa(first, second) == pytest.approx(0.2)


def test_kappa_edges() -> None:
    assert cohen_kappa([1, 5], [5, 1], categories=[1, 2, 3, 4, 5], weights="quadratic") == pytest.approx(-1.0)
    assert cohen_kappa([2, 4, 4], [2, 4, 4], categories=[1, 2, 3, 4, 5], weights="quadratic") == 1.0
    # Both raters constant on the same label: chance agreement is already perfect, κ is undefined.
    assert cohen_kappa([3, 3], [3, 3], categories=[1, 2, 3, 4, 5], weights="quadratic") is None
    assert cohen_kappa([], []) is None
    with pytest.raises(ValueError, match="different numbers of items"):
        cohen_kappa([1], [1, 2])
    with pytest.raises(ValueError, match="not on the scale"):
        cohen_kappa([1, 6], [1, 2], categories=[1, 2, 3, 4, 5])
