"""The planner: a model turns the question and the user's ranked profile into the aspects this user expects.

Used by the `planner` context of `prbj judge` and by `prbj build`. Outputs go through the gateway (cached like
any call) and are memoised per pair, so several judges in one run share one planner call per pair.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any

from prbj.context.retrieval import rank_profile
from prbj.data.schema import JudgeView
from prbj.llm.gateway import Gateway, LLMRequest, LLMResult
from prbj.llm.providers import ProviderSpec
from prbj.prompts import Template, builtin, combined_sha

_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.*\S)\s*$")


def format_profile(view: JudgeView, k: int) -> str:
    posts = rank_profile(view.question, view.profile, k)
    if not posts:
        return "(no past posts)"
    return "\n".join(f"- [{p.category or 'post'}] {' '.join(p.text.split())}" for p in posts)


def parse_aspects(text: str) -> list[str]:
    """Bulleted or numbered lines; a reply without bullets counts its non-empty lines."""
    bullets = [m.group(1) for line in text.splitlines() if (m := _BULLET.match(line))]
    if bullets:
        return bullets
    return [line.strip() for line in text.splitlines() if line.strip()]


@dataclass
class PlannerOutput:
    pair_id: str
    aspects: list[str]
    result: LLMResult

    @property
    def ok(self) -> bool:
        return self.result.ok and bool(self.aspects)


@dataclass
class Planner:
    provider: ProviderSpec
    gateway: Gateway
    profile_k: int = 10
    max_aspects: int = 5
    system: Template = field(default_factory=lambda: builtin("planner_system"))
    user: Template = field(default_factory=lambda: builtin("planner_user"))
    _memo: dict[str, asyncio.Future[PlannerOutput]] = field(default_factory=dict)
    _latest: dict[str, PlannerOutput] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {
            "provider": self.provider.name,
            "model": self.provider.model,
            "profile_k": self.profile_k,
            "templates": {self.system.name: self.system.sha, self.user.name: self.user.sha},
        }

    def request(self, view: JudgeView) -> LLMRequest:
        user = self.user.render(
            {
                "profile": format_profile(view, self.profile_k),
                "question": view.question,
                "max_aspects": str(self.max_aspects),
            }
        )
        return LLMRequest.chat(
            self.system.text, user, template_hash=combined_sha(self.system, self.user), purpose="planner"
        )

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
        aspects = parse_aspects(result.text or "")[: self.max_aspects] if result.ok else []
        return PlannerOutput(view.pair_id, aspects, result)

    def outputs(self) -> list[PlannerOutput]:
        """The last plan (or failure) seen for each pair."""
        return list(self._latest.values())
