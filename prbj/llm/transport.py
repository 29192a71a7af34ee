"""How one chat request leaves the gateway: the seam between the call path (cache, budget, pacing, retries) and
whatever answers the request.

The gateway picks a transport by `ProviderSpec.transport` from those registered on it. Today there are two: a
live LiteLLM call (here) and in-process generation (prbj.local). A transport sends exactly one request and
raises the provider's error as it comes; retrying, accounting and caching stay in the gateway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from prbj.llm.finish import COMPLETE, ReplyEnd
from prbj.llm.litellm_finish import RawBody, reply_end
from prbj.llm.litellm_setup import litellm
from prbj.llm.logprobs import TokenChoice, asked, from_response
from prbj.llm.prompt_cache import family
from prbj.llm.providers import KEYLESS_PLACEHOLDER, LITELLM_TRANSPORT, ProviderSpec
from prbj.llm.ratelimit_headers import StatedLimits, reply_headers, stated_limits
from prbj.llm.wire_params import allowed_through

__all__ = ["LITELLM_TRANSPORT", "ChatCall", "Completion", "LiteLLMTransport", "Transport"]


@dataclass(frozen=True)
class ChatCall:
    """One chat request, as the gateway hands it over: the messages and the generation parameters to send."""

    provider: ProviderSpec
    messages: list[dict[str, str]]
    params: Mapping[str, Any]
    api_key: str | None
    # Characters of the last user message that other calls share (Anthropic cache breakpoint); 0: none.
    shared_prefix_chars: int = 0


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    # Of the prompt tokens: read from, and written to, the provider's prompt cache (billed at other rates).
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    # Where the request asked for log-probabilities (--confidence logprobs): the positions where a letter stood
    # (prbj.llm.logprobs); None when none were asked for or the provider sent none.
    logprobs: tuple[TokenChoice, ...] | None = None
    # The rate limits the provider stated in the reply's headers (never cached: they describe the provider now).
    rate_limits: StatedLimits | None = None
    # How the reply ended (cut at the output cap, refused) and the hidden reasoning it spent: prbj.llm.finish.
    end: ReplyEnd = COMPLETE


class Transport(Protocol):
    async def send(self, call: ChatCall) -> Completion:
        """Send `call` once; provider trouble is raised as the provider's own error (the gateway retries)."""
        ...


class LiteLLMTransport:
    """A live request through LiteLLM, with LiteLLM's own retries off (the gateway counts attempts)."""

    async def send(self, call: ChatCall) -> Completion:
        spec = call.provider
        # Gemini's own reason for a safety block is only in the raw body (see litellm_finish.RawBody).
        raw = RawBody() if family(spec.model) == "gemini" else None
        extra: dict[str, Any] = {"logger_fn": raw} if raw is not None else {}
        response = await litellm().acompletion(
            model=spec.model,
            messages=anthropic_cache_breakpoint(call),
            api_base=spec.api_base,
            api_key=call.api_key if call.api_key is not None or not spec.api_base else KEYLESS_PLACEHOLDER,
            timeout=spec.timeout,
            num_retries=0,
            max_retries=0,
            drop_params=True,
            **extra,
            **allowed_through(spec.model, call.params),
            **call.params,
        )
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        cached, written = prompt_cache_counts(usage)
        text = choice.message.content or ""
        return Completion(
            text=text,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cached_tokens=cached,
            cache_write_tokens=written,
            logprobs=reply_logprobs(call, getattr(choice, "logprobs", None), text),
            rate_limits=stated_limits(reply_headers(response)),
            end=reply_end(response, raw),
        )


def reply_logprobs(call: ChatCall, choice_logprobs: Any, text: str) -> tuple[TokenChoice, ...] | None:
    if not asked(call.params):
        return None
    kept = from_response(choice_logprobs, text)
    return None if kept is None else tuple(kept)


def prompt_cache_counts(usage: Any) -> tuple[int, int]:
    """(tokens read from, written to) the provider's prompt cache, from LiteLLM's usage: it reports OpenAI's
    cached_tokens, Gemini's cachedContentTokenCount and Anthropic's cache_read_input_tokens as
    prompt_tokens_details.cached_tokens, and Anthropic's cache_creation_input_tokens as is."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0)
    written = int(
        getattr(usage, "cache_creation_input_tokens", 0) or getattr(details, "cache_write_tokens", 0) or 0
    )
    return cached, written


def anthropic_cache_breakpoint(call: ChatCall) -> list[dict[str, Any]]:
    """The messages to send: for Anthropic models whose shared prefix reaches the model's minimum cacheable
    length, with a cache_control breakpoint after that prefix (other providers cache prefixes on their own)."""
    from prbj.llm.prompt_cache import carries_breakpoint, with_cache_breakpoint

    if not carries_breakpoint(call.provider, call.messages, call.shared_prefix_chars):
        return list(call.messages)
    return with_cache_breakpoint([dict(m) for m in call.messages], call.shared_prefix_chars)
