"""How LiteLLM spells a request's generation parameters for the provider: `max_tokens` becomes
`max_completion_tokens` for OpenAI reasoning models and `max_output_tokens` for Gemini, `reasoning_effort`
becomes Anthropic's `thinking` or Gemini's `thinkingConfig`, and what a model does not take is left out
(`drop_params`). A live call, a batch line and the parameter rules (prbj.llm.param_rules) all read the same
mapping, so what prbj checks and records is what leaves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from prbj.llm.litellm_setup import litellm, litellm_part, remembered_wire

# The key under which a mapping that LiteLLM refused is remembered (its message is the value).
MAPPING_ERROR = "error"


def bare_model(model: str) -> str:
    """`openai/gpt-5.1` → `gpt-5.1`: the model name the provider's own API takes."""
    return model.split("/", 1)[1] if "/" in model else model


def family_of(model: str) -> str:
    """The provider LiteLLM routes `model` to, in prbj's words (gemini, anthropic, openai, ...)."""
    provider = litellm().get_llm_provider(model)[1] if "/" not in model else model.split("/", 1)[0]
    return {"vertex_ai": "gemini", "gemini": "gemini", "anthropic": "anthropic"}.get(provider, provider)


def allowed_through(model: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """What must go with `params` for LiteLLM to send them all. Its Gemini (AI Studio) mapping lists `logprobs`
    but not `top_logprobs` among the parameters it takes, so `drop_params` would drop the number of
    alternatives (--confidence logprobs) and Gemini would return only the chosen token's log-probability, which
    cannot be normalised over two verdict letters; allowed through, LiteLLM's own mapping sends it as
    generationConfig.logprobs."""
    if params.get("logprobs") and "top_logprobs" in params and model.startswith(("gemini/", "vertex_ai/")):
        return {"allowed_openai_params": ["top_logprobs"]}
    return {}


def mapped_params(model: str, params: Mapping[str, Any], family: str | None = None) -> dict[str, Any]:
    """`params` as LiteLLM sends them for `model` (with drop_params, as the transport sends them); raises what
    LiteLLM raises for parameters it cannot send at all."""
    mapped = litellm_part("litellm.utils").get_optional_params(
        model=bare_model(model),
        custom_llm_provider=family or family_of(model),
        drop_params=True,
        **allowed_through(model, params),
        **dict(params),
    )
    mapped.pop("stream", None)
    extra = mapped.pop("extra_body", None) or {}
    return {**mapped, **extra}


def wire_params(model: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """`mapped_params`, remembered with the model map's facts (a replay imports no LiteLLM); a mapping LiteLLM
    refuses is `{"error": its message}`."""
    key = f"{model}\x00{json.dumps(dict(params), sort_keys=True, default=str)}"

    def compute() -> dict[str, Any]:
        try:
            return mapped_params(model, params)
        except Exception as err:  # LiteLLM's own refusal (an unmapped value, a parameter it cannot send)
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            return {MAPPING_ERROR: first[:300]}

    return remembered_wire(key, compute)
