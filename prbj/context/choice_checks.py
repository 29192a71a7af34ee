"""Step 1 of SynthesizeMe (arXiv 2506.05598), for `--synthesis verified`: before a persona is written, the
synthesizer model is asked, for each of the user's earlier choices, to predict which reply the user picked
without being told, reasoning about who the user may be; the reasoning of a right prediction is kept. The
persona is then written from those verified choices (prbj.context.synthesizer), so that what it says about the
user is reasoning that held on the user's own choices rather than a guess it never tested.

Each check is one call, cached like any other (a rerun pays nothing). Which reply is shown first is drawn per
choice from a hash of the user, the choice's id and its conversation: the same request on every run and for
every seed (so the cache answers it), and about half the right answers are "B", so a model that always says "A"
verifies about half of the choices, not all.

How a check's reply is read: by the reader it is given (prbj.judges.verdict.verdict_and_reasoning, passed in
by prbj.judges.setup, since judges sit above this package): the verdict as a judge's is read, the two replies
shown quoted out, and the reasoning is the visible text before the line holding that verdict, here flattened and
cut at REASONING_WORDS words. A choice is verified when the verdict names the reply the user picked and some reasoning
came before it. A wrong verdict, none, a refusal or a reply cut off before its verdict leaves the choice
unverified (SynthesizeMe counts such a prediction as a tie, which is not a match); only a call that brought no
reply (a failure past the retries, the budget, `--cache-only`, a call queued under `--batch`) stops the user's
persona, since the checks would not be the same on the next run.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from prbj.context.profile_text import flat
from prbj.data.schema import Preference
from prbj.data.status import Status
from prbj.llm.gateway import Gateway, LLMRequest, LLMResult
from prbj.llm.providers import ProviderSpec
from prbj.prompts import Template, builtin, combined_sha

# The words of a verified reasoning shown to the synthesizer (SynthesizeMe's chain-of-thought traces run to a
# paragraph).
REASONING_WORDS = 150
# The choices the persona is written from when fewer are verified: the unverified ones with the pick alone, the
# newest first, up to this many in all (DSPy's max_labeled_demos in SynthesizeMe's persona step).
LABELED_CHOICES = 4

# (reply, the texts it was shown) → (its verdict "A"/"B" or None, the reasoning written before it or "").
VerdictReader = Callable[[str, Sequence[str]], tuple[str | None, str]]


@dataclass(frozen=True)
class CheckedChoice:
    """One earlier choice as the persona is written from it."""

    choice: Preference
    # Whether the chosen reply was shown first (as A) in the check, and is shown so to the synthesizer.
    chosen_first: bool
    # The reasoning of a right prediction; None when the prediction was wrong or not read.
    reasoning: str | None

    @property
    def verified(self) -> bool:
        return self.reasoning is not None

    @property
    def picked(self) -> str:
        return "A" if self.chosen_first else "B"

    def replies(self) -> tuple[str, str]:
        """(reply A, reply B) in the order shown."""
        first, second = self.choice.chosen, self.choice.rejected
        return (first, second) if self.chosen_first else (second, first)


@dataclass(frozen=True)
class CheckFailure:
    """A check that brought no reply: the user's persona is not written."""

    status: Status
    error: str
    cause: str | None
    result: LLMResult


def chosen_shown_first(user_id: str, choice: Preference) -> bool:
    """The position drawn for a choice: the same on every run, seed and machine."""
    digest = hashlib.sha256(f"{user_id}\0{choice.id}\0{choice.prompt}".encode()).digest()
    return digest[0] % 2 == 0


def verified_reasoning(reply: str, shown: Sequence[str], picked: str, read: VerdictReader) -> str | None:
    """The reasoning of a check that predicted `picked` after some reasoning, flattened and cut at
    REASONING_WORDS words; None for any other reply."""
    verdict, reasoning = read(reply, shown)
    if verdict != picked or not reasoning.strip():
        return None
    return flat(reasoning, REASONING_WORDS)


def render_checked(checked: Sequence[CheckedChoice], choice_words: int) -> str:
    """The choices the persona is written from, as the synthesizer reads them (prompt synthesizer_verified_user)."""
    blocks = []
    for n, item in enumerate(checked, start=1):
        reply_a, reply_b = item.replies()
        lines = [
            f"Choice {n}",
            f"Conversation: {flat(item.choice.prompt, choice_words)}",
            f"Reply A: {flat(reply_a, choice_words)}",
            f"Reply B: {flat(reply_b, choice_words)}",
        ]
        if item.reasoning is not None:
            lines.append(f"Reasoning: {item.reasoning}")
        lines.append(f"Picked: {item.picked}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def shown_choices(checked: Sequence[CheckedChoice]) -> list[CheckedChoice]:
    """Every verified choice, topped up to LABELED_CHOICES with the newest unverified ones, in history order."""
    keep = {i for i, item in enumerate(checked) if item.verified}
    for i in reversed(range(len(checked))):
        if len(keep) >= LABELED_CHOICES:
            break
        keep.add(i)
    return [item for i, item in enumerate(checked) if i in keep]


@dataclass
class ChoiceChecker:
    provider: ProviderSpec
    gateway: Gateway
    choice_words: int
    read: VerdictReader
    system: Template = field(default_factory=lambda: builtin("synthesizer_check_system"))
    user: Template = field(default_factory=lambda: builtin("synthesizer_check_user"))

    def describe(self) -> dict[str, Any]:
        return {
            "reasoning_words": REASONING_WORDS,
            "labeled_choices": LABELED_CHOICES,
            "templates": {t.name: t.sha for t in (self.system, self.user)},
        }

    def request(self, item: CheckedChoice) -> LLMRequest:
        reply_a, reply_b = item.replies()
        text = self.user.render(
            {
                "conversation": flat(item.choice.prompt, self.choice_words),
                "reply_a": flat(reply_a, self.choice_words),
                "reply_b": flat(reply_b, self.choice_words),
            }
        )
        return LLMRequest.chat(
            self.system.text,
            text,
            template_hash=combined_sha(self.system, self.user),
            purpose="synthesizer-check",
        )

    async def check(self, user_id: str, choices: Sequence[Preference]) -> list[CheckedChoice] | CheckFailure:
        """Every choice checked (at once; the gateway paces them), or the first check that brought no reply."""
        outcomes = await asyncio.gather(*(self._check_one(user_id, choice) for choice in choices))
        for n, outcome in enumerate(outcomes, start=1):
            if isinstance(outcome, LLMResult):
                error = f"checking earlier choice {n} of {len(choices)}: {outcome.error or outcome.status}"
                return CheckFailure(outcome.status, error, outcome.cause, outcome)
        return [o for o in outcomes if isinstance(o, CheckedChoice)]

    async def _check_one(self, user_id: str, choice: Preference) -> CheckedChoice | LLMResult:
        unchecked = CheckedChoice(choice, chosen_shown_first(user_id, choice), None)
        request = self.request(unchecked)
        result = await self.gateway.call(self.provider, request)
        if result.status == "dry_run":
            # Counted as verified, with reasoning as long as the reply may be: the persona call is then planned
            # at its largest.
            words = min(self.gateway.completion_bound(self.provider, request), REASONING_WORDS)
            return replace(unchecked, reasoning=" ".join(["reasoning"] * words))
        if not result.replied:
            return result
        if result.status == "refused":
            return unchecked
        shown = (choice.chosen, choice.rejected)
        return replace(
            unchecked, reasoning=verified_reasoning(result.text or "", shown, unchecked.picked, self.read)
        )
