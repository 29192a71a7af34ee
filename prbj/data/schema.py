"""The benchmark's records, and the guarded view of a record that judges receive.

A `Pair` carries everything, including the scoring standard (`narrative`, `rubric_aspects`). Judges never get
a `Pair`: they get a `JudgeView` made by `Pair.view(context)`, which holds the scoring standard only when the
context is the explicitly named oracle setting. Reading it in any other setting raises `LeakageError`, so a judge
cannot look at the answer key by accident.

Every pair belongs to a user (`user_id`): on benchmarks without users (Personalized RewardBench) each pair is its
own user, its `user_id` the pair's id. Who the user is never reaches a judge: a `JudgeView` has no user id, groups
or seen flag.

What a judge may learn about the user is the pair's `UserProfile` (`Pair.user_profile`): past posts (Personalized
RewardBench), the user's own earlier preferences (`history`: train and validation rows of the same user, never a
row that is judged), a persona text, and stated preferences or demographics (`facts`). Every such text passes
through `Pair.user_profile` and `Pair.with_user_profile`, the one place a privacy step transforms it per user.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal, get_args

from prbj.errors import LeakageError

SUBSETS: tuple[str, ...] = (
    "Art_and_Entertainment",
    "Lifestyle_and_Personal_Development",
    "Society_and_Culture",
)

# `swapped-profile` is the profile-reliance control: the judge is shown another user's profile in place of the
# pair's own (prbj.context.swap draws whose), and never the scoring standard. `synthesized` shows a persona a
# model wrote from the user's earlier choices (prbj.context.synthesizer, SynthesizeMe), and nothing else.
Context = Literal["none", "profile", "planner", "oracle", "swapped-profile", "synthesized"]
CONTEXTS: tuple[str, ...] = get_args(Context)
SWAPPED_PROFILE: Context = "swapped-profile"
SYNTHESIZED: Context = "synthesized"


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
class Preference:
    """One earlier preference of the user: what they were asked (the rendered conversation) and which answer
    they chose over which."""

    id: str
    prompt: str
    chosen: str
    rejected: str


# A conversation turn: (role, content), role one of "system", "user", "assistant".
Turn = tuple[str, str]


@dataclass(frozen=True, slots=True)
class UserProfile:
    """Everything a judge may learn about the user beyond the question, of every kind a benchmark has."""

    posts: tuple[ProfilePost, ...] = ()
    # Earlier preferences of the same user, oldest first.
    history: tuple[Preference, ...] = ()
    persona: str = ""
    # Stated preferences and demographics, as (name, value) in the benchmark's order.
    facts: tuple[tuple[str, str], ...] = ()

    @property
    def only_posts(self) -> bool:
        """Past posts and nothing else (or nothing at all): the Personalized RewardBench kind, shown exactly as
        that benchmark's protocol shows it."""
        return not (self.history or self.persona or self.facts)

    def texts(self) -> list[str]:
        """Every text in the profile, in a fixed order (posts, history, persona, facts)."""
        history = [text for p in self.history for text in (p.prompt, p.chosen, p.rejected)]
        facts = [text for pair in self.facts for text in pair]
        return [
            *(post.text for post in self.posts),
            *history,
            *([self.persona] if self.persona else []),
            *facts,
        ]

    def map_texts(self, transform: Callable[[str], str]) -> UserProfile:
        """This profile with every text the user wrote or was shown passed through `transform` (ids kept)."""
        return UserProfile(
            posts=tuple(ProfilePost(p.id, p.category, transform(p.text)) for p in self.posts),
            history=tuple(
                Preference(h.id, transform(h.prompt), transform(h.chosen), transform(h.rejected))
                for h in self.history
            ),
            persona=transform(self.persona) if self.persona else "",
            facts=tuple((name, transform(value)) for name, value in self.facts),
        )


NO_PROFILE = UserProfile()


def _profile(
    posts: tuple[ProfilePost, ...],
    history: tuple[Preference, ...],
    persona: str,
    facts: tuple[tuple[str, str], ...],
) -> UserProfile:
    if not (posts or history or persona or facts):
        return NO_PROFILE
    return UserProfile(posts, history, persona, facts)


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
    # The conversation the answers reply to, when it has more than the one user turn `question` renders;
    # () for a single question.
    turns: tuple[Turn, ...] = ()
    # The rest of the user's profile besides `profile` (posts): see UserProfile.
    history: tuple[Preference, ...] = ()
    persona: str = ""
    facts: tuple[tuple[str, str], ...] = ()
    # A best-of-k item (k ≥ 3): the candidates besides `chosen` (the preferred one) and `rejected`; () for a pair.
    others: tuple[str, ...] = ()

    @property
    def candidates(self) -> tuple[str, ...]:
        """Every answer of the item, the preferred one first: (chosen, rejected) for a pair."""
        return (self.chosen, self.rejected, *self.others)

    @property
    def k(self) -> int:
        """How many answers the item holds: 2 for a pair."""
        return 2 + len(self.others)

    @property
    def user_profile(self) -> UserProfile:
        """Everything about the user a judge may be shown (read here, rewritten by `with_user_profile`)."""
        return _profile(self.profile, self.history, self.persona, self.facts)

    def with_user_profile(self, profile: UserProfile) -> Pair:
        """This pair with `profile` in place of its own (e.g. a privacy step's pseudonymised copy)."""
        return replace(
            self, profile=profile.posts, history=profile.history, persona=profile.persona, facts=profile.facts
        )

    def view(
        self, context: Context, *, swapped_profile: UserProfile | None = None, persona: str | None = None
    ) -> JudgeView:
        """What a judge may see in `context`; the scoring standard only in the oracle setting. In the
        `swapped-profile` setting the view holds `swapped_profile` (another user's) instead of this pair's; in
        the `synthesized` setting it holds `persona` (written from this user's earlier choices; "" when they
        have none) and nothing else of the profile."""
        if context not in CONTEXTS:
            raise ValueError(f"unknown context {context!r}; expected one of {', '.join(CONTEXTS)}")
        if (context == SWAPPED_PROFILE) != (swapped_profile is not None):
            raise ValueError("a swapped profile is given exactly in the 'swapped-profile' context")
        if (context == SYNTHESIZED) != (persona is not None):
            raise ValueError("a synthesized persona is given exactly in the 'synthesized' context")
        oracle = context == "oracle"
        if context == "none":
            shown = NO_PROFILE
        elif persona is not None:
            shown = UserProfile(persona=persona)
        else:
            shown = swapped_profile if swapped_profile is not None else self.user_profile
        return JudgeView(
            pair_id=self.id,
            subset=self.category,
            question=self.question,
            profile=shown.posts,
            context=context,
            _narrative=self.narrative if oracle else None,
            _rubric_aspects=self.rubric_aspects if oracle else None,
            turns=self.turns,
            history=shown.history,
            persona=shown.persona,
            facts=shown.facts,
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
    # The conversation the answers reply to (see Pair.turns); () for a single question.
    turns: tuple[Turn, ...] = ()
    # The rest of the profile shown (see UserProfile); empty in the `none` context.
    history: tuple[Preference, ...] = ()
    persona: str = ""
    facts: tuple[tuple[str, str], ...] = ()

    @property
    def user_profile(self) -> UserProfile:
        return _profile(self.profile, self.history, self.persona, self.facts)

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
