"""What a stage's gateways sent, planned and spent, summed per stage, with a time estimate from the providers'
rate limits (requests and tokens per minute, requests in flight)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from prbj.llm.batch.queue import batch_cost
from prbj.llm.gateway import Gateway, ProviderStats
from prbj.llm.pacing import DEFAULT_MAX_IN_FLIGHT
from prbj.llm.providers import ProviderSpec

# A call's round trip when a profile states no rate limit: only for the time estimate of a dry run.
NOMINAL_LATENCY_S = 2.0


@dataclass
class ProviderPlan:
    provider: str
    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    batch_cost_usd: float = 0.0
    seconds: float = 0.0
    # True when the calls are counted from outputs that do not exist yet (at most this many).
    bound: bool = False


@dataclass
class StageUsage:
    """One stage: what was sent and spent (a run), or what would be (a dry run)."""

    calls_sent: int = 0
    cache_hits: int = 0
    cost_usd: float = 0.0
    providers: list[ProviderPlan] = field(default_factory=list)
    note: str = ""
    # Answers a local reward model scores in-process (free, not calls; a dry run does not score them).
    local_answers: int = 0

    @property
    def planned_calls(self) -> int:
        return sum(p.calls for p in self.providers)

    @property
    def planned_cost_usd(self) -> float:
        return sum(p.cost_usd for p in self.providers)

    @property
    def planned_batch_cost_usd(self) -> float:
        return sum(p.batch_cost_usd for p in self.providers)

    @property
    def seconds(self) -> float:
        # Providers of one stage are called at the same time; the slowest sets the pace.
        return max((p.seconds for p in self.providers), default=0.0)

    @property
    def bound(self) -> bool:
        return any(p.bound for p in self.providers)

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls_sent": self.calls_sent,
            "cache_hits": self.cache_hits,
            "cost_usd": self.cost_usd,
            "planned_calls": self.planned_calls,
            "planned_cost_usd": self.planned_cost_usd,
            "planned_batch_cost_usd": self.planned_batch_cost_usd,
            "seconds": self.seconds,
            "providers": [asdict(p) for p in self.providers],
            "local_answers": self.local_answers,
            **({"note": self.note} if self.note else {}),
        }


def estimate_seconds(spec: ProviderSpec | None, calls: int, tokens: int) -> float:
    """The least time `calls` calls of `tokens` tokens take within the profile's limits."""
    if not calls:
        return 0.0
    # Requests in flight: at most the provider's ceiling (prbj.llm.pacing sizes them from rate × latency).
    concurrency = (spec.max_concurrency or DEFAULT_MAX_IN_FLIGHT) if spec is not None else 8
    bounds = [calls * NOMINAL_LATENCY_S / max(1, concurrency)]
    if spec is not None and spec.rpm:
        bounds.append(calls * 60.0 / spec.rpm)
    if spec is not None and spec.tpm:
        bounds.append(tokens * 60.0 / spec.tpm)
    return max(bounds)


def _plan(spec: ProviderSpec, stats: ProviderStats) -> ProviderPlan:
    prompt, completion = stats.planned_prompt_tokens, stats.planned_completion_tokens
    return ProviderPlan(
        provider=stats.provider,
        calls=stats.planned_calls,
        cached=stats.cache_hits,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_usd=stats.planned_cost_usd,
        batch_cost_usd=batch_cost(spec, prompt, completion),
        seconds=estimate_seconds(spec, stats.planned_calls, prompt + completion),
    )


def stage_usage(gateways: Iterable[Gateway]) -> StageUsage:
    usage = StageUsage()
    by_provider: dict[str, ProviderPlan] = {}
    for gateway in gateways:
        for spec, stats in zip(gateway.providers(), gateway.stats(), strict=True):
            usage.calls_sent += stats.requests_sent
            usage.cache_hits += stats.cache_hits
            usage.cost_usd += stats.cost_usd
            plan = _plan(spec, stats)
            known = by_provider.get(plan.provider)
            by_provider[plan.provider] = plan if known is None else merged(known, plan)
    usage.providers = list(by_provider.values())
    return usage


def merged(first: ProviderPlan, second: ProviderPlan) -> ProviderPlan:
    return ProviderPlan(
        provider=first.provider,
        calls=first.calls + second.calls,
        cached=first.cached + second.cached,
        prompt_tokens=first.prompt_tokens + second.prompt_tokens,
        completion_tokens=first.completion_tokens + second.completion_tokens,
        cost_usd=first.cost_usd + second.cost_usd,
        batch_cost_usd=first.batch_cost_usd + second.batch_cost_usd,
        seconds=first.seconds + second.seconds,
        bound=first.bound or second.bound,
    )


def totals(stages: Sequence[StageUsage]) -> StageUsage:
    """All stages together: they run one after another, so their times add up."""
    total = StageUsage()
    by_provider: dict[str, ProviderPlan] = {}
    for stage in stages:
        total.calls_sent += stage.calls_sent
        total.cache_hits += stage.cache_hits
        total.cost_usd += stage.cost_usd
        for plan in stage.providers:
            known = by_provider.get(plan.provider)
            by_provider[plan.provider] = plan if known is None else merged(known, plan)
    total.providers = list(by_provider.values())
    return total
