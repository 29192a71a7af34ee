"""A user's profile as text, the one rendering every judge reads (LLM judges, the planner, scalar reward models),
so that no judge knows which benchmark it runs on.

- Past posts only (Personalized RewardBench): the top `k` posts by BM25 relevance to the question, one line each,
  exactly as that benchmark has always been shown (`- [category] text`).
- Any other kind (earlier preferences of the same user, a persona, stated preferences or demographics), in
  sections, each present only when the profile has it:

      Persona: <text>

      Stated preferences and background:
      - <name>: <value>

      Past posts (most relevant first):
      - [category] <text>

      Earlier choices of this user (most relevant first | most recent first):
      1. Asked: <prompt>
         Preferred: <chosen answer>
         Over: <rejected answer>

  At most `k` earlier choices are shown, ranked by BM25 relevance of their prompt and chosen answer to the
  question (`similar`, ties newest first) or newest first (`newest`); each text is flattened to one line and
  cut at HISTORY_WORDS words, so that ten earlier choices fit a judge's context.

`affinity_documents` is the profile as documents for lexical and embedding baselines: what the user wrote, was
described by or chose counts for an answer, what they turned down counts against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

from prbj.context.retrieval import BM25, rank_profile, tokenize
from prbj.data.schema import JudgeView, Preference, UserProfile

ProfileOrder = Literal["similar", "newest"]
PROFILE_ORDERS: tuple[str, ...] = get_args(ProfileOrder)
DEFAULT_PROFILE_K = 10
# Each text of an earlier choice is cut at this many words: ten choices of two long chat answers each would
# otherwise crowd out the question.
HISTORY_WORDS = 120
NO_POSTS = "(no past posts)"


def flat(text: str, words: int | None = None) -> str:
    """`text` on one line, cut after `words` words (with an ellipsis) when given."""
    parts = text.split()
    if words is not None and len(parts) > words:
        return " ".join(parts[:words]) + " …"
    return " ".join(parts)


def ranked_history(
    question: str, history: Sequence[Preference], k: int | None, order: ProfileOrder = "similar"
) -> list[Preference]:
    """The user's earlier preferences, most relevant to `question` (or newest) first, top `k`."""
    newest_first = list(reversed(history))
    if order == "newest" or not history:
        ranked = newest_first
    else:
        index = BM25([tokenize(f"{h.prompt} {h.chosen}") for h in newest_first])
        scores = index.scores(tokenize(question))
        ranked = [newest_first[i] for i in sorted(range(len(newest_first)), key=lambda i: (-scores[i], i))]
    return ranked if k is None else ranked[:k]


def post_lines(question: str, profile: UserProfile, k: int) -> list[str]:
    return [f"- [{p.category or 'post'}] {flat(p.text)}" for p in rank_profile(question, profile.posts, k)]


def format_profile(view: JudgeView, k: int, order: ProfileOrder = "similar") -> str:
    """The profile a judge is shown with the question (see the module docstring)."""
    profile = view.user_profile
    if profile.only_posts:
        return "\n".join(post_lines(view.question, profile, k)) or NO_POSTS
    return about_user(view.question, profile, k, order)


def about_user(question: str, profile: UserProfile, k: int, order: ProfileOrder = "similar") -> str:
    """Every kind of profile but posts alone, in sections (see the module docstring)."""
    sections: list[str] = []
    if profile.persona:
        sections.append(f"Persona: {flat(profile.persona)}")
    if profile.facts:
        sections.append(
            "Stated preferences and background:\n"
            + "\n".join(f"- {flat(name)}: {flat(value)}" for name, value in profile.facts)
        )
    if profile.posts:
        sections.append("Past posts (most relevant first):\n" + "\n".join(post_lines(question, profile, k)))
    if profile.history:
        shown = ranked_history(question, profile.history, k, order)
        heading = "most relevant first" if order == "similar" else "most recent first"
        entries = [
            f"{n}. Asked: {flat(h.prompt, HISTORY_WORDS)}\n"
            f"   Preferred: {flat(h.chosen, HISTORY_WORDS)}\n"
            f"   Over: {flat(h.rejected, HISTORY_WORDS)}"
            for n, h in enumerate(shown, start=1)
        ]
        sections.append(f"Earlier choices of this user ({heading}):\n" + "\n".join(entries))
    return "\n\n".join(sections)


def affinity_documents(profile: UserProfile) -> tuple[list[str], list[float]]:
    """The profile as documents with a sign each: +1 for what the user wrote (posts, earlier prompts), is
    described by (persona, facts) or chose; -1 for the answers they turned down."""
    documents: list[str] = []
    signs: list[float] = []

    def add(text: str, sign: float) -> None:
        if text.strip():
            documents.append(text)
            signs.append(sign)

    for post in profile.posts:
        add(post.text, 1.0)
    add(profile.persona, 1.0)
    for name, value in profile.facts:
        add(f"{name}: {value}", 1.0)
    for earlier in profile.history:
        add(earlier.prompt, 1.0)
        add(earlier.chosen, 1.0)
        add(earlier.rejected, -1.0)
    return documents, signs
