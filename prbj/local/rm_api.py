"""What prbj hands a reward model written in Python (`-p py:FILE.py:NAME`, `-p py:module:NAME`, an entry point of
the group `prbj.judges`), and what it expects back; docs/plugins.md is the reader's version.

    score(items: list[ScoreItem]) -> list[float]         one reward per item, higher is better (required)
    prefer(items: list[PairItem]) -> list[float]         P(the first shown answer is preferred), in [0, 1]
    fit_user(user_id: str, history: list[HistoryItem])   once per user, before any of that user's items
    name, version                                        attributes; version is part of every cache key

Items are plain dataclasses (they pickle, so they travel to Ray actors as they are). A user's `history`
is one tuple shared by all of that user's items: their own train and validation preferences, never a test row
and never another user's. `HistoryItem` is prbj's own record of one earlier preference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from prbj.data.schema import Preference

# One earlier preference of the user: id, prompt (the question or the rendered conversation), chosen, rejected.
HistoryItem = Preference


@dataclass(slots=True)
class ScoreItem:
    """One answer to score for one user."""

    user_id: str
    pair_id: str
    # The question, or the conversation rendered as the LLM judges see it (`User: …`, `Assistant: …`).
    prompt: str
    response: str
    # What describes the user besides their history, by context (docs/plugins.md): None in the `none` context.
    persona: str | None = None
    # The user's groups for statistics (age band, region, tier, ...), name → value.
    groups: Mapping[str, str] = field(default_factory=dict)
    history: Sequence[HistoryItem] = ()


@dataclass(slots=True)
class PairItem:
    """Two answers to one prompt for one user, in the order shown: `prefer` says how likely `first` wins."""

    user_id: str
    pair_id: str
    prompt: str
    first: str
    second: str
    persona: str | None = None
    groups: Mapping[str, str] = field(default_factory=dict)
    history: Sequence[HistoryItem] = ()


@runtime_checkable
class RewardModel(Protocol):
    """The one method a reward model must have; `prefer`, `fit_user`, `name` and `version` are optional (see the
    module docstring), so they are not part of this protocol's check."""

    def score(self, items: list[ScoreItem]) -> Sequence[float]: ...


__all__ = ["HistoryItem", "PairItem", "RewardModel", "ScoreItem"]
