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

from prbj.llm.litellm_setup import litellm
from prbj.llm.providers import LITELLM_TRANSPORT, ProviderSpec

__all__ = ["LITELLM_TRANSPORT", "ChatCall", "Completion", "LiteLLMTransport", "Transport"]
# Self-hosted servers (vLLM, llama.cpp) need no key, but the OpenAI and Anthropic clients refuse to send a
# request without one: they get this placeholder, as vLLM's own docs suggest.
KEYLESS_PLACEHOLDER = "EMPTY"


@dataclass(frozen=True)
class ChatCall:
    """One chat request, as the gateway hands it over: the messages and the generation parameters to send."""

    provider: ProviderSpec
    messages: list[dict[str, str]]
    params: Mapping[str, Any]
    api_key: str | None


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int


class Transport(Protocol):
    async def send(self, call: ChatCall) -> Completion:
        """Send `call` once; provider trouble is raised as the provider's own error (the gateway retries)."""
        ...


class LiteLLMTransport:
    """A live request through LiteLLM, with LiteLLM's own retries off (the gateway counts attempts)."""

    async def send(self, call: ChatCall) -> Completion:
        spec = call.provider
        response = await litellm().acompletion(
            model=spec.model,
            messages=call.messages,
            api_base=spec.api_base,
            api_key=call.api_key if call.api_key is not None or not spec.api_base else KEYLESS_PLACEHOLDER,
            timeout=spec.timeout,
            num_retries=0,
            max_retries=0,
            drop_params=True,
            **call.params,
        )
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        return Completion(
            text=choice.message.content or "",
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        )
