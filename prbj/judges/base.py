"""What every judge returns, and the base class for judges that score each answer on its own."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from prbj.data.schema import Context, JudgeView, Pair, UserProfile
from prbj.data.status import Status

# "inconsistent": judged in both orders, the two verdicts disagree (never counted as correct).
Verdict = Literal["chosen", "rejected", "tie", "inconsistent"]


class ScoreFailure(Exception):
    """A judge could not produce a score; the judgment gets this status instead of a number."""

    def __init__(self, status: Status, message: str, cause: str | None = None) -> None:
        # The status leads what a caller shows of it (the reward server's 500): "truncated: the reply reached …".
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.cause = cause


@dataclass(frozen=True, slots=True)
class PairTask:
    """One pair to judge: the guarded view plus the two answers. Only the engine and the base classes read
    which answer is chosen; subclasses score answer texts and never see the label."""

    pair: Pair
    context: Context
    # Another user's profile, shown in place of the pair's own in the `swapped-profile` context only.
    swapped_profile: UserProfile | None = None
    # The persona written from the user's earlier choices, shown in the `synthesized` context only.
    persona: str | None = None

    @property
    def view(self) -> JudgeView:
        return self.pair.view(self.context, swapped_profile=self.swapped_profile, persona=self.persona)


@dataclass(slots=True)
class Judgment:
    pair_id: str
    subset: str
    judge: str
    context: str
    status: Status = "ok"
    verdict: Verdict | None = None
    score_chosen: float | None = None
    score_rejected: float | None = None
    # "A", "B" or "both" for pairwise judges; None for judges that score answers one at a time.
    chosen_position: str | None = None
    # What a pairwise judge picked when the chosen answer stood in A, and when it stood in B.
    verdict_chosen_a: str | None = None
    verdict_chosen_b: str | None = None
    error: str | None = None
    # Why it failed, in the short words the report counts failures by (prbj.llm.retry.cause_of,
    # prbj.llm.finish.end_cause); None when it did not fail, or when its status says it all (a parse error).
    cause: str | None = None
    chosen_words: int = 0
    rejected_words: int = 0
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Whether an input was cut to fit the model (local reward models); None for judges without a length limit.
    truncated: bool | None = None

    @property
    def correct(self) -> bool:
        return self.status == "ok" and self.verdict == "chosen"

    @property
    def tie(self) -> bool:
        return self.status == "ok" and self.verdict == "tie"

    def row(self) -> dict[str, Any]:
        margin = (
            self.score_chosen - self.score_rejected
            if self.score_chosen is not None and self.score_rejected is not None
            else None
        )
        return {
            "pair_id": self.pair_id,
            "subset": self.subset,
            "judge": self.judge,
            "context": self.context,
            "status": self.status,
            "verdict": self.verdict,
            "correct": self.correct,
            "tie": self.tie,
            "score_chosen": self.score_chosen,
            "score_rejected": self.score_rejected,
            "margin": margin,
            "chosen_position": self.chosen_position,
            "verdict_chosen_a": self.verdict_chosen_a,
            "verdict_chosen_b": self.verdict_chosen_b,
            "chosen_words": self.chosen_words,
            "rejected_words": self.rejected_words,
            "cost_usd": self.cost_usd,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached": self.cached,
            "error": self.error,
            "cause": self.cause,
            "truncated": self.truncated,
            **self.extra,
        }


def word_count(text: str) -> int:
    return len(text.split())


def verdict_from_scores(chosen: float, rejected: float) -> Verdict:
    """Correct iff score(chosen) > score(rejected); an exact tie is its own outcome, never a win."""
    if chosen > rejected:
        return "chosen"
    if chosen < rejected:
        return "rejected"
    return "tie"


def best_of(scores: Sequence[float]) -> tuple[Verdict, float, float]:
    """A best-of-k item decided by one score per candidate, the preferred one first (a pair is k = 2): right
    when the preferred candidate scores highest (the argmax), a tie when it shares the top score. Returns the
    verdict, the preferred candidate's score and the best score among the others."""
    chosen, best_other = scores[0], max(scores[1:])
    return verdict_from_scores(chosen, best_other), chosen, best_other


class Judge(ABC):
    """Anything that can decide, for one pair, which answer fits the user better."""

    name: str
    context: Context = "none"
    # Judges with no model and no call (the offline baselines): a dry run has nothing to plan for them, and does
    # not run them.
    offline: bool = False

    def describe(self) -> dict[str, Any]:
        """Configuration recorded in run.json."""
        return {"name": self.name, "context": self.context, "kind": type(self).__name__}

    def prepare(self, pairs: Sequence[Pair]) -> None:  # noqa: B027 - optional hook, most judges need nothing
        """Called once with every pair before any judging starts (e.g. to draw answer positions)."""

    @abstractmethod
    async def judge(self, task: PairTask) -> Judgment: ...

    def failed(self, task: PairTask, status: Status, error: str, cause: str | None = None) -> Judgment:
        """The judgment of a pair this judge could not be asked about: what it was to be shown could not be
        made (the `synthesized` context's persona)."""
        return self._judgment(task, status=status, error=error, cause=cause)

    def _judgment(self, task: PairTask, **fields: Any) -> Judgment:
        return Judgment(
            pair_id=task.pair.id,
            subset=task.pair.category,
            judge=self.name,
            context=task.context,
            chosen_words=word_count(task.pair.chosen),
            rejected_words=word_count(task.pair.rejected),
            **fields,
        )

    def _scored(self, task: PairTask, scores: Sequence[float], **fields: Any) -> Judgment:
        """The judgment of an item whose candidates (the preferred one first) got these scores: a pair, or a
        best-of-k item decided by the argmax (`score_rejected` is then the best of the others)."""
        verdict, chosen, best_other = best_of([float(s) for s in scores])
        return self._judgment(task, verdict=verdict, score_chosen=chosen, score_rejected=best_other, **fields)


class PointwiseJudge(Judge):
    """A judge that gives each answer a score on its own; the pair (or the best-of-k item: every candidate
    scored, the argmax picked) is then decided by the scores. A judge that only scores plugs in here."""

    @abstractmethod
    async def score(self, view: JudgeView, answers: Sequence[str]) -> list[float]:
        """One score per answer, higher = better fit for this user. Must not depend on answer order."""

    async def judge(self, task: PairTask) -> Judgment:
        try:
            scores = await self.score(task.view, task.pair.candidates)
        except ScoreFailure as failure:
            return self._judgment(task, status=failure.status, error=failure.message, cause=failure.cause)
        return self._scored(task, scores)
