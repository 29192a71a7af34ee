"""One LaMP-QA record → one candidate pair: plan → chosen and rejected answers → quality checks → kept or dropped.

Every model call goes through the gateway, so cache, budget, pacing and retries behave as in `prbj judge`: a rerun
pays only for calls that are not cached yet. A record whose calls could not all be made (API error, budget,
--cache-only) ends `incomplete` rather than dropped, because a rerun can still finish it. A step whose reply was
refused, or cut at its output cap (an answer cut short is no answer for a benchmark pair; a check is read when
its visible text holds the scores), drops the record with `<step>_refused` / `<step>_truncated`: the reply was
paid for and is cached, so a rerun would replay it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from prbj.build.checks import (
    CHECK_PARSER_VERSION,
    CheckScores,
    Thresholds,
    answer_problems,
    check_problems,
    parse_check,
    word_count,
)
from prbj.context.planner import Planner
from prbj.context.profile_text import format_profile
from prbj.data.lamp import LampRecord
from prbj.data.status import UNANSWERED_STATUSES
from prbj.judges.verdict import final_part
from prbj.llm.gateway import Gateway, LLMRequest, LLMResult
from prbj.llm.providers import ProviderSpec
from prbj.llm.reading import read_reply
from prbj.prompts import Template, builtin, combined_sha

PlanSource = Literal["planner", "gold"]
Status = Literal["kept", "dropped", "incomplete"]
ROLES: tuple[str, ...] = ("planner", "chosen", "rejected", "check")
# Statuses of a call that a rerun can still turn into an answer.


@dataclass(frozen=True)
class Roles:
    """The provider behind each step; the planner is None when the gold rubric is the plan."""

    planner: ProviderSpec | None
    chosen: ProviderSpec
    rejected: ProviderSpec
    check: ProviderSpec


@dataclass(frozen=True)
class BuildSettings:
    plan: PlanSource = "planner"
    profile_k: int = 10
    max_aspects: int = 5
    thresholds: Thresholds = field(default_factory=Thresholds)


@dataclass
class StepCall:
    step: str
    status: str
    cached: bool
    cost_usd: float
    error: str | None = None
    # Why it did not end ok, in the words failures are counted by (None when ok).
    cause: str | None = None


@dataclass
class Outcome:
    record: LampRecord
    status: Status = "incomplete"
    reasons: list[str] = field(default_factory=list)
    aspects: list[str] = field(default_factory=list)
    chosen: str | None = None
    rejected: str | None = None
    checks: dict[str, CheckScores] = field(default_factory=dict)
    calls: list[StepCall] = field(default_factory=list)
    # The unreadable check replies, kept (shortened) so a dropped pair can be audited.
    check_replies: dict[str, str] = field(default_factory=dict)

    @property
    def reason(self) -> str | None:
        return self.reasons[0] if self.reasons else None

    @property
    def cost_usd(self) -> float:
        return sum(c.cost_usd for c in self.calls)

    @property
    def adherence_gap(self) -> float | None:
        if "chosen" in self.checks and "rejected" in self.checks:
            return self.checks["chosen"].adherence - self.checks["rejected"].adherence
        return None


class _Unfinished(Exception):
    def __init__(self, step: str, result: LLMResult) -> None:
        super().__init__(result.error or result.status)
        self.step = step
        self.result = result


class _Dropped(Exception):
    """A step's reply was refused or cut off: the record is dropped for it (a rerun would replay the reply)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def clean_answer(text: str) -> str:
    """The answer a generator meant: reasoning before `</think>` dropped, a leading 'Answer:' label and wrapping
    quotes removed."""
    answer = final_part(text).strip()
    for label in ("answer:", "**answer:**", "response:"):
        if answer.lower().startswith(label):
            answer = answer[len(label) :].strip()
    if len(answer) >= 2 and answer[0] == answer[-1] and answer[0] in "\"'":
        answer = answer[1:-1].strip()
    return answer


def bullet_list(items: Sequence[str]) -> str:
    return "\n".join(f"- {item}" for item in items)


def gold_aspects(record: LampRecord) -> list[str]:
    return [f"{a.aspect}: {a.reason}" if a.reason else a.aspect for a in record.rubric_aspects]


class Builder:
    """Builds candidate pairs from records; one instance per run, shared by all records."""

    def __init__(self, gateway: Gateway, roles: Roles, settings: BuildSettings) -> None:
        if settings.plan == "planner" and roles.planner is None:
            raise ValueError("the planner plan needs a planner provider")
        self.gateway = gateway
        self.roles = roles
        self.settings = settings
        self.planner = (
            Planner(roles.planner, gateway, profile_k=settings.profile_k, max_aspects=settings.max_aspects)
            if roles.planner is not None and settings.plan == "planner"
            else None
        )
        self.templates: dict[str, tuple[Template, Template]] = {
            role: (builtin(f"build_{role}_system"), builtin(f"build_{role}_user"))
            for role in ("chosen", "rejected", "check")
        }

    # --- description, for run.json and provenance --------------------------------------------------------
    def template_hashes(self) -> dict[str, str]:
        hashes = {role: self._template_hash(role) for role in self.templates}
        if self.planner is not None:
            hashes["planner"] = combined_sha(self.planner.system, self.planner.user)
        return hashes

    def template_files(self) -> dict[str, str]:
        templates = [t for pair in self.templates.values() for t in pair]
        if self.planner is not None:
            templates += [self.planner.system, self.planner.user]
        return {t.name: t.sha for t in templates}

    def models(self) -> dict[str, dict[str, Any]]:
        described: dict[str, dict[str, Any]] = {}
        for role in ROLES:
            provider = getattr(self.roles, role)
            if role == "planner" and self.settings.plan == "gold":
                described[role] = {"source": "gold rubric_aspects"}
            elif provider is not None:
                described[role] = {
                    "provider": provider.name,
                    "model": provider.model,
                    "api_base": provider.redacted_api_base,
                }
        return described

    def _template_hash(self, role: str) -> str:
        system, user = self.templates[role]
        suffix = f"-p{CHECK_PARSER_VERSION}" if role == "check" else ""
        return combined_sha(system, user) + suffix

    # --- the pipeline ------------------------------------------------------------------------------------
    async def build(self, record: LampRecord) -> Outcome:
        outcome = Outcome(record)
        try:
            await self._run(record, outcome)
        except _Unfinished as unfinished:
            outcome.status = "incomplete"
            outcome.reasons = [unfinished.result.status]
        except _Dropped as dropped:
            self._finish(outcome, [dropped.reason])
        return outcome

    async def _run(self, record: LampRecord, outcome: Outcome) -> None:
        aspects = await self._plan(record, outcome)
        if not aspects:
            outcome.status = "dropped"
            outcome.reasons = ["planner_no_aspects" if self.settings.plan == "planner" else "no_gold_aspects"]
            return
        outcome.aspects = aspects
        chosen, rejected = await self._gather(
            self._generate("chosen", record, aspects, outcome),
            self._generate("rejected", record, aspects, outcome),
        )
        outcome.chosen, outcome.rejected = chosen, rejected
        # A dry run's stand-in answers are as long as a reply may be, not as long as a real one: the checks
        # they would reach are planned, not judged by their length.
        planned = any(call.status == "dry_run" for call in outcome.calls)
        problems = [] if planned else answer_problems(chosen, rejected, self.settings.thresholds)
        if problems:
            self._finish(outcome, problems)
            return
        chosen_scores, rejected_scores = await self._gather(
            self._check("chosen", record, aspects, chosen, outcome),
            self._check("rejected", record, aspects, rejected, outcome),
        )
        if chosen_scores is None or rejected_scores is None:
            self._finish(outcome, ["check_parse_error"])
            return
        outcome.checks = {"chosen": chosen_scores, "rejected": rejected_scores}
        self._finish(outcome, check_problems(chosen_scores, rejected_scores, self.settings.thresholds))

    def _finish(self, outcome: Outcome, problems: list[str]) -> None:
        # A dry run estimates every step with stand-in texts; its verdicts mean nothing.
        if any(call.status == "dry_run" for call in outcome.calls):
            outcome.status, outcome.reasons = "incomplete", ["dry_run"]
            return
        outcome.status = "dropped" if problems else "kept"
        outcome.reasons = problems

    @staticmethod
    async def _gather(*steps: Any) -> list[Any]:
        """Run steps together; when one cannot finish, the others still complete (and are cached) first."""
        results = await asyncio.gather(*steps, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return list(results)

    def _record_call(self, outcome: Outcome, step: str, result: LLMResult) -> None:
        outcome.calls.append(
            StepCall(step, result.status, result.cached, result.cost_usd, result.error, result.cause)
        )
        if result.status in UNANSWERED_STATUSES and result.status != "dry_run":
            raise _Unfinished(step, result)

    async def _plan(self, record: LampRecord, outcome: Outcome) -> list[str]:
        if self.planner is None:
            return gold_aspects(record)
        planned = await self.planner.aspects(record.view("profile"))
        self._record_call(outcome, "planner", planned.result)
        if (
            planned.result.status == "dry_run"
        ):  # as long as the planner may answer: the estimate stays a bound
            return self.planner.stand_in_aspects(record.view("profile"))
        if not planned.aspects and planned.status in ("truncated", "refused"):
            raise _Dropped(f"planner_{planned.status}")
        return planned.aspects

    async def _generate(self, role: str, record: LampRecord, aspects: list[str], outcome: Outcome) -> str:
        system, user = self.templates[role]
        prompt = user.render(
            {
                "profile": format_profile(record.view("profile"), self.settings.profile_k),
                "question": record.question,
                "aspects": bullet_list(aspects),
                "max_words": str(self.settings.thresholds.max_words),
            }
        )
        request = LLMRequest.chat(system.text, prompt, template_hash=self._template_hash(role), purpose=role)
        provider = getattr(self.roles, role)
        result = await self.gateway.call(provider, request)
        self._record_call(outcome, role, result)
        if result.status == "dry_run":
            # A stand-in as long as the writer may answer, distinct per role, so that the checks are planned
            # and their estimate bounds what they will cost.
            length = max(self.settings.thresholds.max_words, self.gateway.completion_bound(provider, request))
            return " ".join([role] * length)
        if result.status in ("truncated", "refused"):
            raise _Dropped(f"{role}_{result.status}")
        return clean_answer(result.text or "")

    async def _check(
        self, which: str, record: LampRecord, aspects: list[str], answer: str, outcome: Outcome
    ) -> CheckScores | None:
        system, user = self.templates["check"]
        prompt = user.render({"question": record.question, "aspects": bullet_list(aspects), "answer": answer})
        request = LLMRequest.chat(
            system.text, prompt, template_hash=self._template_hash("check"), purpose="build-check"
        )
        result = await self.gateway.call(self.roles.check, request)
        self._record_call(outcome, f"check_{which}", result)
        if result.status == "dry_run":
            return CheckScores(5, 5, 5, 5 if which == "chosen" else 1)
        reading = read_reply(result, parse_check, "scores")
        if reading.value is None:
            flat = " ".join((result.text or "").split())
            outcome.check_replies[which] = flat[:200]
        if reading.status in ("truncated", "refused"):
            raise _Dropped(f"check_{reading.status}")
        return reading.value


def word_counts(outcome: Outcome) -> dict[str, int]:
    return {
        "chosen": word_count(outcome.chosen or ""),
        "rejected": word_count(outcome.rejected or ""),
    }
