"""Settling a call once its outcome is known: what it cost, what the provider's counters and the budget say, what
the cache keeps, and the result the caller reads.

A reply is charged what it cost (its prompt-cache reads and writes priced), counted by how it ended and stored,
cut off and refused replies too (they were paid for). A failed attempt gives its reservation back, unless it timed
out (the provider may have billed it: its worst case counts as spent). A call that ends without an answer says why,
with what is known about a retired model when the provider answered 404.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from prbj.llm.answer import answer_value, stored_logprobs
from prbj.llm.breaker import BreakerOpen
from prbj.llm.calls import LLMResult, ProviderState, ProviderStats
from prbj.llm.error_text import describe_error
from prbj.llm.finish import ReplyEnd, end_cause, end_message, end_of
from prbj.llm.prompt_cache import cache_adjustment
from prbj.llm.retry import cause_of, http_status, is_timeout

if TYPE_CHECKING:
    from prbj.llm.budget import Budget
    from prbj.llm.cache import ResponseCache
    from prbj.llm.calls import LLMRequest
    from prbj.llm.providers import ProviderSpec
    from prbj.llm.transport import ChatCall, Completion


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


def count_end(stats: ProviderStats, end: ReplyEnd) -> None:
    if end.status == "truncated":
        stats.truncated += 1
    elif end.status == "refused":
        stats.refused += 1
    else:
        stats.calls_ok += 1


def from_cache(
    stats: ProviderStats, hit: Mapping[str, Any], params: Callable[[], Mapping[str, Any]]
) -> LLMResult:
    """A cache hit's result, counted with what it saved. `params` gives the request's parameters, which name the
    cap in a cut-off reply's message; an ordinary answer needs none."""
    stats.cache_hits += 1
    stats.saved_usd += float(hit.get("cost_usd", 0.0))
    end = end_of(hit)
    return replied(
        hit["text"],
        int(hit.get("prompt_tokens", 0)),
        int(hit.get("completion_tokens", 0)),
        end,
        {} if end.plain else params(),
        original_cost_usd=float(hit.get("cost_usd", 0.0)),
        cached=True,
        logprobs=stored_logprobs(hit),
    )


def settle_reply(
    state: ProviderState,
    budget: Budget,
    cache: ResponseCache | None,
    key: str,
    request: LLMRequest,
    call: ChatCall,
    completion: Completion,
    reserved: float,
    *,
    started: float,
    attempts: int,
) -> LLMResult:
    """A reply bought now: charged, counted, stored (a cut-off or refused reply too: it was paid for, and a rerun
    replays it)."""
    spec, stats = state.spec, state.stats
    text, prompt_tokens, completion_tokens = (
        completion.text,
        completion.prompt_tokens,
        completion.completion_tokens,
    )
    provider_cache = cache_adjustment(spec, completion.cached_tokens, completion.cache_write_tokens)
    cost = spec.cost(prompt_tokens, completion_tokens) + provider_cache
    stats.cached_input_tokens += completion.cached_tokens
    stats.provider_cache_saved_usd -= provider_cache
    budget.settle(reserved, cost)
    count_end(stats, completion.end)
    stats.prompt_tokens += prompt_tokens
    stats.completion_tokens += completion_tokens
    stats.cost_usd += cost
    if cache is not None:
        cache.store_soon(
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


def account_failed_attempt(
    state: ProviderState,
    budget: Budget,
    error: BaseException,
    reserved: float,
    uncounted_worst_case: Callable[[], float] | None = None,
) -> None:
    """A timed-out request may still have been processed and billed: its worst case counts as spent.
    Other failures (429, 5xx, refused connections) were not billed: the reservation is given back.
    `uncounted_worst_case` is given when the request's prompt was not counted up front (no cap, no TPM window):
    its worst case is counted now, so a timeout is accounted exactly as when it was."""
    if is_timeout(error):
        billed = reserved if uncounted_worst_case is None else uncounted_worst_case()
        budget.settle(reserved, billed)
        state.stats.cost_usd += billed
    else:
        budget.release(reserved)


def stopped(
    state: ProviderState,
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
    result = failed(state, last_sent_error, sent, started, api_key)
    return replace(result, error=f"{result.error}; its retry was {stop}")


def failed(
    state: ProviderState,
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
        error=with_note(
            state.spec,
            error,
            describe_error(error, attempts, time.monotonic() - started, secrets=[api_key], ended=ended),
        ),
        cause=cause_of(error),
        latency_s=time.monotonic() - started,
        attempts=attempts,
    )


def with_note(spec: ProviderSpec, error: BaseException | None, text: str) -> str:
    """A failure's description, with what is known about a retired model when the provider answered 404."""
    if error is None or not spec.not_found_note or http_status(error) != 404:
        return text
    return f"{text} ({spec.not_found_note})"
