"""The one call path: cache lookup → budget reservation → pacing and concurrency → retried transport call →
cache store.

A `Gateway` lives for one run and owns its cache: use it as a context manager (`with` or `async with`), or
call `close()`, so the cache is closed whatever happens in between. Judges, the planner, generation and gold
scoring all call `Gateway.call()`; it never raises for provider trouble but returns a result whose `status`
says what happened, so a failure is counted, never folded into a score. The transport that sends a request (a
live LiteLLM call, an in-process model) is picked by the provider's `transport` field from those registered on
the gateway. Local computations that are not chat calls (scalar reward scores) reach the same cache through
`Gateway.cached()`.

The gateway drives a call's retries; the stages it passes through live apart: what admits a request to the wire
(prbj.llm.admission), what settles its outcome (prbj.llm.settlement), and the hand-off of misses to provider batch
jobs (prbj.llm.batch_handoff).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from tenacity import (
    AttemptManager,
    DoAttempt,
    DoSleep,
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
)

from prbj.llm.admission import (
    LEASE_MARGIN_SECONDS,
    Attempt,
    Interrupted,
    OverBudget,
    refuse_cap_below_one_call,
    reserve,
    send,
    stop_sending,
    under_lease,
)
from prbj.llm.batch_handoff import BatchHandoff
from prbj.llm.breaker import BreakerOpen, CircuitBreaker
from prbj.llm.budget import Budget
from prbj.llm.cache import ResponseCache, cache_key, new_lease_holder
from prbj.llm.calls import LLMRequest, LLMResult, ProviderState, ProviderStats
from prbj.llm.litellm_setup import count_prompt_tokens
from prbj.llm.pacing import ProviderPacing
from prbj.llm.param_rules import DEFAULT_MAX_TOKENS, output_cap
from prbj.llm.prompt_cache import cache_write_premium
from prbj.llm.provider_errors import from_provider
from prbj.llm.providers import ProviderSpec
from prbj.llm.ratelimit_headers import states_limits
from prbj.llm.retry import AskedTooLong, BackoffWait, RetryPolicy, is_retryable, why_retries_ended
from prbj.llm.routing import Routing
from prbj.llm.settlement import (
    account_failed_attempt,
    failed,
    from_cache,
    settle_reply,
    stopped,
)
from prbj.llm.transport import LITELLM_TRANSPORT, ChatCall, LiteLLMTransport, Transport

if TYPE_CHECKING:
    # Imported where a batch is queued: a run without --batch does not load the batch machinery (~0.05 s).
    from prbj.llm.batch.queue import BatchQueue
    from prbj.llm.param_rules import SettledParams

# What callers import from here; the types live in prbj.llm.calls, the Ctrl-C flag in prbj.llm.admission.
__all__ = [
    "DEFAULT_RETRY",
    "Gateway",
    "LLMRequest",
    "LLMResult",
    "Mode",
    "ProviderStats",
    "planned_keys",
    "stop_sending",
]

Mode = Literal["live", "cache_only", "dry_run"]
# Prompts at least this long (characters) are counted on a worker thread (see _estimate_off_loop).
OFF_LOOP_PROMPT_CHARS = 2_000
T = TypeVar("T")
# The retry policy of a gateway built without one (every command's): a module attribute, so that a test can run a
# whole command with the retry time scaled down.
DEFAULT_RETRY = RetryPolicy()
# A dry run of several steps in a row (prbj run --dry-run) sets this to one set shared by their gateways: a request
# an earlier step plans will be in the cache when a later step asks it, so it is planned (counted) once.
planned_keys: ContextVar[set[str] | None] = ContextVar("prbj_planned_keys", default=None)


class Gateway:
    def __init__(
        self,
        cache: ResponseCache | None = None,
        budget: Budget | None = None,
        *,
        mode: Mode = "live",
        retry: RetryPolicy | None = None,
        transports: Mapping[str, Transport] | None = None,
        batch: BatchQueue | None = None,
        notify: Callable[[str], None] | None = None,
        routing: Routing | None = None,
    ) -> None:
        self.cache = cache
        # Which providers may be sent the run's text (--personal-data): checked once per provider, when it is
        # first called, behind the check every command makes where it resolves its providers.
        self.routing = routing or Routing()
        self.budget = budget or Budget()
        self.mode = mode
        self.retry = retry or DEFAULT_RETRY
        # tenacity decides every retry (whether, how long to wait, when to give up) with strategies built once per
        # gateway (the wait holds the one backoff RNG). Its synchronous controller is driven by _buy, which sleeps
        # with asyncio: AsyncRetrying re-wraps each sync strategy in a coroutine and inspects it on every step,
        # which cost more per call than the rest of the retry bookkeeping. One controller serves all calls: its
        # `iter` runs to completion without yielding to the event loop, so concurrent calls never interleave in it.
        self._retrying = Retrying(
            retry=retry_if_exception(is_retryable),
            # Transient failures are retried until the call's retry time runs out; the attempt cap is a safety
            # net derived so that it cannot bind first (RetryPolicy.attempt_cap).
            stop=(
                stop_after_delay(self.retry.max_total_seconds)
                | AskedTooLong(self.retry)
                | stop_after_attempt(self.retry.attempt_cap())
            ),
            wait=BackoffWait(self.retry),
            reraise=False,
        )
        self._retrying.begin()
        self._providers: dict[str, ProviderState] = {}
        self._inflight: dict[str, asyncio.Future[LLMResult]] = {}
        self._computing: dict[str, asyncio.Future[dict[str, Any]]] = {}
        # --dry-run: the requests planned so far. A request asked again (a planner call shared by several judges,
        # a pick judged for two RMs) is bought once by a real run, so the plan counts it once.
        self._planned: set[str] = set()
        # Names this gateway's leases in a shared cache folder (see prbj.llm.admission.under_lease).
        self._holder = new_lease_holder()
        self._transports: dict[str, Transport] = {LITELLM_TRANSPORT: LiteLLMTransport(), **(transports or {})}
        # --batch: misses are queued for provider batch jobs instead of sent (see flush_batch).
        self.batch = batch
        self._handoff = BatchHandoff(batch, self.budget)
        # Notes about providers (parameter changes, retiring models) already printed in this run.
        self.announced: set[str] = set()
        # Where a line for the user goes while calls are made (limits learned from a provider's headers).
        self.notify = notify or _print_notice

    # --- lifetime ------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the cache (its SQLite handles); safe to call twice."""
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Gateway:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # --- public --------------------------------------------------------------------------------------
    def add_transport(self, name: str, transport: Transport) -> Transport:
        """Send requests of providers with `transport == name` through `transport`; when one is registered under
        that name already, it stays and is returned (what it holds, e.g. loaded models, is shared)."""
        return self._transports.setdefault(name, transport)

    def transport(self, name: str) -> Transport | None:
        return self._transports.get(name)

    def stats(self) -> list[ProviderStats]:
        return [state.stats for state in self._providers.values()]

    def in_flight_allowed(self) -> int:
        """Requests the providers called so far admit in flight at the moment: how far a run's fan-out must
        reach so that none of them waits for work (runs.engine)."""
        return sum(state.pacing.in_flight_limit for state in self._providers.values())

    def providers(self) -> list[ProviderSpec]:
        """The providers this gateway has been asked to call, in the order of stats()."""
        return [state.spec for state in self._providers.values()]

    @staticmethod
    def _record_params(state: ProviderState, settled: SettledParams) -> None:
        """Record a provider's settled parameters in its usage (run.json), once per distinct setting."""
        state.recorded.append(settled)
        record = settled.record()
        if record not in state.stats.params:
            state.stats.params.append(record)

    def request_key(self, provider: ProviderSpec, request: LLMRequest) -> str:
        return cache_key(
            "llm",
            model=provider.model,
            api_base=provider.api_base,
            messages=[dict(m) for m in request.messages],
            params=self._params(provider, request),
            template=request.template_hash,
            sample=request.sample_index,
        )

    async def call(self, provider: ProviderSpec, request: LLMRequest) -> LLMResult:
        state = self._state(provider)
        settled = provider.settled
        if settled is not None and not any(settled is seen for seen in state.recorded):
            self._record_params(state, settled)
        key = self.request_key(provider, request)
        bought = self._handoff.bought.get(key)
        if bought is not None:
            return bought
        hit = self.cache.get(key) if self.cache is not None else None
        if hit is not None:
            return self._hit(state, hit, request)
        if self.mode == "dry_run":
            return self._plan(state, provider, request, key)
        if self.mode == "cache_only":
            state.stats.skipped_cache += 1
            return LLMResult(status="skipped_cache", error="not in the cache (--cache-only)")
        if self.batch is not None and provider.transport == LITELLM_TRANSPORT:
            return await self._handoff.queue(
                state,
                key,
                lambda: self._chat_call(provider, request, provider.api_key()),
                request.purpose,
                lambda: self._estimate(provider, request),
            )
        # Identical requests in flight at once (e.g. the same pick judged for two RMs) are bought once.
        result, shared = await _once(
            self._inflight, key, lambda: self._buy_leased(state, provider, request, key)
        )
        if shared:
            return replace(result, cost_usd=0.0, cached=result.replied)
        return result

    async def cached(self, key: str, compute: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """The value stored under `key`, else `compute()`'s, which is then stored. For local computations (a
        reward model's score): free, so --dry-run and --cache-only do not hold them back. The same key asked
        for twice at once is computed once; a failure raises and is never stored."""
        hit = self.cache.get(key) if self.cache is not None else None
        if hit is not None:
            return hit

        async def compute_and_store() -> dict[str, Any]:
            value = await compute()
            if self.cache is not None:
                await self.cache.aset(key, value)
            return value

        value, _ = await _once(self._computing, key, compute_and_store)
        return value

    async def in_rounds(self, work: Callable[[], Awaitable[T]]) -> T:
        """`work()`'s result. Under --batch the misses of each round are bought in batch jobs and `work` runs
        again (a step that needs an earlier answer, like a planner's aspects or a built answer's check, is asked
        only once that answer is in), until a round queues nothing: that round's result is the run's, as a live
        run would have made it. Without --batch, one round."""
        return await self._handoff.in_rounds(work, self._providers, self._state)

    async def flush_batch(self) -> bool:
        """Batch mode: submit what was queued, wait for the jobs and store their answers in the cache. False
        when nothing was queued (the last round's results are final). Raises BatchSubmitted under --no-wait."""
        return await self._handoff.flush(self._state)

    # --- internals -----------------------------------------------------------------------------------
    def _hit(self, state: ProviderState, hit: Mapping[str, Any], request: LLMRequest) -> LLMResult:
        return from_cache(state.stats, hit, lambda: self._params(state.spec, request))

    async def _buy_leased(
        self, state: ProviderState, provider: ProviderSpec, request: LLMRequest, key: str
    ) -> LLMResult:
        """`_buy` under a lease on `key` in the cache folder (prbj.llm.admission.under_lease), so that processes
        sharing the folder buy each answer once."""
        cache = self.cache
        if cache is None:
            return await self._buy(state, provider, request, key)
        return await under_lease(
            cache,
            key,
            self._holder,
            # Longer than one request may take; renewed while retries go on, so it lapses only when its holder died.
            state.spec.timeout + LEASE_MARGIN_SECONDS,
            lambda hit: self._hit(state, hit, request),
            lambda: self._buy(state, provider, request, key),
        )

    def _state(self, provider: ProviderSpec) -> ProviderState:
        state = self._providers.get(provider.name)
        if state is None:
            self.routing.check(provider)
            # No price or key check here: every ProviderSpec a run calls was resolved, priced and key-checked
            # once, where the command turned its options into providers.
            pacing = ProviderPacing(provider, self.notify)
            state = ProviderState(
                spec=provider,
                stats=ProviderStats(provider.name, provider.model, pacing=pacing),
                pacing=pacing,
                breaker=CircuitBreaker(provider.name, on_open=self.notify),
            )
            if not states_limits(provider.family):
                state.warmed.set()
            self._providers[provider.name] = state
        return state

    def _chat_call(self, provider: ProviderSpec, request: LLMRequest, api_key: str | None) -> ChatCall:
        return ChatCall(
            provider,
            [dict(m) for m in request.messages],
            self._params(provider, request),
            api_key,
            shared_prefix_chars=request.shared_prefix_chars,
        )

    @staticmethod
    def _params(provider: ProviderSpec, request: LLMRequest) -> dict[str, Any]:
        """The parameters sent (and keyed): the provider's, settled for this run (prbj.llm.params), then the
        request's own (a sample's seed) unless the provider does not take them."""
        params = {**provider.params, **request.params}
        settled = provider.settled
        if settled is not None and settled.unsent:
            params = {name: value for name, value in params.items() if name not in settled.unsent}
        if output_cap(params) is None:
            # The output bound reserved by the budget is the bound sent: without it a reply could run unbounded.
            params = {"max_tokens": DEFAULT_MAX_TOKENS, **params}
        return params

    def _completion_bound(self, provider: ProviderSpec, request: LLMRequest) -> int:
        """The largest output bound sent (max_tokens, max_completion_tokens, max_output_tokens, a thinking
        budget): what a reply may cost at most."""
        return output_cap(self._params(provider, request)) or DEFAULT_MAX_TOKENS

    def _estimate(self, provider: ProviderSpec, request: LLMRequest) -> tuple[int, int, float]:
        """(prompt tokens, output bound, worst-case USD). A request that carries an Anthropic cache breakpoint
        may write its prompt into the provider's cache, billed above the input price (1.25×): the worst case
        prices the whole prompt at that rate."""
        prompt = count_prompt_tokens(provider.model, request.messages)
        completion = self._completion_bound(provider, request)
        cost = provider.cost(prompt, completion)
        if request.shared_prefix_chars and provider.paid:
            cost += prompt * cache_write_premium(provider, request.messages, request.shared_prefix_chars)
        return prompt, completion, cost

    async def _estimate_off_loop(self, provider: ProviderSpec, request: LLMRequest) -> tuple[int, int, float]:
        """`_estimate`, on a worker thread for a long prompt: counting an ~800-token prompt takes about a
        millisecond of tokenizer work, which would hold up every other call on the event loop; a short one costs
        less than the hop to the thread."""
        if sum(len(m.get("content") or "") for m in request.messages) < OFF_LOOP_PROMPT_CHARS:
            return self._estimate(provider, request)
        return await asyncio.to_thread(self._estimate, provider, request)

    def completion_bound(self, provider: ProviderSpec, request: LLMRequest) -> int:
        """The most output tokens `request` may come back with: the largest output bound it is sent with."""
        return self._completion_bound(provider, request)

    def _plan(self, state: ProviderState, provider: ProviderSpec, request: LLMRequest, key: str) -> LLMResult:
        # Each distinct request is planned once: within this gateway, and across the steps of a dry run of
        # several (planned_keys), since an earlier step's answer would be in the cache when a later one asks.
        shared = planned_keys.get()
        planned = self._planned if shared is None else shared
        if key in planned:
            return LLMResult(status="dry_run", error="not sent (--dry-run; planned already)")
        planned.add(key)
        prompt, completion, cost = self._estimate(provider, request)
        state.stats.planned_calls += 1
        state.stats.planned_prompt_tokens += prompt
        state.stats.planned_completion_tokens += completion
        state.stats.planned_cost_usd += cost
        if self.batch is not None:
            from prbj.llm.batch.queue import batch_cost

            state.stats.planned_batch_cost_usd += batch_cost(provider, prompt, completion)
        return LLMResult(status="dry_run", error="not sent (--dry-run)")

    async def _buy(
        self, state: ProviderState, spec: ProviderSpec, request: LLMRequest, key: str
    ) -> LLMResult:
        stats = state.stats
        # Counting the prompt's tokens costs about a millisecond per call; only a spending cap or a TPM window
        # uses the count. Without either, the reservation is the output bound alone (nothing checks it) and a
        # timed-out attempt counts its full worst case when it happens (account_failed_attempt).
        counted = self.budget.max_cost is not None or state.pacing.counts_tokens
        if counted:
            prompt_estimate, completion_bound, worst_case = await self._estimate_off_loop(spec, request)
        else:
            prompt_estimate, completion_bound = 0, self._completion_bound(spec, request)
            worst_case = spec.cost(0, completion_bound)
        refuse_cap_below_one_call(self.budget, spec, prompt_estimate, completion_bound, worst_case)
        if not await reserve(self.budget, state, worst_case):
            stats.skipped_budget += 1
            return LLMResult(
                status="skipped_budget", error=f"would cross --max-cost (worst case ${worst_case:.4f})"
            )
        # Built once for all attempts: what is sent does not change between them.
        call = self._chat_call(spec, request, spec.api_key())
        uncounted = None if counted else (lambda: self._estimate(spec, request)[2])
        started = time.monotonic()
        attempts = 0
        last_sent_error: BaseException | None = None
        reserved = worst_case
        retrying = self._retrying
        retry_state = RetryCallState(retrying, fn=None, args=(), kwargs={})
        try:
            while True:
                # tenacity's verdict on the last attempt's outcome: attempt (again), sleep first, or done (the
                # outcome was a success); it raises RetryError once its stop strategy gives up.
                do = retrying.iter(retry_state)
                if isinstance(do, DoSleep):
                    retry_state.prepare_for_next_attempt()
                    await asyncio.sleep(do)
                    state.pacing.waited("retries", float(do))
                    continue
                if not isinstance(do, DoAttempt):
                    break
                attempt = Attempt(retry=attempts > 0)
                with AttemptManager(retry_state):
                    attempts += 1
                    if attempt.retry:
                        # Every attempt is a request the provider may bill: each needs its own reservation.
                        if not await reserve(self.budget, state, worst_case):
                            raise OverBudget
                        reserved = worst_case
                    try:
                        completion = await send(
                            state, self._transports, call, prompt_estimate, completion_bound, attempt
                        )
                    except Exception as err:
                        if not isinstance(err, (BreakerOpen, Interrupted)):
                            last_sent_error = err
                        account_failed_attempt(state, self.budget, err, reserved, uncounted)
                        reserved = 0.0
                        raise
                    except asyncio.CancelledError:
                        # A call stopped mid-flight may have been billed: its worst case stays counted, and
                        # calls waiting for room are woken rather than left waiting on a share never settled.
                        self.budget.settle(reserved, reserved)
                        reserved = 0.0
                        raise
                # The retry time is the call's own: the time this attempt waited in prbj's queues (its place among
                # the requests in flight, the rate, the token windows, --max-cost, the provider's first request)
                # before its request left moves the retry clock's start on. Those queues grow with the run and its
                # limits, not with the provider's trouble, and counting them would end a large run's retries early.
                left = time.monotonic() if attempt.sent_at is None else attempt.sent_at
                retry_state.start_time += left - attempt.began
        except OverBudget:
            stats.skipped_budget += 1
            return LLMResult(
                status="skipped_budget",
                error=f"retry would cross --max-cost (worst case ${worst_case:.4f})",
                attempts=attempts - 1,
            )
        except RetryError as err:
            ended = why_retries_ended(self.retry, retry_state)
            return failed(state, err.last_attempt.exception(), attempts, started, call.api_key, ended)
        except (BreakerOpen, Interrupted) as err:
            # This attempt was not sent (the provider's breaker is open, or Ctrl-C); the message says why.
            return stopped(state, err, last_sent_error, attempts - 1, started, call.api_key)
        except Exception as err:  # not retryable: auth, bad request, unknown model...
            if not from_provider(err):
                self.budget.release(reserved)
                raise
            return failed(state, err, attempts, started, call.api_key)
        return settle_reply(
            state,
            self.budget,
            self.cache,
            key,
            request,
            call,
            completion,
            reserved,
            started=started,
            attempts=attempts,
        )


def _print_notice(line: str) -> None:
    from rich.console import Console

    Console(stderr=True).print(line, highlight=False, markup=False, soft_wrap=True)


async def _once(
    inflight: dict[str, asyncio.Future[T]], key: str, work: Callable[[], Awaitable[T]]
) -> tuple[T, bool]:
    """`work()`'s result, run once for all who ask for `key` while it runs; whether it was another's run."""
    pending = inflight.get(key)
    if pending is not None:
        return await asyncio.shield(pending), True
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    inflight[key] = future
    try:
        result = await work()
        future.set_result(result)
        return result, False
    except asyncio.CancelledError:
        future.cancel()
        raise
    except BaseException as err:
        future.set_exception(err)
        future.exception()  # mark retrieved: the waiter, if any, re-raises it
        raise
    finally:
        del inflight[key]
