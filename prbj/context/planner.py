"""The planner: a model turns the question and the user's ranked profile into the aspects this user expects.

The profile is rendered by prbj.context.profile_text, as every judge sees it; a profile of past posts only is
asked with the planner_system/planner_user prompts (Personalized RewardBench), any other kind (earlier choices,
a persona, stated preferences) with planner_system_about/planner_user_about, which speak of what is known about
the user instead of their posts.

Used by the `planner` context of `prbj judge` and by `prbj build`. Outputs go through the gateway (cached like
any call) and are memoised per pair, so several judges in one run share one planner call per pair.

How a reply becomes aspects (`parse_aspects`, tested in tests/test_planner.py):
1. Reasoning before the last `</think>` is dropped.
2. When some lines are bullets (`-`, `*`, `•`) or numbered (`1.`, `2)`), only those lines are aspects; otherwise
   every non-empty line is a candidate.
3. Markdown emphasis (`**`, `__`, backticks) is removed; a line ending in `:` with nothing after it is a heading,
   not an aspect.
4. A line in which the planner talks about itself instead of the user ("I cannot tell.", "Sorry, ...", "As an
   AI ...", "not enough information", "unable to") is dropped: it describes no expectation.
5. Aspects shorter than 3 characters are dropped, duplicates kept once, at most `max_aspects` kept.
A reply left with no aspect is a `planner_error` (see prbj.data.status): with `--repair` the planner is asked once
more, and a judge never sees that reply; its judgments for the pair fail with that status.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any

from prbj.context.profile_text import ProfileOrder, format_profile
from prbj.data.schema import JudgeView
from prbj.data.status import Status
from prbj.llm.gateway import Gateway, LLMRequest, LLMResult
from prbj.llm.providers import ProviderSpec
from prbj.llm.reading import may_repair, read_reply
from prbj.llm.thinking import after_thinking
from prbj.prompts import Template, builtin, combined_sha

_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.*\S)\s*$")
_EMPHASIS = re.compile(r"\*\*|__|`")
# Phrases of a planner speaking about itself (a refusal or an excuse), not about what the user expects.
_SELF_TALK = re.compile(
    r"^(?:i\b|i'm\b|i am\b|sorry\b|as an ai\b|unfortunately\b)|cannot tell|can't tell|not enough information"
    r"|unable to|no (?:clear |relevant )?(?:evidence|information)",
    re.I,
)
MIN_ASPECT_CHARS = 3


def parse_aspects(text: str) -> list[str]:
    """The aspects in a planner reply, by the rules in this module's docstring; [] when it names none."""
    lines = after_thinking(text).splitlines()
    bullets = [m.group(1) for line in lines if (m := _BULLET.match(line))]
    candidates = bullets if bullets else [line.strip() for line in lines if line.strip()]
    aspects: list[str] = []
    for candidate in candidates:
        aspect = " ".join(_EMPHASIS.sub("", candidate).split())
        if aspect.endswith(":") or len(aspect) < MIN_ASPECT_CHARS or _SELF_TALK.search(aspect):
            continue
        if aspect not in aspects:
            aspects.append(aspect)
    return aspects


@dataclass
class PlannerOutput:
    pair_id: str
    aspects: list[str]
    result: LLMResult

    @property
    def ok(self) -> bool:
        """Aspects were read (also from a reply cut at its output cap, if it named some before the cut)."""
        return bool(self.aspects)

    @property
    def status(self) -> Status:
        """`ok` with aspects; `planner_error` when a complete reply named none; else the call's status (a
        failed call, a refusal, a reply cut off before any aspect)."""
        if self.aspects:
            return "ok"
        return "planner_error" if self.result.ok else self.result.status


@dataclass
class Planner:
    provider: ProviderSpec
    gateway: Gateway
    profile_k: int = 10
    # Which earlier choices of a user come first (prbj.context.profile_text); posts are always ranked by relevance.
    profile_order: ProfileOrder = "similar"
    max_aspects: int = 5
    # Ask once more (showing the planner its reply) when a reply names no aspect.
    repair: bool = False
    system: Template = field(default_factory=lambda: builtin("planner_system"))
    user: Template = field(default_factory=lambda: builtin("planner_user"))
    # For a profile that is not past posts alone.
    system_about: Template = field(default_factory=lambda: builtin("planner_system_about"))
    user_about: Template = field(default_factory=lambda: builtin("planner_user_about"))
    _memo: dict[str, asyncio.Future[PlannerOutput]] = field(default_factory=dict)
    _latest: dict[str, PlannerOutput] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {
            "provider": self.provider.name,
            "model": self.provider.model,
            "profile_k": self.profile_k,
            "profile_order": self.profile_order,
            "templates": {
                t.name: t.sha for t in (self.system, self.user, self.system_about, self.user_about)
            },
        }

    def request(self, view: JudgeView) -> LLMRequest:
        system, user = (
            (self.system, self.user) if view.user_profile.only_posts else (self.system_about, self.user_about)
        )
        text = user.render(
            {
                "profile": format_profile(view, self.profile_k, self.profile_order),
                "question": view.question,
                "max_aspects": str(self.max_aspects),
            }
        )
        return LLMRequest.chat(system.text, text, template_hash=combined_sha(system, user), purpose="planner")

    def stand_in_aspects(self, view: JudgeView) -> list[str]:
        """What a dry run shows judges in place of the aspects it did not ask for: max_aspects lines that
        together are as long as the planner's reply may be (its max_tokens), so that the judge calls' estimate
        bounds what they will cost (an aspect is at most a line of the reply)."""
        words = self.gateway.completion_bound(self.provider, self.request(view))
        per_line = -(-words // self.max_aspects)
        return [" ".join(["aspect"] * per_line) for _ in range(self.max_aspects)]

    async def aspects(self, view: JudgeView) -> PlannerOutput:
        # Keyed by the request itself, not the pair id: a long-running server may see one id with different
        # questions. A failed plan is forgotten, so the next caller tries again instead of failing forever.
        request = self.request(view)
        key = self.gateway.request_key(self.provider, request)
        future = self._memo.get(key)
        if future is None:
            future = asyncio.ensure_future(self._plan(view, request))
            self._memo[key] = future
        output = await asyncio.shield(future)
        self._latest[view.pair_id] = output
        if not output.ok and self._memo.get(key) is future:
            del self._memo[key]
        return output

    async def _plan(self, view: JudgeView, request: LLMRequest) -> PlannerOutput:
        result = await self.gateway.call(self.provider, request)
        reading = read_reply(result, self._aspects, "aspect")
        if self.repair and may_repair(reading, result):
            retry = await self.gateway.call(self.provider, self._repair_request(request, result.text or ""))
            repaired = read_reply(retry, self._aspects, "aspect")
            if repaired.ok:
                result, reading = retry, repaired
        return PlannerOutput(view.pair_id, reading.value or [], result)

    def _aspects(self, text: str) -> list[str] | None:
        return parse_aspects(text)[: self.max_aspects] or None

    def _repair_request(self, first: LLMRequest, reply: str) -> LLMRequest:
        ask = builtin("planner_repair").render({"max_aspects": str(self.max_aspects)})
        messages = (
            *first.messages,
            {"role": "assistant", "content": reply},
            {"role": "user", "content": ask},
        )
        return LLMRequest(messages=messages, template_hash=first.template_hash + "-repair", purpose="planner")

    def outputs(self) -> list[PlannerOutput]:
        """The last plan (or failure) seen for each pair."""
        return list(self._latest.values())
