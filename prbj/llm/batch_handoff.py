"""Handing a run's misses to provider batch jobs (--batch) and taking their answers back.

A miss is reserved at batch price and queued instead of sent; at the end of a round the queued requests are
submitted, waited for and stored in the cache, and the round runs again, so that a step needing an earlier answer
(a planner's aspects, a built answer's check) is asked once that answer is in. Answers bought in this run's jobs
are served to later rounds as bought now (cost, not cached), as a live run's tables would show them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from prbj.llm.admission import refuse_cap_below_one_call
from prbj.llm.calls import LLMResult, ProviderState
from prbj.llm.settlement import count_end, replied

if TYPE_CHECKING:
    # Imported where a batch is queued: a run without --batch does not load the batch machinery (~0.05 s).
    from prbj.llm.batch.queue import BatchQueue
    from prbj.llm.budget import Budget
    from prbj.llm.providers import ProviderSpec
    from prbj.llm.transport import ChatCall

T = TypeVar("T")
# What a round of calls counts that a later round counts again (see BatchHandoff.in_rounds).
ROUND_COUNTERS = ("cache_hits", "saved_usd", "skipped_budget", "skipped_cache")


class BatchHandoff:
    """A gateway's side of its batch queue: what it queued, and the answers its jobs bought."""

    def __init__(self, batch: BatchQueue | None, budget: Budget) -> None:
        self.batch = batch
        self.budget = budget
        self.bought: dict[str, LLMResult] = {}

    async def queue(
        self,
        state: ProviderState,
        key: str,
        call: Callable[[], ChatCall],
        purpose: str,
        estimate: Callable[[], tuple[int, int, float]],
    ) -> LLMResult:
        """A miss joins the next batch job (reserved at batch prices); a line that failed in this run's batch is
        an api_error with the provider's reason, bought again only by a later run. `estimate` gives the
        request's (prompt tokens, output bound, worst-case USD), `call` what is sent."""
        from prbj.llm.batch.queue import Pending, batch_cost

        batch = self.batch
        assert batch is not None
        reason = batch.failures.get(key)
        if reason is not None:
            return LLMResult(status="api_error", error=f"batch: {reason}")
        spec = state.spec
        pending = Pending(spec, key, call(), purpose)
        if key not in batch.pending:
            prompt, completion, _ = estimate()
            pending.reserved = batch_cost(spec, prompt, completion)
            refuse_cap_below_one_call(
                self.budget, spec, prompt, completion, pending.reserved, " at batch price"
            )
            if not await self.budget.reserve(pending.reserved):
                state.stats.skipped_budget += 1
                return LLMResult(
                    status="skipped_budget",
                    error=f"would cross --max-cost (worst case ${pending.reserved:.4f} at batch price)",
                )
            batch.enqueue(pending)
        return LLMResult(status="skipped_cache", error="queued for a provider batch job")

    async def in_rounds(
        self,
        work: Callable[[], Awaitable[T]],
        providers: Mapping[str, ProviderState],
        state_of: Callable[[ProviderSpec], ProviderState],
    ) -> T:
        """`work()`'s result, bought in rounds (see Gateway.in_rounds). `providers` is the gateway's live map of
        provider states (a round may add to it), `state_of` its look-up of a provider's state."""
        while True:
            before = {
                name: {counter: getattr(state.stats, counter) for counter in ROUND_COUNTERS}
                for name, state in providers.items()
            }
            result = await work()
            if not await self.flush(state_of):
                return result
            # This round's results are dropped, and so are the hits and skips it counted: the next round counts
            # them again. What its batch jobs bought stays counted.
            for name, state in providers.items():
                for counter in ROUND_COUNTERS:
                    setattr(state.stats, counter, before.get(name, {}).get(counter, 0))

    async def flush(self, state_of: Callable[[ProviderSpec], ProviderState]) -> bool:
        """Submit what was queued, wait for the jobs and store their answers in the cache. False when nothing was
        queued (the last round's results are final). Raises BatchSubmitted under --no-wait."""
        batch = self.batch
        if batch is None or not batch.pending:
            return False
        queued = dict(batch.pending)
        for answer in await batch.flush():
            pending = queued.get(answer.key)
            if pending is None:
                continue  # another run's request that shared a job with ours: stored, not ours to count
            stats = state_of(pending.spec).stats
            if answer.completion is None:
                self.budget.release(pending.reserved)
                stats.errors += 1
                continue
            self.budget.settle(pending.reserved, answer.cost_usd)
            completion = answer.completion
            self.bought[answer.key] = replied(
                completion.text,
                completion.prompt_tokens,
                completion.completion_tokens,
                completion.end,
                pending.call.params,
                cost_usd=answer.cost_usd,
                original_cost_usd=answer.cost_usd,
                attempts=1,
                logprobs=completion.logprobs,
            )
            count_end(stats, completion.end)
            stats.batch_calls += 1
            stats.prompt_tokens += answer.completion.prompt_tokens
            stats.completion_tokens += answer.completion.completion_tokens
            stats.cost_usd += answer.cost_usd
            stats.batch_cost_usd += answer.cost_usd
            stats.batch_saved_usd += answer.live_cost_usd - answer.cost_usd
            stats.cached_input_tokens += answer.completion.cached_tokens
            stats.provider_cache_saved_usd += answer.provider_cache_saved_usd
        return True
