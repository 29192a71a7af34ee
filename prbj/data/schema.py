"""The benchmark's records, and the guarded view of a record that judges receive.

A `Pair` carries everything, including the scoring standard (`narrative`, `rubric_aspects`). Judges never get
a `Pair`: they get a `JudgeView` made by `Pair.view(context)`, which holds the scoring standard only when the
context is the explicitly named oracle setting. Reading it in any other setting raises `LeakageError`, so a judge
cannot look at the answer key by accident.

Every pair belongs to a user (`user_id`): on benchmarks without users (Personalized RewardBench) each pair is its
own user, its `user_id` the pair's id. Who the user is never reaches a judge: a `JudgeView` has no user id, groups
or seen flag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from prbj.errors import LeakageError

SUBSETS: tuple[str, ...] = (
    "Art_and_Entertainment",
    "Lifestyle_and_Personal_Development",
    "Society_and_Culture",
)

# `swapped-profile` is the profile-reliance control: the judge is shown another user's profile in place of the
# pair's own (prbj.context.swap draws whose), and never the scoring standard.
Context = Literal["none", "profile", "planner", "oracle", "swapped-profile"]
CONTEXTS: tuple[str, ...] = get_args(Context)
SWAPPED_PROFILE: Context = "swapped-profile"


@dataclass(frozen=True, slots=True)
class ProfilePost:
    id: str
    category: str
    text: str


@dataclass(frozen=True, slots=True)
class RubricAspect:
    aspect: str
    evidence: str
    reason: str


@dataclass(frozen=True, slots=True)
class Pair:
    id: str
    category: str
    question: str
    profile: tuple[ProfilePost, ...]
    narrative: str
    rubric_aspects: tuple[RubricAspect, ...]
    chosen: str
    rejected: str
    # Who asked: every loader sets it (the pair's own id where a benchmark has no users), so that statistics over
    # users never meet an empty id.
    user_id: str
    # The user's groups (age band, region, tier, ...) as (name, value) pairs sorted by name; () when none.
    groups: tuple[tuple[str, str], ...] = ()
    # Whether the user appears in the benchmark's training data (seen) or not; None where the benchmark does not
    # say.
    seen: bool | None = None

    def view(self, context: Context, *, swapped_profile: tuple[ProfilePost, ...] | None = None) -> JudgeView:
        """What a judge may see in `context`; the scoring standard only in the oracle setting. In the
        `swapped-profile` setting the view holds `swapped_profile` (another user's) instead of this pair's."""
        if context not in CONTEXTS:
            raise ValueError(f"unknown context {context!r}; expected one of {', '.join(CONTEXTS)}")
        if (context == SWAPPED_PROFILE) != (swapped_profile is not None):
            raise ValueError("a swapped profile is given exactly in the 'swapped-profile' context")
        oracle = context == "oracle"
        profile = swapped_profile if swapped_profile is not None else self.profile
        return JudgeView(
            pair_id=self.id,
            subset=self.category,
            question=self.question,
            profile=profile if context != "none" else (),
            context=context,
            _narrative=self.narrative if oracle else None,
            _rubric_aspects=self.rubric_aspects if oracle else None,
        )


@dataclass(frozen=True, slots=True)
class JudgeView:
    """The part of a pair a judge may read. It never holds which answer is chosen."""

    pair_id: str
    subset: str
    question: str
    profile: tuple[ProfilePost, ...]
    context: Context
    _narrative: str | None = None
    _rubric_aspects: tuple[RubricAspect, ...] | None = None

    @property
    def narrative(self) -> str:
        if self._narrative is None:
            raise LeakageError(
                f"pair {self.pair_id}: the narrative is the scoring standard and is only visible "
                f"in the 'oracle' context (this view is {self.context!r})"
            )
        return self._narrative

    @property
    def rubric_aspects(self) -> tuple[RubricAspect, ...]:
        if self._rubric_aspects is None:
            raise LeakageError(
                f"pair {self.pair_id}: rubric aspects are the scoring standard and are only visible "
                f"in the 'oracle' context (this view is {self.context!r})"
            )
        return self._rubric_aspects
