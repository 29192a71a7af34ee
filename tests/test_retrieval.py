from __future__ import annotations

import math

import pytest

from prbj.context.retrieval import BM25, rank_profile, tokenize
from prbj.data.schema import ProfilePost


def test_tokenize_drops_function_words_and_punctuation() -> None:
    assert tokenize("The Jazz guitarist's chords, and I'm tired!") == [
        "jazz",
        "guitarist's",
        "chords",
        "tired",
    ]


def test_bm25_matches_a_hand_computation() -> None:
    docs = [["jazz", "guitar"], ["jazz", "jazz", "drums", "kit"], ["piano"]]
    index = BM25(docs, k1=1.2, b=0.75)
    avg = 7 / 3
    idf_jazz = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    idf_drums = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))

    def term(tf: int, length: int, idf: float) -> float:
        return idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * length / avg))

    expected = [term(1, 2, idf_jazz), term(2, 4, idf_jazz) + term(1, 4, idf_drums), 0.0]
    assert index.scores(["jazz", "drums"]) == pytest.approx(expected)


def test_rank_profile_orders_by_relevance_and_cuts_at_k() -> None:
    posts = [
        ProfilePost("a", "cooking", "Sourdough starter keeps dying"),
        ProfilePost("b", "music", "Jazz guitar chord voicings for beginners"),
        ProfilePost("c", "music", "Best jazz standards to learn on guitar"),
    ]
    ranked = rank_profile("How do I learn jazz guitar standards?", posts, k=2)
    assert [p.id for p in ranked] == ["c", "b"]
    assert rank_profile("anything", []) == []
