"""The one call path: cache lookup → budget reservation → pacing and concurrency → retried transport call →
cache store.

A `Gateway` lives for one run and owns its cache: use it as a context manager (`with` or `async with`), or
call `close()`, so the cache is closed whatever happens in between. Judges, the planner, generation and gold
scoring all call `Gateway.call()`; it never raises for provider trouble but returns a result whose `status`
says what happened, so a failure is counted, never folded into a score. The transport that sends a request (a
live LiteLLM call, an in-process model) is picked by the provider's `transport` field from those registered on
the gateway. Local computations that are not chat calls (scalar reward scores) reach the same cache through
`Gateway.cached()`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, fields, replace
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

from prbj.data.status import REPLIED_STATUSES, CallStatus
from prbj.errors import ConfigError
from prbj.llm.answer import answer_value, stored_logprobs
from prbj.llm.breaker import BreakerOpen, CircuitBreaker
from prbj.llm.budget import Budget, CapBelowOneCall
from prbj.llm.cache import ResponseCache, cache_key, new_lease_holder
from prbj.llm.error_text import describe_error, one_line
from prbj.llm.finish import COMPLETE, ReplyEnd, end_cause, end_message, end_of
from prbj.llm.litellm_setup import count_prompt_tokens
from prbj.llm.logprobs import TokenChoice
from prbj.llm.pacing import ProviderPacing
from prbj.llm.param_rules import DEFAULT_MAX_TOKENS, output_cap
from prbj.llm.prompt_cache import cache_adjustment, cache_write_premium
from prbj.llm.provider_errors import from_provider
from prbj.llm.providers import ProviderSpec
from prbj.llm.ratelimit_headers import states_limits
from prbj.llm.retry import (
    AskedTooLong,
    BackoffWait,
    RetryPolicy,
    cause_of,
    http_status,
    is_rate_limit,
    is_retryable,
    is_timeout,
    why_retries_ended,
)
from prbj.llm.routing import Routing
from prbj.llm.transport import LITELLM_TRANSPORT, ChatCall, Completion, LiteLLMTransport, Transport

if TYPE_CHECKING:
    # Imported where a batch is queued: a run without --batch does not load the batch machinery (~0.05 s).
    from prbj.llm.batch.queue import BatchQueue
    from prbj.llm.param_rules import SettledParams

Mode = Literal["live", "cache_only", "dry_run"]
# A lease on a cache key lasts the request timeout plus this margin, renewed while the call goes on; a process
# waiting for another's answer looks for it this often.
LEASE_MARGIN_SECONDS = 30.0
LEASE_POLL_SECONDS = 0.1
# Prompts at least this long (characters) are counted on a worker thread (see _estimate_off_loop).
OFF_LOOP_PROMPT_CHARS = 2_000
T = TypeVar("T")
# The retry policy of a gateway built without one (every command's): a module attribute, so that a test can run a
# whole command with the retry time scaled down.
DEFAULT_RETRY = RetryPolicy()
# Set by whoever fans calls out (runs.engine) when the user presses Ctrl-C: from then on no request leaves, while
# those already on the wire may finish and be cached. Tasks inherit it from the context they were created in.
stop_sending: ContextVar[asyncio.Event | None] = ContextVar("prbj_stop_sending", default=None)
# A dry run of several steps in a row (prbj run --dry-run) sets this to one set shared by their gateways: a request
# an earlier step plans will be in the cache when a later step asks it, so it is planned (counted) once.
planned_keys: ContextVar[set[str] | None] = ContextVar("prbj_planned_keys", default=None)


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
class _ProviderState:
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
        self._providers: dict[str, _ProviderState] = {}
        self._inflight: dict[str, asyncio.Future[LLMResult]] = {}
        self._computing: dict[str, asyncio.Future[dict[str, Any]]] = {}
        # --dry-run: the requests planned so far. A request asked again (a planner call shared by several judges,
        # a pick judged for two RMs) is bought once by a real run, so the plan counts it once.
        self._planned: set[str] = set()
        # Whether a paid call has had its worst case reserved (and so may have been sent): until then, a --max-cost
        # too small for one call stops the run (CapBelowOneCall) instead of skipping every call it has.
        self._reserved_once = False
        # Names this gateway's leases in a shared cache folder (see _buy_leased).
        self._holder = new_lease_holder()
        self._transports: dict[str, Transport] = {LITELLM_TRANSPORT: LiteLLMTransport(), **(transports or {})}
        # --batch: misses are queued for provider batch jobs instead of sent (see flush_batch).
        self.batch = batch
        # Answers this run bought in batch jobs: later rounds see them as bought now (cost, not cached), as a live
        # run's tables would.
        self._batch_bought: dict[str, LLMResult] = {}
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
    def _record_params(state: _ProviderState, settled: SettledParams) -> None:
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
        bought = self._batch_bought.get(key)
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
            return await self._queue(state, provider, request, key)
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
        while True:
            before = {
                name: {counter: getattr(state.stats, counter) for counter in _ROUND_COUNTERS}
                for name, state in self._providers.items()
            }
            result = await work()
            if not await self.flush_batch():
                return result
            # This round's results are dropped, and so are the hits and skips it counted: the next round counts
            # them again. What its batch jobs bought stays counted.
            for name, state in self._providers.items():
                for counter in _ROUND_COUNTERS:
                    setattr(state.stats, counter, before.get(name, {}).get(counter, 0))

    async def flush_batch(self) -> bool:
        """Batch mode: submit what was queued, wait for the jobs and store their answers in the cache. False
        when nothing was queued (the last round's results are final). Raises BatchSubmitted under --no-wait."""
        batch = self.batch
        if batch is None or not batch.pending:
            return False
        queued = dict(batch.pending)
        for answer in await batch.flush():
            pending = queued.get(answer.key)
            if pending is None:
                continue  # another run's request that shared a job with ours: stored, not ours to count
            stats = self._state(pending.spec).stats
            if answer.completion is None:
                self.budget.release(pending.reserved)
                stats.errors += 1
                continue
            self.budget.settle(pending.reserved, answer.cost_usd)
            completion = answer.completion
            self._batch_bought[answer.key] = replied(
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
            _count_end(stats, completion.end)
            stats.batch_calls += 1
            stats.prompt_tokens += answer.completion.prompt_tokens
            stats.completion_tokens += answer.completion.completion_tokens
            stats.cost_usd += answer.cost_usd
            stats.batch_cost_usd += answer.cost_usd
            stats.batch_saved_usd += answer.live_cost_usd - answer.cost_usd
            stats.cached_input_tokens += answer.completion.cached_tokens
            stats.provider_cache_saved_usd += answer.provider_cache_saved_usd
        return True

    # --- internals -----------------------------------------------------------------------------------
    async def _queue(
        self, state: _ProviderState, spec: ProviderSpec, request: LLMRequest, key: str
    ) -> LLMResult:
        """Batch mode: a miss joins the next batch job (reserved at batch prices); a line that failed in this
        run's batch is an api_error with the provider's reason, bought again only by a later run."""
        from prbj.llm.batch.queue import Pending, batch_cost

        batch = self.batch
        assert batch is not None
        reason = batch.failures.get(key)
        if reason is not None:
            return LLMResult(status="api_error", error=f"batch: {reason}")
        pending = Pending(spec, key, self._chat_call(spec, request, spec.api_key()), request.purpose)
        if key not in batch.pending:
            prompt, completion, _ = self._estimate(spec, request)
            pending.reserved = batch_cost(spec, prompt, completion)
            self._check_cap_fits(spec, prompt, completion, pending.reserved, " at batch price")
            if not await self.budget.reserve(pending.reserved):
                state.stats.skipped_budget += 1
                return LLMResult(
                    status="skipped_budget",
                    error=f"would cross --max-cost (worst case ${pending.reserved:.4f} at batch price)",
                )
            self._reserved_once = True
            batch.enqueue(pending)
        return LLMResult(status="skipped_cache", error="queued for a provider batch job")

    def _hit(self, state: _ProviderState, hit: Mapping[str, Any], request: LLMRequest) -> LLMResult:
        state.stats.cache_hits += 1
        state.stats.saved_usd += float(hit.get("cost_usd", 0.0))
        end = end_of(hit)
        # The request's parameters name the cap in a cut-off reply's message; an ordinary answer needs none.
        params = {} if end.plain else self._params(state.spec, request)
        return replied(
            hit["text"],
            int(hit.get("prompt_tokens", 0)),
            int(hit.get("completion_tokens", 0)),
            end,
            params,
            original_cost_usd=float(hit.get("cost_usd", 0.0)),
            cached=True,
            logprobs=stored_logprobs(hit),
        )

    async def _buy_leased(
        self, state: _ProviderState, provider: ProviderSpec, request: LLMRequest, key: str
    ) -> LLMResult:
        """`_buy` under a lease on `key` in the cache folder, so that processes sharing the folder buy each
        answer once: while another holds the lease this waits for its answer; when the holder gave up (errors
        are not stored) or crashed (its lease expired) this one claims the key and buys it."""
        cache = self.cache
        if cache is None:
            return await self._buy(state, provider, request, key)
        # Longer than one request may take; renewed while retries go on, so it lapses only when its holder died.
        seconds = state.spec.timeout + LEASE_MARGIN_SECONDS
        # The lease and the store are SQLite writes: they run on the cache's worker thread, off the event loop.
        claimed, hit = await cache.aclaim_unless_stored(key, self._holder, seconds)
        while not claimed:
            if hit is not None:  # the holder stored it
                return self._hit(state, hit, request)
            await asyncio.sleep(LEASE_POLL_SECONDS)
            claimed, hit = await cache.aclaim_unless_stored(key, self._holder, seconds)
        try:
            # Stored by another process between our lookup and our claim.
            if hit is not None:
                return self._hit(state, hit, request)
            renewal = _LeaseRenewal(cache, key, self._holder, seconds)
            try:
                return await self._buy(state, provider, request, key)
            finally:
                renewal.cancel()
        finally:
            # Queued behind the answer's store on the cache's thread: the lease ends once the answer is there.
            cache.release_soon(key, self._holder)

    def _state(self, provider: ProviderSpec) -> _ProviderState:
        state = self._providers.get(provider.name)
        if state is None:
            self.routing.check(provider)
            # No price or key check here: every ProviderSpec a run calls was resolved, priced and key-checked
            # once, where the command turned its options into providers.
            pacing = ProviderPacing(provider, self.notify)
            state = _ProviderState(
                spec=provider,
                stats=ProviderStats(provider.name, provider.model, pacing=pacing),
                pacing=pacing,
                breaker=CircuitBreaker(provider.name),
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

    def _plan(
        self, state: _ProviderState, provider: ProviderSpec, request: LLMRequest, key: str
    ) -> LLMResult:
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
        self, state: _ProviderState, spec: ProviderSpec, request: LLMRequest, key: str
    ) -> LLMResult:
        stats = state.stats
        # Counting the prompt's tokens costs about a millisecond per call; only a spending cap or a TPM window
        # uses the count. Without either, the reservation is the output bound alone (nothing checks it) and a
        # timed-out attempt counts its full worst case when it happens (_account_failed_attempt).
        counted = self.budget.max_cost is not None or state.pacing.counts_tokens
        if counted:
            prompt_estimate, completion_bound, worst_case = await self._estimate_off_loop(spec, request)
        else:
            prompt_estimate, completion_bound = 0, self._completion_bound(spec, request)
            worst_case = spec.cost(0, completion_bound)
        self._check_cap_fits(spec, prompt_estimate, completion_bound, worst_case)
        if not await self._reserve(state, worst_case):
            stats.skipped_budget += 1
            return LLMResult(
                status="skipped_budget", error=f"would cross --max-cost (worst case ${worst_case:.4f})"
            )
        self._reserved_once = True
        # Built once for all attempts: what is sent does not change between them.
        call = self._chat_call(spec, request, spec.api_key())
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
                attempt = _Attempt(retry=attempts > 0)
                with AttemptManager(retry_state):
                    attempts += 1
                    if attempt.retry:
                        # Every attempt is a request the provider may bill: each needs its own reservation.
                        if not await self._reserve(state, worst_case):
                            raise _OverBudget
                        reserved = worst_case
                    try:
                        completion = await self._send(state, call, prompt_estimate, completion_bound, attempt)
                    except Exception as err:
                        if not isinstance(err, (BreakerOpen, _Interrupted)):
                            last_sent_error = err
                        self._account_failed_attempt(
                            state, err, reserved, None if counted else (spec, request)
                        )
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
        except _OverBudget:
            stats.skipped_budget += 1
            return LLMResult(
                status="skipped_budget",
                error=f"retry would cross --max-cost (worst case ${worst_case:.4f})",
                attempts=attempts - 1,
            )
        except RetryError as err:
            ended = why_retries_ended(self.retry, retry_state)
            return self._failed(state, err.last_attempt.exception(), attempts, started, call.api_key, ended)
        except (BreakerOpen, _Interrupted) as err:
            # This attempt was not sent (the provider's breaker is open, or Ctrl-C); the message says why.
            return self._stopped(state, err, last_sent_error, attempts - 1, started, call.api_key)
        except Exception as err:  # not retryable: auth, bad request, unknown model...
            if not from_provider(err):
                self.budget.release(reserved)
                raise
            return self._failed(state, err, attempts, started, call.api_key)

        text, prompt_tokens, completion_tokens = (
            completion.text,
            completion.prompt_tokens,
            completion.completion_tokens,
        )
        provider_cache = cache_adjustment(spec, completion.cached_tokens, completion.cache_write_tokens)
        cost = spec.cost(prompt_tokens, completion_tokens) + provider_cache
        stats.cached_input_tokens += completion.cached_tokens
        stats.provider_cache_saved_usd -= provider_cache
        self.budget.settle(reserved, cost)
        _count_end(stats, completion.end)
        stats.prompt_tokens += prompt_tokens
        stats.completion_tokens += completion_tokens
        stats.cost_usd += cost
        if self.cache is not None:
            # A cut-off or refused reply is stored too, with its end: it was paid for, and a rerun replays it.
            self.cache.store_soon(
                key,
                answer_value(
                    text,
                    prompt_tokens,
                    completion_tokens,
                    cost,
                    spec.model,
                    request.purpose,
                    logprobs=completion.logprobs,
                    end=completion.end,
                ),
            )
        return replied(
            text,
            prompt_tokens,
            completion_tokens,
            completion.end,
            call.params,
            cost_usd=cost,
            original_cost_usd=cost,
            latency_s=time.monotonic() - started,
            attempts=attempts,
            logprobs=completion.logprobs,
        )

    def _check_cap_fits(
        self, spec: ProviderSpec, prompt: int, completion: int, worst_case: float, price: str = ""
    ) -> None:
        """Before any paid call was reserved: a --max-cost below this call's worst case could pay for nothing
        (every call would be skipped), so the run stops here, one line and exit 2, having sent nothing. Calls
        answered from the cache never come here: a replay runs under any cap."""
        cap = self.budget.max_cost
        if cap is None or self._reserved_once or not spec.paid or self.budget.fits_alone(worst_case):
            return
        raise CapBelowOneCall(
            f"--max-cost {cap:g} is below the worst case of one call to {spec.name}: ${worst_case:.4f} "
            f"({prompt:,} prompt tokens and up to {completion:,} output tokens{price}); nothing was sent: "
            "raise --max-cost, or replay answers already in the cache with --cache-only"
        )

    async def _reserve(self, state: _ProviderState, worst_case: float) -> bool:
        """The budget's reservation, its wait (for other calls' reservations to settle) counted."""
        if self.budget.max_cost is None:
            return await self.budget.reserve(worst_case)
        started = time.monotonic()
        try:
            return await self.budget.reserve(worst_case)
        finally:
            state.pacing.waited("budget", time.monotonic() - started)

    async def _send(
        self, state: _ProviderState, call: ChatCall, prompt_tokens: int, output_bound: int, attempt: _Attempt
    ) -> Completion:
        if not state.warmed.is_set():
            if state.warming:
                await state.warmed.wait()
            else:
                state.warming = True
                try:
                    return await self._send_now(state, call, prompt_tokens, output_bound, attempt)
                finally:
                    state.warmed.set()
        return await self._send_now(state, call, prompt_tokens, output_bound, attempt)

    async def _send_now(
        self, state: _ProviderState, call: ChatCall, prompt_tokens: int, output_bound: int, attempt: _Attempt
    ) -> Completion:
        spec = state.spec
        transport = self._transports.get(spec.transport)
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
                    raise _Interrupted("not sent: interrupted (Ctrl-C)")
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
                    breaker.record_failure(err, _with_note(spec, err, one_line(err, secrets=[call.api_key])))
                    raise
                pacing.answered(time.monotonic() - started, ticket, completion)
                breaker.record_success()
                return completion
        finally:
            pacing.leave()

    def _account_failed_attempt(
        self,
        state: _ProviderState,
        error: BaseException,
        reserved: float,
        uncounted: tuple[ProviderSpec, LLMRequest] | None = None,
    ) -> None:
        """A timed-out request may still have been processed and billed: its worst case counts as spent.
        Other failures (429, 5xx, refused connections) were not billed: the reservation is given back.
        `uncounted` is the request when its prompt was not counted up front (no cap, no TPM window): its worst
        case is counted now, so a timeout is accounted exactly as before."""
        if is_timeout(error):
            billed = reserved if uncounted is None else self._estimate(*uncounted)[2]
            self.budget.settle(reserved, billed)
            state.stats.cost_usd += billed
        else:
            self.budget.release(reserved)

    def _stopped(
        self,
        state: _ProviderState,
        stop: BaseException,
        last_sent_error: BaseException | None,
        sent: int,
        started: float,
        api_key: str | None,
    ) -> LLMResult:
        """A call that the breaker or Ctrl-C stopped: never sent (counted apart, the message says why), or sent
        and failed before its retry was stopped (a failed call, with the failure the provider gave)."""
        if sent == 0:
            # The cause of a call the breaker stopped is that of the failures that opened it.
            if isinstance(stop, BreakerOpen):
                state.stats.not_sent_breaker += 1
                return LLMResult(status="api_error", error=str(stop), cause=stop.cause)
            state.stats.not_sent_interrupted += 1
            return LLMResult(status="api_error", error=str(stop), cause="interrupted")
        failed = self._failed(state, last_sent_error, sent, started, api_key)
        return replace(failed, error=f"{failed.error}; its retry was {stop}")

    def _failed(
        self,
        state: _ProviderState,
        error: BaseException | None,
        attempts: int,
        started: float,
        api_key: str | None,
        ended: str | None = None,
    ) -> LLMResult:
        """A call sent and failed: at once (an error no retry clears), or after retries, `ended` saying why
        they stopped."""
        state.stats.errors += 1
        return LLMResult(
            status="api_error",
            error=_with_note(
                state.spec,
                error,
                describe_error(error, attempts, time.monotonic() - started, secrets=[api_key], ended=ended),
            ),
            cause=cause_of(error),
            latency_s=time.monotonic() - started,
            attempts=attempts,
        )


def replied(
    text: str,
    prompt_tokens: int,
    completion_tokens: int,
    end: ReplyEnd,
    params: Mapping[str, Any],
    **fields: Any,
) -> LLMResult:
    """The result of a reply the provider sent (bought now, in a batch, or read from the cache): `ok`, or
    `truncated` / `refused` with the cause and what to do about it."""
    return LLMResult(
        status=end.status,
        text=text,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        error=end_message(end, completion_tokens, params),
        cause=end_cause(end),
        end=end,
        **fields,
    )


def _count_end(stats: ProviderStats, end: ReplyEnd) -> None:
    if end.status == "truncated":
        stats.truncated += 1
    elif end.status == "refused":
        stats.refused += 1
    else:
        stats.calls_ok += 1


# What a round of calls counts that a later round counts again (see Gateway.in_rounds).
_ROUND_COUNTERS = ("cache_hits", "saved_usd", "skipped_budget", "skipped_cache")


def _print_notice(line: str) -> None:
    from rich.console import Console

    Console(stderr=True).print(line, highlight=False, markup=False, soft_wrap=True)


class _LeaseRenewal:
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


@dataclass(slots=True)
class _Attempt:
    """One attempt of a call: whether it is a retry, when it began, and when its request left (None until then)."""

    retry: bool
    began: float = field(default_factory=time.monotonic)
    sent_at: float | None = None


class _OverBudget(Exception):
    """A retry that no longer fits under --max-cost."""


class _Interrupted(Exception):
    """Ctrl-C was pressed before this request left: it is not sent."""


def _with_note(spec: ProviderSpec, error: BaseException | None, text: str) -> str:
    """A failure's description, with what is known about a retired model when the provider answered 404."""
    if error is None or not spec.not_found_note or http_status(error) != 404:
        return text
    return f"{text} ({spec.not_found_note})"


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
