"""The gold judge: grades an answer against the question's rubric aspects, 0/1/2 per aspect.

This is the only place in the BoN pipeline that reads the rubric (through `Pair.view("oracle")`): it is the
scoring standard, so the policy and the reward models never see it.

Two modes:
- `per-answer`: one call lists every aspect and asks for JSON `{"scores": [s1, …, sm]}` (as the official BoN
  evaluation, which asks for a bare list);
- `per-aspect`: one call per aspect asking for JSON `{"match_score": 0|1|2}`, as LaMP-QA's own scorer does.

Example score = Σ aspect scores / (2 · number of aspects), in [0, 1]: the official "mean over aspects" (0–2)
divided by 2. A reply that does not hold a valid score for every aspect is a counted parse error, never a 0
(the official script scores an unreadable reply as 0).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from prbj.data.schema import Pair, RubricAspect
from prbj.data.status import UNUSABLE_REPLY_STATUSES, severity
from prbj.judges.official import (
    GOLD_MAX_TOKENS,
    GOLD_PROMPT,
    GOLD_SCRIPT,
    OfficialRepo,
    official_aspects,
    parse_official_scores,
)
from prbj.judges.verdict import final_part, strip_quotes
from prbj.llm.gateway import Gateway, LLMRequest, LLMResult
from prbj.llm.params import Asked
from prbj.llm.providers import ProviderSpec
from prbj.llm.reading import Reading, read_reply
from prbj.prompts import Template, builtin, combined_sha

T = TypeVar("T")
GoldMode = Literal["per-answer", "per-aspect"]
GOLD_MODES: tuple[str, ...] = ("per-answer", "per-aspect")
MAX_MATCH = 2
_FENCE = re.compile(r"```(?:json)?", re.I)


@dataclass
class GoldGrade:
    status: str
    aspect_scores: list[int] | None = None
    error: str | None = None
    cost: float = 0.0
    calls: int = 0
    cached_calls: int = 0
    # Why it failed, in the words failures are counted by (see prbj.llm.reading); None when ok or a parse error.
    cause: str | None = None

    @property
    def score(self) -> float | None:
        if self.status != "ok" or not self.aspect_scores:
            return None
        return sum(self.aspect_scores) / (MAX_MATCH * len(self.aspect_scores))

    def add(self, result: LLMResult) -> None:
        self.cost += result.cost_usd
        self.calls += 1
        self.cached_calls += int(result.cached)

    def fail(self, readings: Sequence[Reading[Any]], *, per_aspect: bool = False) -> bool:
        """Take the status of the failed reading that explains most (a call never answered outranks a refusal, a
        cut-off reply, an unreadable one), with its cause; False when every reading is ok. Per aspect, replies
        that were answered but unreadable name their aspect."""
        failed = [(i, r) for i, r in enumerate(readings, start=1) if not r.ok]
        if not failed:
            return False
        _, worst = max(failed, key=lambda item: severity(item[1].status))
        self.status, self.cause, self.error = worst.status, worst.cause, worst.error
        if per_aspect and worst.status in UNUSABLE_REPLY_STATUSES:
            self.error = "; ".join(f"aspect {i}: {r.error}" for i, r in failed if r.status == worst.status)
        return True


def read_grade(result: LLMResult, parse: Callable[[str], tuple[T | None, str]]) -> Reading[T]:
    """A gold reply read with `parse`, which says why when it finds nothing: a refusal is never a grade, and a
    cut-off reply is read as usual when its visible text holds the grade (see prbj.llm.reading)."""
    why = ""

    def value(text: str) -> T | None:
        nonlocal why
        found, why = parse(text)
        return found

    reading = read_reply(result, value, "grade")
    if reading.status == "parse_error":
        return Reading("parse_error", error=why)
    if reading.status == "truncated" and why:
        return Reading("truncated", error=f"{result.error}; {why}", cause=reading.cause)
    return reading


def match_value(value: Any) -> int | None:
    """0, 1 or 2 from a JSON value (integers, integral floats, digit strings); anything else is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 0 <= value <= MAX_MATCH:
        return value
    return None


def json_field(reply: str | None, name: str, shown: Sequence[str] = ()) -> Any:
    """The value of `name` in the last JSON object of the reply's final part that has it (code fences, text
    around the object and copies of the graded answer are ignored); None when there is none."""
    if not reply:
        return None
    text = _FENCE.sub(" ", strip_quotes(final_part(reply), shown))
    decoder = json.JSONDecoder()
    found = None
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and name in value:
            found = value[name]
    return found


def parse_scores(reply: str | None, count: int, shown: Sequence[str] = ()) -> tuple[list[int] | None, str]:
    """`{"scores": [...]}` with exactly `count` values in 0..2, or None and why not."""
    value = json_field(reply, "scores", shown)
    if value is None:
        return None, f'no {{"scores": [...]}} object in reply: {_snippet(reply)}'
    if not isinstance(value, list):
        return None, f"'scores' is not a list: {_snippet(json.dumps(value))}"
    if len(value) != count:
        return None, f"expected {count} scores, got {len(value)}"
    scores = [match_value(v) for v in value]
    valid = [s for s in scores if s is not None]
    if len(valid) != len(scores):
        return None, f"scores must be 0, 1 or 2: {_snippet(json.dumps(value))}"
    return valid, ""


def parse_match_score(reply: str | None, shown: Sequence[str] = ()) -> tuple[int | None, str]:
    value = json_field(reply, "match_score", shown)
    if value is None:
        return None, f'no {{"match_score": ...}} object in reply: {_snippet(reply)}'
    score = match_value(value)
    if score is None:
        return None, f"match_score must be 0, 1 or 2, got {_snippet(json.dumps(value))}"
    return score, ""


def format_aspect(aspect: RubricAspect) -> str:
    return f"{aspect.aspect}: {aspect.reason}" if aspect.reason else aspect.aspect


@dataclass
class GoldJudge:
    provider: ProviderSpec
    gateway: Gateway
    mode: GoldMode = "per-answer"
    system: Template = field(default_factory=lambda: builtin("gold_answer_system"))
    user: Template = field(default_factory=lambda: builtin("gold_answer_user"))

    @classmethod
    def for_mode(cls, provider: ProviderSpec, gateway: Gateway, mode: GoldMode) -> GoldJudge:
        stem = "gold_answer" if mode == "per-answer" else "gold_aspect"
        return cls(provider, gateway, mode, builtin(f"{stem}_system"), builtin(f"{stem}_user"))

    def describe(self) -> dict[str, Any]:
        return {
            "provider": self.provider.name,
            "model": self.provider.model,
            "api_base": self.provider.redacted_api_base,
            "mode": self.mode,
            "templates": {t.name: t.sha for t in (self.system, self.user)},
            "example_score": "sum of aspect scores (0/1/2) / (2 * aspects), in [0, 1]",
        }

    def requests(self, pair: Pair, answer: str) -> list[LLMRequest]:
        """The calls that grade `answer`: one for the whole rubric, or one per aspect."""
        aspects = pair.view("oracle").rubric_aspects
        template_hash = combined_sha(self.system, self.user)
        values = {"question": pair.question, "answer": answer}
        if self.mode == "per-answer":
            listing = "\n".join(f"{i}. {format_aspect(a)}" for i, a in enumerate(aspects, start=1))
            users = [self.user.render({**values, "aspects": listing, "count": str(len(aspects))})]
        else:
            users = [self.user.render({**values, "aspect": format_aspect(a)}) for a in aspects]
        return [
            LLMRequest.chat(self.system.text, user, template_hash=template_hash, purpose="gold")
            for user in users
        ]

    async def grade(self, pair: Pair, answer: str) -> GoldGrade:
        if not pair.view("oracle").rubric_aspects:
            return GoldGrade(status="no_rubric", error=f"question {pair.id} has no rubric aspects to grade")
        requests = self.requests(pair, answer)
        results = await asyncio.gather(*(self.gateway.call(self.provider, r) for r in requests))
        grade = GoldGrade(status="ok")
        for result in results:
            grade.add(result)
        if self.mode == "per-answer":
            count = len(pair.view("oracle").rubric_aspects)
            reading = read_grade(results[0], lambda text: parse_scores(text, count, [answer]))
            if not grade.fail([reading]):
                grade.aspect_scores = reading.value
            return grade
        readings = [read_grade(r, lambda text: parse_match_score(text, [answer])) for r in results]
        if not grade.fail(readings, per_aspect=True):
            grade.aspect_scores = [r.value for r in readings if r.value is not None]
        return grade


def _snippet(text: str | None, limit: int = 120) -> str:
    flat = " ".join((text or "").split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


class OfficialGoldJudge(GoldJudge):
    """The gold call as the official BoN/evaluate.py makes it (`prbj bon evaluate --protocol official`): aspect
    names only, joined with ", ", the official prompt and system line read from the user's clone, at most 32
    tokens, and a plain list of 0/1/2 parsed from the reply. A reply without numbers is a failed grade (the
    official script scores it 0)."""

    def __init__(self, provider: ProviderSpec, gateway: Gateway, repo: OfficialRepo) -> None:
        system = Template(f"official:{GOLD_SCRIPT}", repo.system_line(GOLD_SCRIPT))
        super().__init__(provider, gateway, "per-answer", system, repo.template(GOLD_PROMPT))

    def describe(self) -> dict[str, Any]:
        # The cap sent: the official 32 tokens, raised for a reasoning model (see gold_params).
        sent = self.provider.params.get("max_tokens", GOLD_MAX_TOKENS)
        return {**super().describe(), "protocol": "official", "max_tokens": sent}

    def requests(self, pair: Pair, answer: str) -> list[LLMRequest]:
        names = official_aspects([a.aspect for a in pair.view("oracle").rubric_aspects])
        user = self.user.render({"question": pair.question, "answer": answer, "aspects": names})
        return [
            LLMRequest.chat(
                self.system.text,
                user,
                template_hash=combined_sha(self.system, self.user) + "-official",
                purpose="gold",
            )
        ]

    async def grade(self, pair: Pair, answer: str) -> GoldGrade:
        if not pair.view("oracle").rubric_aspects:
            return GoldGrade(status="no_rubric", error=f"question {pair.id} has no rubric aspects to grade")
        (result,) = await asyncio.gather(
            *(self.gateway.call(self.provider, r) for r in self.requests(pair, answer))
        )
        grade = GoldGrade(status="ok")
        grade.add(result)
        reading = read_grade(
            result,
            lambda text: (parse_official_scores(text), f"no list of scores in reply: {_snippet(text)}"),
        )
        if not grade.fail([reading]):
            grade.aspect_scores = reading.value  # type: ignore[assignment]  # the official list may hold non-integers
        return grade


def gold_params(repo: OfficialRepo | None) -> dict[str, Asked]:
    """What the gold judge asks of its provider besides the profile: the official call's 32 tokens at
    temperature 0 under --protocol official (prbj's own grading keeps the profile's settings). Defaults, not
    options: on a reasoning model the provider rules raise the cap by room for its reasoning (otherwise hidden
    reasoning spends the 32 tokens and the reply is empty) and leave out a temperature it does not take."""
    if repo is None:
        return {}
    source = "official gold grading"
    return {"max_tokens": Asked(GOLD_MAX_TOKENS, source), "temperature": Asked(0.0, source)}


def gold_judge(
    provider: ProviderSpec, gateway: Gateway, mode: GoldMode, repo: OfficialRepo | None
) -> GoldJudge:
    """The gold judge of `prbj bon evaluate`: the official call when the official repository is given."""
    return (
        OfficialGoldJudge(provider, gateway, repo)
        if repo is not None
        else GoldJudge.for_mode(provider, gateway, mode)
    )
