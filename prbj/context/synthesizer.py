"""The synthesizer of the `synthesized` context: a model reads one user's earlier choices and writes a persona of
that user, which every judge is then shown in place of the profile. This is the persona step of SynthesizeMe
(Ryan et al., arXiv 2506.05598; github.com/SALT-NLP/SynthesizeMe): by default in one call per user; with
`--synthesis verified` after its step 1, each earlier choice checked first (prbj.context.choice_checks) and the
persona written from the reasoning that predicted the user's picks right. docs/judges.md says what of the method
is reproduced and what is not, and why.

What it reads: the user's history (`Pair.history`: their train and val preferences, oldest first), and nothing
else: not the question being judged, not past posts, not a persona or stated facts the dataset gives. A judged
row is never in a history (prbj.data.per_user builds histories from train and val records only, each user's
own), so no test row reaches the synthesizer; tests/test_synthesized.py plants markers to prove it. At most
MAX_CHOICES choices are shown (the newest), each text cut at CHOICE_WORDS words.

How a reply becomes a persona (`parse_persona`):
1. Reasoning before the last `</think>` is dropped.
2. The persona is the text after the last line that starts with `Persona:` (also `Synthesized persona:`, with
   a heading mark or emphasis around it, or a heading `## Persona` alone on its line), to the end of the reply,
   flattened to one line, emphasis marks removed.
3. A persona in which the model speaks of itself ("I cannot ...", "Sorry", "As an AI", "not enough
   information") or of fewer than MIN_PERSONA_WORDS words is none.
A complete reply with no persona is a `persona_error`; a reply cut at its output cap is `truncated` even when
it holds a `Persona:` line (the persona may stop mid-sentence); a refusal is `refused`; a failed call keeps its
status. Each of that user's judgments in the context then fails with that status and a one-line cause, and the
judge is not asked.

One call per user (under `verified`, after one per earlier choice): the request depends on the user's history
alone, so it is the same for every pair of the user, and the gateway's cache answers a rerun (`--cache-only`
included). Within one round of judging, `Personas` shares one outcome per user among all judges and pairs, a
failed one too; the next round (under `--batch`, after the queued calls came back) asks again. A user with no
earlier choice is asked nothing: the judge is told there is no persona (NO_PERSONA), and the command prints how
many such users there are.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from prbj.context.choice_checks import CheckedChoice, ChoiceChecker, render_checked, shown_choices
from prbj.context.profile_text import flat
from prbj.data.schema import JudgeView, Pair, Preference
from prbj.data.status import Status
from prbj.errors import ConfigError
from prbj.llm.gateway import Gateway, LLMRequest, LLMResult
from prbj.llm.providers import ProviderSpec
from prbj.llm.reading import read_reply
from prbj.llm.thinking import after_thinking
from prbj.prompts import Template, builtin, combined_sha

# The newest choices shown, and the words kept of each text: PersonalRewardBench users have 5-15 earlier
# choices, and chat answers can run to thousands of words.
MAX_CHOICES = 30
CHOICE_WORDS = 300
# The persona's length the prompt asks for (SynthesizeMe's personas run to ~100-150 words).
PERSONA_WORDS = 200
MIN_PERSONA_WORDS = 3
# What a judge is shown for a user who made no earlier choice (nothing was asked of the synthesizer).
NO_PERSONA = "(none: this user made no earlier choice to write one from)"

# How a persona is written (--synthesis): from the choices in one call, or from the choices checked first.
Synthesis = Literal["one-call", "verified"]
SYNTHESES: tuple[Synthesis, ...] = ("one-call", "verified")

# "Persona:", "**Synthesized persona:**", "## Persona" (a heading, the persona on the lines below).
_PERSONA_LINE = re.compile(r"^[ \t#>*_`-]*(?:[a-z]+[ \t]+)?persona[ \t*_`]*(?::|$)(.*)$", re.I | re.M)
_EMPHASIS = re.compile(r"\*\*|__|`")
# A persona that opens with the model speaking of itself, or saying it has nothing to go on.
_SELF_TALK = re.compile(
    r"^(?:i\b|i'm\b|i am\b|sorry\b|as an ai\b|unfortunately\b|unable to\b|not enough\b|none\b|n/?a\b"
    r"|there (?:is|are) (?:not enough|no)\b|no persona\b)",
    re.I,
)


def parse_persona(text: str) -> str | None:
    """The persona in a synthesizer reply, by the rules in this module's docstring; None when it holds none."""
    final = after_thinking(text)
    markers = list(_PERSONA_LINE.finditer(final))
    if not markers:
        return None
    last = markers[-1]
    persona = flat(_EMPHASIS.sub("", last.group(1) + final[last.end() :])).strip(" *_")
    if len(persona.split()) < MIN_PERSONA_WORDS or _SELF_TALK.search(persona):
        return None
    return persona


def newest_choices(history: Sequence[Preference]) -> list[Preference]:
    """The earlier choices a persona is written from: the newest MAX_CHOICES, oldest first."""
    return list(history)[-MAX_CHOICES:]


def render_choices(history: Sequence[Preference]) -> str:
    """The user's earlier choices as the synthesizer reads them, oldest first (the newest MAX_CHOICES)."""
    shown = newest_choices(history)
    return "\n\n".join(
        f"Choice {n}\n"
        f"Conversation: {flat(h.prompt, CHOICE_WORDS)}\n"
        f"Reply picked: {flat(h.chosen, CHOICE_WORDS)}\n"
        f"Reply turned down: {flat(h.rejected, CHOICE_WORDS)}"
        for n, h in enumerate(shown, start=1)
    )


def shown_persona(view: JudgeView) -> str:
    """What a judge is shown in the `synthesized` context: the persona, or NO_PERSONA for a user without
    earlier choices."""
    return flat(view.persona) or NO_PERSONA


@dataclass(frozen=True)
class PersonaOutput:
    """What the synthesizer gave for one user: a persona, a failure, or nothing to do (no earlier choice)."""

    user_id: str
    status: Status
    persona: str = ""
    # The earlier choices it read (0: none, and nothing was asked).
    choices: int = 0
    result: LLMResult | None = None
    error: str | None = None
    cause: str | None = None
    # Under --dry-run: words standing in for the persona, as many as the reply may hold, so that the judge calls
    # that would show it are counted at their largest.
    stand_in: str = ""
    # Under --synthesis verified: how many of them were predicted right (None: not checked).
    verified: int | None = None

    @property
    def failed(self) -> bool:
        """The user's judgments in the context fail: no persona to show, though there were choices to read."""
        return self.status not in ("ok", "dry_run")

    @property
    def shown(self) -> str:
        """The text judges get as the user's persona ("" when the user made no earlier choice)."""
        return self.stand_in if self.status == "dry_run" else self.persona

    def record(self) -> dict[str, Any]:
        """Its line in the run directory's personas.jsonl."""
        return {
            "user_id": self.user_id,
            "status": self.status if self.choices else "no history",
            "persona": self.persona,
            "choices": self.choices,
            "verified": self.verified,
            "cached": self.result.cached if self.result is not None else None,
            "error": self.error,
        }


@dataclass
class Synthesizer:
    provider: ProviderSpec
    gateway: Gateway
    max_words: int = PERSONA_WORDS
    system: Template = field(default_factory=lambda: builtin("synthesizer_system"))
    user: Template = field(default_factory=lambda: builtin("synthesizer_user"))
    # Under --synthesis verified: checks each earlier choice before the persona is written from them.
    checker: ChoiceChecker | None = None
    verified_user: Template = field(default_factory=lambda: builtin("synthesizer_verified_user"))
    # The last outcome per user id, for the run directory.
    _latest: dict[str, PersonaOutput] = field(default_factory=dict)

    @property
    def synthesis(self) -> Synthesis:
        return "one-call" if self.checker is None else "verified"

    def describe(self) -> dict[str, Any]:
        user = self.user if self.checker is None else self.verified_user
        described = {
            "provider": self.provider.name,
            "model": self.provider.model,
            "synthesis": self.synthesis,
            "max_choices": MAX_CHOICES,
            "choice_words": CHOICE_WORDS,
            "persona_words": self.max_words,
            "templates": {t.name: t.sha for t in (self.system, user)},
        }
        if self.checker is not None:
            described["checks"] = self.checker.describe()
        return described

    def request(self, history: Sequence[Preference]) -> LLMRequest:
        text = self.user.render({"choices": render_choices(history), "max_words": str(self.max_words)})
        return LLMRequest.chat(
            self.system.text, text, template_hash=combined_sha(self.system, self.user), purpose="synthesizer"
        )

    def verified_request(self, checked: Sequence[CheckedChoice]) -> LLMRequest:
        """The persona request of `--synthesis verified`, from the checked choices it shows."""
        choices = render_checked(shown_choices(checked), CHOICE_WORDS)
        text = self.verified_user.render({"choices": choices, "max_words": str(self.max_words)})
        template_hash = combined_sha(self.system, self.verified_user)
        return LLMRequest.chat(self.system.text, text, template_hash=template_hash, purpose="synthesizer")

    async def synthesize(self, pair: Pair) -> PersonaOutput:
        """The persona of `pair`'s user, from their history: one call, after one check per choice under
        `verified` (nothing without a history)."""
        history = newest_choices(pair.history)
        if not history:
            output = PersonaOutput(pair.user_id, "ok")
        elif self.checker is None:
            request = self.request(history)
            result = await self.gateway.call(self.provider, request)
            output = self._read(pair.user_id, len(history), request, result)
        else:
            output = await self._synthesize_verified(pair.user_id, history, self.checker)
        self._latest[pair.user_id] = output
        return output

    async def _synthesize_verified(
        self, user_id: str, history: Sequence[Preference], checker: ChoiceChecker
    ) -> PersonaOutput:
        checked = await checker.check(user_id, history)
        if not isinstance(checked, list):
            return PersonaOutput(
                user_id,
                checked.status,
                choices=len(history),
                result=checked.result,
                error=checked.error,
                cause=checked.cause,
            )
        request = self.verified_request(checked)
        result = await self.gateway.call(self.provider, request)
        output = self._read(user_id, len(history), request, result)
        return replace(output, verified=sum(item.verified for item in checked))

    def _read(self, user_id: str, choices: int, request: LLMRequest, result: LLMResult) -> PersonaOutput:
        if result.status == "dry_run":
            words = self.gateway.completion_bound(self.provider, request)
            return PersonaOutput(
                user_id, "dry_run", choices=choices, result=result, stand_in=" ".join(["persona"] * words)
            )
        if result.status == "truncated":
            # A persona cut at the output cap may stop mid-sentence: never shown as if whole.
            error = f"{result.error}; a persona cut short is not shown (raise the synthesizer's max_tokens)"
            return PersonaOutput(
                user_id, "truncated", choices=choices, result=result, error=error, cause=result.cause
            )
        reading = read_reply(result, parse_persona, "persona")
        if reading.ok and reading.value is not None:
            return PersonaOutput(user_id, "ok", reading.value, choices, result)
        if reading.status == "parse_error":
            # No reply text in the error: it is about the user, and errors are kept where texts are not.
            error = (
                "the reply held no persona (a line 'Persona: ...' after its reasoning)"
                if (result.text or "").strip()
                else "the reply was empty"
            )
            return PersonaOutput(user_id, "persona_error", choices=choices, result=result, error=error)
        return PersonaOutput(
            user_id, reading.status, choices=choices, result=result, error=reading.error, cause=reading.cause
        )

    def round(self) -> Personas:
        """A memo for one round of judging: one outcome per user, shared by every judge and pair."""
        return Personas(self)

    def outputs(self) -> list[PersonaOutput]:
        """The last outcome seen for each user, by user id."""
        return [self._latest[user] for user in sorted(self._latest)]


class Personas:
    """One round's personas, by user id: the first pair of a user to ask starts the call, the others wait for
    it, and a failure is shared too (so a user costs one call per round whatever befalls it)."""

    def __init__(self, synthesizer: Synthesizer) -> None:
        self.synthesizer = synthesizer
        self._memo: dict[str, asyncio.Future[PersonaOutput]] = {}

    async def of(self, pair: Pair) -> PersonaOutput:
        future = self._memo.get(pair.user_id)
        if future is None:
            future = asyncio.ensure_future(self.synthesizer.synthesize(pair))
            self._memo[pair.user_id] = future
        return await asyncio.shield(future)


@dataclass(frozen=True)
class Histories:
    """How many of a selection's users have earlier choices to write a persona from."""

    users: int
    without: int
    pairs_without: int

    def note(self) -> str | None:
        """The line the command prints when some users have no earlier choice; None when all have."""
        if not self.without:
            return None
        return (
            f"--context synthesized: {self.without} of {self.users} users made no earlier choice, so no persona "
            f"is written for them; their {self.pairs_without} pairs are judged with the judge told so"
        )


def histories(pairs: Sequence[Pair], source: str) -> Histories:
    """Count the users with and without a history; refuse a selection in which nobody has one (Personalized
    RewardBench: a profile of past posts, one pair per user), since SynthesizeMe writes a persona from a user's
    own choices between answers, and posts hold none."""
    has: dict[str, bool] = {}
    for pair in pairs:
        has[pair.user_id] = bool(pair.history)
    if not any(has.values()):
        raise ConfigError(
            f"--context synthesized: no user in the data ({source}) made an earlier choice (train or val "
            "preferences) to write a persona from; on profiles of past posts use --context profile or planner"
        )
    without = {user for user, known in has.items() if not known}
    return Histories(len(has), len(without), sum(1 for p in pairs if p.user_id in without))
