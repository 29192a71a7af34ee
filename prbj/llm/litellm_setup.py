"""Import LiteLLM once, lazily (it takes seconds), configured for prbj: local price map, quiet, no own retries."""

from __future__ import annotations

import logging
import os
from functools import cache
from typing import Any


@cache
def litellm() -> Any:
    # The price map must come from the installed package: fetching it at import time reaches for the network.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm as module

    module.suppress_debug_info = True
    module.telemetry = False
    module.num_retries = 0
    # Its own logging repeats what prbj reports (and parameter deprecation notes on every call).
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return module


def litellm_price(model: str) -> tuple[float, float] | None:
    """(input, output) USD per token from LiteLLM's price map for this exact id, or None when unknown."""
    table = litellm().model_cost
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
    for candidate in candidates:
        entry = table.get(candidate)
        if (
            entry
            and entry.get("input_cost_per_token") is not None
            and entry.get("output_cost_per_token") is not None
        ):
            return float(entry["input_cost_per_token"]), float(entry["output_cost_per_token"])
    return None


def count_prompt_tokens(model: str, messages: list[dict[str, Any]]) -> int:
    return int(litellm().token_counter(model=model, messages=messages))
