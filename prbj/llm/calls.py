"""What a model call is, what it comes back as, and what the gateway keeps per provider while a run calls it.

Shared by the gateway and the stages a call passes through (prbj.llm.admission, prbj.llm.settlement,
prbj.llm.batch_handoff); callers import these names from prbj.llm.gateway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from prbj.data.status import REPLIED_STATUSES, CallStatus
from prbj.llm.finish import COMPLETE, ReplyEnd

if TYPE_CHECKING:
    from prbj.llm.breaker import CircuitBreaker
    from prbj.llm.logprobs import TokenChoice
    from prbj.llm.pacing import ProviderPacing
    from prbj.llm.param_rules import SettledParams
    from prbj.llm.providers import ProviderSpec


@dataclass(frozen=True)
class LLMRequest:
    messages: tuple[Mapping[str, str], ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    # Hash of the prompt template(s) that produced the messages, so a template edit never reuses old answers.
    template_hash: str = ""
    # Distinguishes repeated samples of the same prompt (Best-of-N); 0 for single calls.
    sample_index: int = 0
    purpose: str = "judge"
    # Characters at the start of the last user message that other calls share (a pair's profile and question):
    # where an Anthropic cache breakpoint goes. Not part of the key: it changes the price, never the answer.
    shared_prefix_chars: int = 0

    @staticmethod
    def chat(system: str | None, user: str, **kwargs: Any) -> LLMRequest:
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": user}
        ]
        return LLMRequest(messages=tuple(messages), **kwargs)


@dataclass
class LLMResult:
    status: CallStatus
    text: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # What this call cost now (0 for a cache hit) and what the answer cost when it was first bought.
    cost_usd: float = 0.0
    original_cost_usd: float = 0.0
    latency_s: float = 0.0
    attempts: int = 0
    cached: bool = False
    error: str | None = None
    # Why the call did not end ok, in the short words failures are counted by ("429 Too Many Requests", "quota
    # exhausted", "truncated", "refused (SAFETY)"); None when it did (or when its status says it all).
    cause: str | None = None
    # How the reply ended (cut at the output cap, refused) and the hidden reasoning tokens it spent.
    end: ReplyEnd = COMPLETE
    # Letter positions of the reply with their log-probabilities, when the request asked (prbj.llm.logprobs).
    logprobs: tuple[TokenChoice, ...] | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def replied(self) -> bool:
        """The provider answered (and billed) it: ok, or a reply cut at its cap or refused, whose text (if any)
        a reader may still look at."""
        return self.status in REPLIED_STATUSES


@dataclass
class ProviderStats:
    provider: str
    model: str
    requests_sent: int = 0
    calls_ok: int = 0
    # Paid replies that reached their output cap, or that the provider refused (filter, safety block, refusal).
    truncated: int = 0
    refused: int = 0
    cache_hits: int = 0
    retries: int = 0
    rate_limited: int = 0
    # Calls that were sent (at least once) and ended without an answer.
    errors: int = 0
    # Calls never sent, by why: --max-cost, --cache-only, the provider's circuit breaker had opened, Ctrl-C.
    skipped_budget: int = 0
    skipped_cache: int = 0
    not_sent_breaker: int = 0
    not_sent_interrupted: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    saved_usd: float = 0.0
    planned_calls: int = 0
    planned_prompt_tokens: int = 0
    planned_completion_tokens: int = 0
    planned_cost_usd: float = 0.0
    # Batch mode (--batch): answers bought in provider batch jobs, what they cost, and what live calls would have.
    batch_calls: int = 0
    batch_cost_usd: float = 0.0
    batch_saved_usd: float = 0.0
    planned_batch_cost_usd: float = 0.0
    # Provider prompt caching: input tokens read from the provider's cache, and what that saved net of writes.
    cached_input_tokens: int = 0
    provider_cache_saved_usd: float = 0.0
    # The generation parameters of this provider's calls, one entry per setting the run used (the planner and
    # a judge may differ): what prbj asked, what LiteLLM sent after its mapping, the rules' changes and warnings.
    params: list[dict[str, Any]] = field(default_factory=list)
    # How fast the provider was called and why not faster (achieved rates, limits in force and their sources,
    # what was learned from its headers, what bound it): added to as_dict() from here.
    pacing: ProviderPacing | None = field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        row = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "pacing"}
        if self.pacing is not None:
            row |= self.pacing.report(self.requests_sent, self.prompt_tokens + self.completion_tokens)
        return row


@dataclass
class ProviderState:
    spec: ProviderSpec
    stats: ProviderStats
    pacing: ProviderPacing
    breaker: CircuitBreaker
    # A provider whose replies state its rate limits (OpenAI, Anthropic, OpenAI-compatible servers) gets its
    # first request alone, the rest waiting for the answer: they then leave at the stated rate, a bad key shows
    # on one request rather than a burst, and LiteLLM's first call (which loads code, blocking the event loop)
    # is over before the rest are paced. A provider that states none (Gemini) has nothing to teach that is
    # worth a round trip of every run: it starts set (prbj.llm.ratelimit_headers.states_limits).
    warmed: asyncio.Event = field(default_factory=asyncio.Event)
    warming: bool = False
    # The settled parameters already recorded in `stats.params` (compared by identity: one check per call).
    recorded: list[SettledParams] = field(default_factory=list)
