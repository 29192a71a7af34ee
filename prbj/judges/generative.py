"""LLM judges through the gateway: pairwise (A/B verdict) and pointwise (a score per answer).

Context settings decide what the judge sees besides the question and the answers:
`none` nothing; `profile` the user's profile of whatever kind the benchmark has (prbj.context.profile_text: past
posts ranked by BM25 relevance to the question, top k, or earlier choices, persona and stated preferences);
`planner` the aspects a planner model inferred from the ranked profile; `synthesized` the persona a synthesizer
model wrote from the user's earlier choices (prbj.context.synthesizer; the view holds it in place of the profile);
`oracle` the gold rubric aspects (an upper bound, never a fair result). Only the oracle view can read the gold
rubric (see prbj.data.schema).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from prbj.context.planner import Planner
from prbj.context.profile_text import DEFAULT_PROFILE_K, ProfileOrder, format_profile
from prbj.context.synthesizer import shown_persona
from prbj.data.schema import Context, JudgeView
from prbj.data.status import HEALABLE_STATUSES, STATUSES, Status
from prbj.errors import ConfigError
from prbj.judges.base import (
    Judgment,
    PairTask,
    PointwiseJudge,
    ScoreFailure,
)
from prbj.judges.confidence import probability_of_a
from prbj.judges.official import Protocol, parse_official_verdict
from prbj.judges.orders import (
    DEFAULT_ORDER_SEED,
    OrderMode,
    OrderRead,
    PairwiseJudge,
    combine_reads,
    shown,
)
from prbj.judges.tournament import judge_tournament
from prbj.judges.verdict import PARSER_VERSION, REPLY_SEPARATOR, parse_score, parse_verdict
from prbj.llm.gateway import Gateway, LLMRequest, LLMResult
from prbj.llm.logprobs import asked
from prbj.llm.prompt_cache import MIN_CACHED_PREFIX_TOKENS, marks_shared_prefix, shared_prefix_chars
from prbj.llm.providers import ProviderSpec
from prbj.llm.reading import may_repair, read_reply
from prbj.prompts import Template, builtin, combined_sha

SCORE_SCALE = (1.0, 10.0)
# --retry-failed: how many fresh samples a failed call may get (sample indexes 1..this); each one is cached.
MAX_RETRY_SAMPLES = 3


@dataclass
class ContextBlock:
    text: str = ""
    profile: str = ""
    rubrics: str = ""
    failure: LLMResult | None = None
    # The judgment's status when `failure` is set: the call's, or `planner_error` for a reply without aspects.
    failure_status: Status | None = None


class ContextBuilder:
    """Renders what a judge may know about the user, for one context setting."""

    def __init__(
        self,
        context: Context,
        *,
        profile_k: int = DEFAULT_PROFILE_K,
        planner: Planner | None = None,
        profile_order: ProfileOrder = "similar",
    ) -> None:
        if context == "planner" and planner is None:
            raise ConfigError(
                "--context planner needs --planner <provider> (the model that infers the aspects)"
            )
        self.context = context
        self.profile_k = profile_k
        self.profile_order = profile_order
        self.planner = planner
        self.profile_template = builtin("context_profile")
        self.rubrics_template = builtin("context_rubrics")
        # A profile that is not past posts alone is introduced as what is known about the user.
        self.about_template = builtin("context_user")
        self.persona_template = builtin("context_persona")

    def templates(self) -> list[Template]:
        """The templates named in every request's template hash (the profile text itself is in the messages)."""
        return [self.profile_template, self.rubrics_template]

    def described(self) -> list[Template]:
        persona = [self.persona_template] if self.context == "synthesized" else []
        return [*self.templates(), self.about_template, *persona]

    async def build(self, view: JudgeView) -> ContextBlock:
        if self.context == "none":
            return ContextBlock()
        if self.context in ("profile", "swapped-profile"):
            # A swapped view already holds another user's profile: it is rendered exactly like a real one.
            profile = format_profile(view, self.profile_k, self.profile_order)
            template = self.profile_template if view.user_profile.only_posts else self.about_template
            return ContextBlock(template.render({"profile": profile}), profile=profile)
        if self.context == "synthesized":
            # The view holds the persona in place of the profile (written before the judge was asked).
            persona = shown_persona(view)
            return ContextBlock(self.persona_template.render({"profile": persona}), profile=persona)
        if self.context == "planner":
            assert self.planner is not None
            planned = await self.planner.aspects(view)
            if planned.result.status == "dry_run":
                # Nothing was asked, but the judge calls that would follow must still be counted in the plan,
                # with aspects as long as the planner's reply may be, so that their estimate stays a bound.
                rubrics = "\n".join(f"- {aspect}" for aspect in self.planner.stand_in_aspects(view))
                return ContextBlock(self.rubrics_template.render({"rubrics": rubrics}), rubrics=rubrics)
            if not planned.ok:
                failure = (
                    LLMResult("ok", error=f"no aspect in reply: {_snippet(planned.result.text)}")
                    if planned.status == "planner_error"
                    else planned.result
                )
                return ContextBlock(failure=failure, failure_status=planned.status)
            rubrics = "\n".join(f"- {aspect}" for aspect in planned.aspects)
            return ContextBlock(self.rubrics_template.render({"rubrics": rubrics}), rubrics=rubrics)
        rubrics = "\n".join(
            f"- {a.aspect}" + (f": {a.reason}" if a.reason else "") for a in view.rubric_aspects
        )
        return ContextBlock(self.rubrics_template.render({"rubrics": rubrics}), rubrics=rubrics)


def check_template_shows_context(
    template: Template, context: Context, option: str, *, system: Template | None = None
) -> None:
    """A custom template that never shows the context would silently turn every setting into `none`."""
    needs = {
        "profile": "profile",
        "swapped-profile": "profile",
        "synthesized": "profile",
        "planner": "rubrics",
        "oracle": "rubrics",
    }.get(context)
    shown = template.placeholders | (system.placeholders if system is not None else set())
    if needs and not ({needs, "context"} & shown):
        raise ConfigError(
            f"{option} {template.name}: --context {context} needs a {{{needs}}} or {{context}} placeholder"
        )


# What one pairwise call (with its repair, if any) ended in.
VerdictRead = OrderRead


@dataclass
class Usage:
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    cached_calls: int = 0
    # The highest sample index a verdict or score came from (0 unless --retry-failed re-asked).
    sample_index: int = 0
    # What the answers cost when first bought (a cached replay's true price) and the time spent sending.
    original_cost_usd: float = 0.0
    latency_s: float = 0.0
    # Kept in judgments.parquet so that each verdict can be read and traced to its exact prompt.
    replies: list[str] = field(default_factory=list)
    prompt_hashes: list[str] = field(default_factory=list)
    context_block: str | None = None
    # P(chosen is better) from verdict-token log-probabilities (--confidence logprobs); None otherwise.
    p_chosen: float | None = None

    def add(self, result: LLMResult, prompt_hash: str | None = None) -> None:
        self.cost_usd += result.cost_usd
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.calls += 1
        self.cached_calls += int(result.cached)
        self.original_cost_usd += result.original_cost_usd
        self.latency_s += 0.0 if result.cached else result.latency_s
        if result.text is not None:
            self.replies.append(result.text)
        if prompt_hash is not None:
            self.prompt_hashes.append(prompt_hash)

    def absorb(self, other: Usage) -> None:
        """Add what `other` counted (the calls of one answer order) after what this one holds."""
        self.cost_usd += other.cost_usd
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.calls += other.calls
        self.cached_calls += other.cached_calls
        self.sample_index = max(self.sample_index, other.sample_index)
        self.original_cost_usd += other.original_cost_usd
        self.latency_s += other.latency_s
        self.replies.extend(other.replies)
        self.prompt_hashes.extend(other.prompt_hashes)

    def fields(self) -> dict[str, Any]:
        return {
            "cost_usd": self.cost_usd,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached": self.calls > 0 and self.cached_calls == self.calls,
            "extra": {
                "sample_index": self.sample_index,
                "reply": REPLY_SEPARATOR.join(self.replies) if self.replies else None,
                "prompt_hash": ",".join(self.prompt_hashes) if self.prompt_hashes else None,
                "context_block": self.context_block,
                "original_cost_usd": self.original_cost_usd,
                "latency_s": self.latency_s if self.calls > self.cached_calls else None,
                # Only when computed, so that a run that did not ask has no such column.
                **(
                    {}
                    if self.p_chosen is None
                    else {"p_chosen": self.p_chosen, "confidence_source": "logprobs"}
                ),
            },
        }


def prompt_hash(system: str, user: str) -> str:
    """A short fingerprint of the exact prompt sent: equal hashes, identical prompts."""
    return hashlib.sha256(f"{system}\x00{user}".encode()).hexdigest()[:16]


class LLMJudgeBase:
    """What pairwise and pointwise LLM judges share: provider, gateway, context, templates, repair."""

    provider: ProviderSpec
    gateway: Gateway
    contexts: ContextBuilder
    system: Template
    user: Template
    repair: bool
    retry_failed: bool = False
    # Which repeated sample of the same prompt this judge asks for (part of the cache key); see judges.sampling.
    sample_index: int = 0

    @property
    def top_logprobs(self) -> int:
        """Alternatives per position whose log-probabilities the provider is asked for (--confidence logprobs,
        as the provider's settled parameters hold it: a rule may have left them out); 0 when none are."""
        return asked(self.provider.params)

    def _template_hash(self) -> str:
        return combined_sha(self.system, self.user, *self.contexts.templates()) + f"-p{PARSER_VERSION}"

    def _describe(self) -> dict[str, Any]:
        return {
            "provider": self.provider.name,
            "model": self.provider.model,
            "api_base": self.provider.redacted_api_base,
            "templates": {t.name: t.sha for t in (self.system, self.user, *self.contexts.described())},
            "repair": self.repair,
        }

    def _prompt(self, values: dict[str, str]) -> tuple[str, str]:
        """System and user text; both templates get the placeholders, so a custom system prompt may show the
        profile too."""
        return self.system.render(values), self.user.render(values)

    def _samples(self) -> range:
        """The sample indexes a call may use: 0, and with --retry-failed a few fresh ones after a failure."""
        return range(1 + (MAX_RETRY_SAMPLES if self.retry_failed else 0))

    async def _ask(
        self, prompt: tuple[str, str], usage: Usage, sample: int = 0, varying: Sequence[str] = ()
    ) -> LLMResult:
        """`varying`: the texts that differ between the calls of a pair (the answers); what comes before the
        first of them is shared, and marked for the provider's prompt cache."""
        system, user = prompt
        # Looked for only where a request carries it: two searches of the prompt, on every call, cached ones too.
        shared = shared_prefix_chars(user, varying) if marks_shared_prefix(self.provider) else 0
        # --samples K asks sample k at index k × stride; --retry-failed re-asks a failed one at the next indexes.
        request = LLMRequest.chat(
            system,
            user,
            template_hash=self._template_hash(),
            sample_index=self.sample_index + sample,
            shared_prefix_chars=shared,
        )
        result = await self.gateway.call(self.provider, request)
        usage.add(result, prompt_hash=prompt_hash(system, user))
        return result

    async def _repair(self, prompt: tuple[str, str], reply: str, choices: str, usage: Usage) -> LLMResult:
        """One more turn asking only for the final line; the conversation shows the judge its own reply."""
        system, user = prompt
        first = LLMRequest.chat(system, user).messages
        messages = (
            *first,
            {"role": "assistant", "content": reply},
            {"role": "user", "content": builtin("repair").render({"choices": choices})},
        )
        request = LLMRequest(
            messages=messages,
            template_hash=self._template_hash() + "-repair",
            sample_index=self.sample_index,
        )
        result = await self.gateway.call(self.provider, request)
        usage.add(result)
        return result


class PairwiseLLMJudge(LLMJudgeBase, PairwiseJudge):
    """One call shows both answers as A and B and asks which fits the user better; the answer order (one drawn
    per pair, or both) is prbj.judges.orders'."""

    def __init__(
        self,
        provider: ProviderSpec,
        gateway: Gateway,
        *,
        context: Context = "none",
        contexts: ContextBuilder | None = None,
        order: OrderMode = "random",
        order_seed: int = DEFAULT_ORDER_SEED,
        system: Template | None = None,
        user: Template | None = None,
        repair: bool = False,
        retry_failed: bool = False,
        protocol: Protocol = "prbj",
    ) -> None:
        self.name = provider.name
        self.provider = provider
        self.protocol = protocol
        self.gateway = gateway
        self.context = context
        self.contexts = contexts or ContextBuilder(context)
        self.order = order
        self.order_seed = order_seed
        self.system = system or builtin("pairwise_system")
        self.user = user or builtin("pairwise_user")
        self.repair = repair
        self.retry_failed = retry_failed
        self.positions: dict[str, str] = {}

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            **self._describe(),
            "mode": "pairwise",
            "order": self.order,
            "order_seed": self.order_seed,
            "protocol": self.protocol,
        }

    def _read_verdict(self, reply: str | None, shown: Sequence[str]) -> str | None:
        """The official first-`result:` rule under --protocol official, prbj's last explicit verdict otherwise;
        either way an unreadable reply is None (a parse error), never "A"."""
        if self.protocol == "official":
            return parse_official_verdict(reply)
        return parse_verdict(reply, shown)

    async def judge(self, task: PairTask) -> Judgment:
        view, pair = task.view, task.pair
        usage = Usage()
        block = await self.contexts.build(view)
        usage.context_block = block.text
        if block.failure is not None:
            return self._judgment(
                task,
                status=_block_status(block),
                error=f"planner: {block.failure.error}",
                cause=block.failure.cause,
            )
        if pair.others:
            return await judge_tournament(
                task,
                ask=partial(self._verdict, view, block),
                both_orders=self.order == "both",
                seed=self.order_seed,
                judgment=self._judgment,
                usage=usage,
                new_usage=Usage,
            )
        positions = self.orders(pair)
        # Each order counts its own calls, added in order: replies and prompt hashes stay A's, then B's.
        counted = [Usage() for _ in positions]
        asks = [
            partial(self._verdict, view, block, *shown(pair, position), part)
            for position, part in zip(positions, counted, strict=True)
        ]
        if len(asks) > 1 and not self._shared_may_be_cached(view, block):
            # Nothing the first order leaves in a prompt cache could serve the second: both at once (the second
            # as a task, the first awaited here: one task per pair, not gather's two, on a cached rerun too).
            second = asyncio.ensure_future(asks[1]())
            try:
                first = await asks[0]()
            except BaseException:
                second.cancel()
                raise
            reads = [first, await second]
        else:
            # The second order may read from the provider's prompt cache what the first one wrote there.
            reads = [await ask() for ask in asks]
        for part in counted:
            usage.absorb(part)
        combined = combine_reads(positions, reads)
        if self.top_logprobs and combined.p_chosen is not None:
            usage.p_chosen = combined.p_chosen
        return self._judgment(task, **combined.fields(), **usage.fields())

    def _shared_may_be_cached(self, view: JudgeView, block: ContextBlock) -> bool:
        """Whether what the two orders of a pair share (all but the answers: at most the templates, what the
        judge is shown of the user, and the question) may reach the shortest prefix a provider caches, 1,024
        tokens (OpenAI, Gemini, Anthropic's breakpoint). Counted high, at a token per two bytes of UTF-8 (English
        runs ~4.5), so that no prefix that could be cached is missed."""
        shown = (block.text, block.profile, block.rubrics, view.question)
        shared = self.system.utf8_bytes + self.user.utf8_bytes + sum(len(text.encode()) for text in shown)
        return shared >= 2 * MIN_CACHED_PREFIX_TOKENS

    async def _verdict(
        self, view: JudgeView, block: ContextBlock, answer_a: str, answer_b: str, usage: Usage
    ) -> VerdictRead:
        for sample in self._samples():
            read = await self._verdict_sample(view, block, answer_a, answer_b, usage, sample)
            if read.status not in HEALABLE_STATUSES:
                break
        usage.sample_index = max(usage.sample_index, sample)
        return read

    async def _verdict_sample(
        self, view: JudgeView, block: ContextBlock, answer_a: str, answer_b: str, usage: Usage, sample: int
    ) -> VerdictRead:
        prompt = self._prompt(
            {
                "context": block.text,
                "question": view.question,
                "Response_A": answer_a,
                "Response_B": answer_b,
                "profile": block.profile,
                "rubrics": block.rubrics,
            }
        )
        result = await self._ask(prompt, usage, sample, varying=(answer_a, answer_b))
        shown = [answer_a, answer_b]

        def verdict(text: str) -> str | None:
            return self._read_verdict(text, shown)

        reading = read_reply(result, verdict)
        if self.repair and may_repair(reading, result):
            asked = await self._repair(prompt, result.text or "", "Result: A\nResult: B", usage)
            repaired = read_reply(asked, verdict)
            if repaired.ok:
                reading, result = repaired, asked
        if not reading.ok:
            return VerdictRead(reading.status, error=reading.error, cause=reading.cause)
        return VerdictRead("ok", reading.value, probability_of_a=self._probability_of_a(result, shown))

    def _probability_of_a(self, result: LLMResult, shown: Sequence[str]) -> float | None:
        """From the log-probabilities of the reply the verdict was read from; only prbj's parser locates the
        verdict token (the official protocol's reading gets no probability)."""
        if not self.top_logprobs or self.protocol == "official":
            return None
        return probability_of_a(result.text, shown, result.logprobs)


class PointwiseLLMJudge(LLMJudgeBase, PointwiseJudge):
    """Scores each answer alone on a 1-10 scale; the pair is decided by the scores, ties apart."""

    def __init__(
        self,
        provider: ProviderSpec,
        gateway: Gateway,
        *,
        context: Context = "none",
        contexts: ContextBuilder | None = None,
        system: Template | None = None,
        user: Template | None = None,
        repair: bool = False,
        retry_failed: bool = False,
    ) -> None:
        self.name = f"{provider.name}:pointwise"
        self.provider = provider
        self.gateway = gateway
        self.context = context
        self.contexts = contexts or ContextBuilder(context)
        self.system = system or builtin("pointwise_system")
        self.user = user or builtin("pointwise_user")
        self.repair = repair
        self.retry_failed = retry_failed

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), **self._describe(), "mode": "pointwise", "scale": list(SCORE_SCALE)}

    async def judge(self, task: PairTask) -> Judgment:
        usage = Usage()
        try:
            scores = await self._score_all(task.view, task.pair.candidates, usage)
        except ScoreFailure as failure:
            return self._judgment(
                task, status=failure.status, error=failure.message, cause=failure.cause, **usage.fields()
            )
        return self._scored(task, scores, **usage.fields())

    async def score(self, view: JudgeView, answers: Sequence[str]) -> list[float]:
        return await self._score_all(view, answers, Usage())

    async def _score_all(self, view: JudgeView, answers: Sequence[str], usage: Usage) -> list[float]:
        block = await self.contexts.build(view)
        usage.context_block = block.text
        if block.failure is not None:
            raise ScoreFailure(_block_status(block), f"planner: {block.failure.error}", block.failure.cause)
        scores: list[float] = []
        planned: ScoreFailure | None = None
        for answer in answers:
            try:
                scores.append(await self._score_one(view, block, answer, usage))
            except ScoreFailure as failure:
                # A dry run answers nothing, but the calls for the other answers must still be counted in
                # the plan (a real run sends them all).
                if failure.status != "dry_run":
                    raise
                planned = planned or failure
        if planned is not None:
            raise planned
        return scores

    async def _score_one(self, view: JudgeView, block: ContextBlock, answer: str, usage: Usage) -> float:
        for sample in self._samples():
            try:
                value = await self._score_sample(view, block, answer, usage, sample)
            except ScoreFailure as failure:
                if failure.status not in HEALABLE_STATUSES or sample == self._samples()[-1]:
                    usage.sample_index = max(usage.sample_index, sample)
                    raise
                continue
            usage.sample_index = max(usage.sample_index, sample)
            return value
        raise AssertionError("unreachable: the last sample returns or raises")

    async def _score_sample(
        self, view: JudgeView, block: ContextBlock, answer: str, usage: Usage, sample: int
    ) -> float:
        prompt = self._prompt(
            {
                "context": block.text,
                "question": view.question,
                "response": answer,
                "profile": block.profile,
                "rubrics": block.rubrics,
            }
        )
        result = await self._ask(prompt, usage, sample, varying=(answer,))

        def score(text: str) -> float | None:
            return parse_score(text, [answer], low=SCORE_SCALE[0], high=SCORE_SCALE[1])

        reading = read_reply(result, score, "score")
        if self.repair and may_repair(reading, result):
            asked = await self._repair(prompt, result.text or "", "Score: <integer from 1 to 10>", usage)
            repaired = read_reply(asked, score, "score")
            if repaired.ok:
                reading = repaired
        if reading.value is None:
            raise ScoreFailure(_status(reading.status), reading.error or "call failed", reading.cause)
        return reading.value


def _status(status: str) -> Status:
    return status if status in STATUSES else "api_error"


def _block_status(block: ContextBlock) -> Status:
    assert block.failure is not None
    return block.failure_status or _status(block.failure.status)


def _snippet(text: str | None, limit: int = 120) -> str:
    flat = " ".join((text or "").split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")
