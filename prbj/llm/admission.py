"""Admitting a call's request to the wire: the budget's reservation, the lease on its cache key (processes sharing
a cache folder buy each answer once), the provider's first request alone, requests in flight, the rate and the
token windows, the circuit breaker and Ctrl-C, then the transport.

What is counted here is what really left: a request stopped by the breaker or Ctrl-C before it left is neither a
request sent nor a retry.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prbj.errors import ConfigError
from prbj.llm.budget import CapBelowOneCall
from prbj.llm.error_text import one_line
from prbj.llm.retry import is_rate_limit
from prbj.llm.settlement import with_note

if TYPE_CHECKING:
    from prbj.llm.budget import Budget
    from prbj.llm.cache import ResponseCache
    from prbj.llm.calls import LLMResult, ProviderState
    from prbj.llm.providers import ProviderSpec
    from prbj.llm.transport import ChatCall, Completion, Transport

# A lease on a cache key lasts the request timeout plus this margin, renewed while the call goes on; a process
# waiting for another's answer looks for it this often.
LEASE_MARGIN_SECONDS = 30.0
LEASE_POLL_SECONDS = 0.1
# Set by whoever fans calls out (runs.engine) when the user presses Ctrl-C: from then on no request leaves, while
# those already on the wire may finish and be cached. Tasks inherit it from the context they were created in.
stop_sending: ContextVar[asyncio.Event | None] = ContextVar("prbj_stop_sending", default=None)


@dataclass(slots=True)
class Attempt:
    """One attempt of a call: whether it is a retry, when it began, and when its request left (None until then)."""

    retry: bool
    # Read when the attempt begins, through the module (not a reference taken once): one clock for the whole
    # call path, which a test may replace (tests/virtual_time.py).
    began: float = field(default_factory=lambda: time.monotonic())
    sent_at: float | None = None


class OverBudget(Exception):
    """A retry that no longer fits under --max-cost."""


class Interrupted(Exception):
    """Ctrl-C was pressed before this request left: it is not sent."""


def refuse_cap_below_one_call(
    budget: Budget, spec: ProviderSpec, prompt: int, completion: int, worst_case: float, price: str = ""
) -> None:
    """Before any paid call was reserved: a --max-cost below this call's worst case could pay for nothing (every
    call would be skipped), so the run stops here, one line and exit 2, having sent nothing. Calls answered from
    the cache never come here: a replay runs under any cap."""
    cap = budget.max_cost
    if cap is None or budget.reserved_once or not spec.paid or budget.fits_alone(worst_case):
        return
    raise CapBelowOneCall(
        f"--max-cost {cap:g} is below the worst case of one call to {spec.name}: ${worst_case:.4f} "
        f"({prompt:,} prompt tokens and up to {completion:,} output tokens{price}); nothing was sent: "
        "raise --max-cost, or replay answers already in the cache with --cache-only"
    )


async def reserve(budget: Budget, state: ProviderState, worst_case: float) -> bool:
    """The budget's reservation, its wait (for other calls' reservations to settle) counted."""
    if budget.max_cost is None:
        return await budget.reserve(worst_case)
    started = time.monotonic()
    try:
        return await budget.reserve(worst_case)
    finally:
        state.pacing.waited("budget", time.monotonic() - started)


async def under_lease(
    cache: ResponseCache,
    key: str,
    holder: str,
    seconds: float,
    from_hit: Callable[[Mapping[str, Any]], LLMResult],
    buy: Callable[[], Awaitable[LLMResult]],
) -> LLMResult:
    """`buy()` under a lease on `key` in the cache folder, so that processes sharing the folder buy each answer
    once: while another holds the lease this waits for its answer; when the holder gave up (errors are not
    stored) or crashed (its lease expired) this one claims the key and buys it. `seconds` is longer than one
    request may take; the lease is renewed while retries go on, so it lapses only when its holder died."""
    # The lease and the store are SQLite writes: they run on the cache's worker thread, off the event loop.
    claimed, hit = await cache.aclaim_unless_stored(key, holder, seconds)
    while not claimed:
        if hit is not None:  # the holder stored it
            return from_hit(hit)
        await asyncio.sleep(LEASE_POLL_SECONDS)
        claimed, hit = await cache.aclaim_unless_stored(key, holder, seconds)
    try:
        # Stored by another process between our lookup and our claim.
        if hit is not None:
            return from_hit(hit)
        renewal = LeaseRenewal(cache, key, holder, seconds)
        try:
            return await buy()
        finally:
            renewal.cancel()
    finally:
        # Queued behind the answer's store on the cache's thread: the lease ends once the answer is there.
        cache.release_soon(key, holder)


class LeaseRenewal:
    """Renews a lease every third of its length until cancelled. A timer on the event loop, not a task: most
    calls end long before the first renewal, and a task per call (created, scheduled, cancelled) cost more CPU
    than the rest of the lease's bookkeeping."""

    def __init__(self, cache: ResponseCache, key: str, holder: str, seconds: float) -> None:
        self._cache, self._key, self._holder, self._seconds = cache, key, holder, seconds
        self._loop = asyncio.get_running_loop()
        self._timer = self._loop.call_later(seconds / 3, self._renew)

    def _renew(self) -> None:
        self._timer = self._loop.call_later(self._seconds / 3, self._renew)
        # Queued on the cache's thread like the answer's store; a failure is raised by the next cache call.
        self._cache.renew_soon(self._key, self._holder, self._seconds)

    def cancel(self) -> None:
        self._timer.cancel()


async def send(
    state: ProviderState,
    transports: Mapping[str, Transport],
    call: ChatCall,
    prompt_tokens: int,
    output_bound: int,
    attempt: Attempt,
) -> Completion:
    """Send one attempt of `call` once admitted; a provider that states its limits gets its first request alone
    (see ProviderState.warmed)."""
    if not state.warmed.is_set():
        if state.warming:
            await state.warmed.wait()
        else:
            state.warming = True
            try:
                return await _send_now(state, transports, call, prompt_tokens, output_bound, attempt)
            finally:
                state.warmed.set()
    return await _send_now(state, transports, call, prompt_tokens, output_bound, attempt)


async def _send_now(
    state: ProviderState,
    transports: Mapping[str, Transport],
    call: ChatCall,
    prompt_tokens: int,
    output_bound: int,
    attempt: Attempt,
) -> Completion:
    spec = state.spec
    transport = transports.get(spec.transport)
    if transport is None:
        raise ConfigError(
            f"internal: provider {spec.name!r} needs the transport {spec.transport!r}, which is not "
            f"registered on this gateway"
        )
    breaker, pacing = state.breaker, state.pacing
    # In flight (Little's law), then the request rate, then the token windows: see prbj.llm.pacing.
    await pacing.enter()
    try:
        async with breaker.admit():
            ticket = await pacing.depart(prompt_tokens, output_bound)
            stopping = stop_sending.get()
            if stopping is not None and stopping.is_set():
                raise Interrupted("not sent: interrupted (Ctrl-C)")
            # Counted here, where the request really leaves: a retry stopped by the breaker is no retry.
            state.stats.requests_sent += 1
            if attempt.retry:
                state.stats.retries += 1
            started = attempt.sent_at = time.monotonic()
            try:
                completion = await transport.send(call)
            except Exception as err:
                limited = is_rate_limit(err)
                if limited:
                    state.stats.rate_limited += 1
                pacing.failed(err, rate_limited=limited, sent_at=started)
                breaker.record_failure(err, with_note(spec, err, one_line(err, secrets=[call.api_key])))
                raise
            pacing.answered(time.monotonic() - started, ticket, completion)
            breaker.record_success()
            return completion
    finally:
        pacing.leave()
