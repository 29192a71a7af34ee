"""The one rendering of a user's profile every judge reads: Personalized RewardBench's posts exactly as always,
other kinds in sections with at most k earlier choices, most similar or newest first; and the one place a
privacy step rewrites a profile."""

from __future__ import annotations

import dataclasses

from conftest import make_record
from prbj.context.profile_text import (
    HISTORY_WORDS,
    about_user,
    affinity_documents,
    format_profile,
    ranked_history,
)
from prbj.context.retrieval import rank_profile
from prbj.data.schema import Preference, UserProfile
from prbj.data.validate import parse_pair


def _legacy_posts(question: str, posts, k: int) -> str:
    """How the posts were shown before profiles had kinds (the planner's own formatter)."""
    ranked = rank_profile(question, posts, k)
    return (
        "\n".join(f"- [{p.category or 'post'}] {' '.join(p.text.split())}" for p in ranked)
        or "(no past posts)"
    )


def test_posts_alone_are_shown_exactly_as_before() -> None:
    pair = parse_pair(make_record(1))
    for k in (1, 2, 10):
        assert format_profile(pair.view("profile"), k) == _legacy_posts(pair.question, pair.profile, k)
    assert format_profile(pair.view("none"), 10) == "(no past posts)"


HISTORY = (
    Preference(
        "h1", "How do I bake sourdough bread at home?", "Use a starter and a long cold proof.", "Buy yeast."
    ),
    Preference("h2", "Which camera lens for portraits?", "A bright 50 mm prime.", "A superzoom."),
    Preference("h3", "Best film stock for portraits?", "Portra 400 for skin tones.", "Any film."),
)


def test_earlier_choices_most_similar_or_newest_first_at_most_k() -> None:
    question = "Which lens and film should I use for portraits?"
    assert [h.id for h in ranked_history(question, HISTORY, None, "newest")] == ["h3", "h2", "h1"]
    similar = ranked_history(question, HISTORY, None, "similar")
    assert similar[-1].id == "h1"  # the bread question shares no word with the question
    assert [h.id for h in ranked_history(question, HISTORY, 2, "similar")] == [h.id for h in similar[:2]]


def test_other_kinds_are_shown_in_sections_and_long_texts_cut() -> None:
    long_answer = " ".join(["word"] * (HISTORY_WORDS + 30))
    profile = UserProfile(
        history=(*HISTORY, Preference("h4", "Anything long?", long_answer, "no")),
        persona="A weekend photographer\nwho shoots film.",
        facts=(("budget", "small"), ("age", "35-44")),
    )
    text = about_user("portraits?", profile, 2, "newest")
    assert text.startswith("Persona: A weekend photographer who shoots film.\n\n")
    assert "Stated preferences and background:\n- budget: small\n- age: 35-44" in text
    assert "Earlier choices of this user (most recent first):\n1. Asked: Anything long?" in text
    second = "2. Asked: Best film stock for portraits?\n   Preferred: Portra 400 for skin tones.\n   Over: Any film."
    assert second in text
    assert "3. Asked" not in text
    cut = next(line for line in text.splitlines() if line.strip().startswith("Preferred: word"))
    assert cut.endswith(" …") and cut.count("word") == HISTORY_WORDS


def test_affinity_documents_count_what_was_chosen_and_against_what_was_turned_down() -> None:
    documents, signs = affinity_documents(UserProfile(history=HISTORY[:1], persona="p"))
    assert list(zip(documents, signs, strict=True)) == [
        ("p", 1.0),
        ("How do I bake sourdough bread at home?", 1.0),
        ("Use a starter and a long cold proof.", 1.0),
        ("Buy yeast.", -1.0),
    ]


def test_a_privacy_step_rewrites_every_profile_text_through_one_place() -> None:
    pair = dataclasses.replace(
        parse_pair(make_record(1)), history=HISTORY, persona="Ana from Porto", facts=(("city", "Porto"),)
    )
    masked = pair.with_user_profile(pair.user_profile.map_texts(lambda text: text.replace("Porto", "[CITY]")))
    assert "Porto" not in "\n".join(masked.user_profile.texts())
    assert masked.persona == "Ana from [CITY]" and masked.facts == (("city", "[CITY]"),)
    # Everything else about the pair is kept, ids included.
    assert [h.id for h in masked.history] == ["h1", "h2", "h3"] and masked.chosen == pair.chosen
    assert "[CITY]" in format_profile(masked.view("profile"), 10)


def test_an_export_scrubs_quotes_of_every_kind_of_profile_text() -> None:
    from prbj.export.privacy import ProfileScrubber, personal_texts

    pair = dataclasses.replace(
        parse_pair(make_record(1)), history=HISTORY, persona="Ana walks her dog at dawn"
    )
    assert {"Ana walks her dog at dawn", "Use a starter and a long cold proof."} <= set(personal_texts(pair))
    scrubbed = ProfileScrubber([pair]).scrub("They once chose to use a starter and a long cold proof, so A.")
    assert scrubbed is not None and "long cold proof" not in scrubbed
