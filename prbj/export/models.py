"""Who a judge is, as exports name it: a model id in the `provider/model` or Hugging Face form, its developer,
where it ran, and the generation settings the run asked for. Read from run.json (its `judges` and `usage`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prbj.analysis.run_data import RunData
from prbj.data.files import safe_name

# Provider families whose models are only reachable through their makers' APIs.
_CLOSED_FAMILIES = ("gemini", "vertex_ai", "anthropic", "openai/gpt", "openai/o", "azure")
# What a judge entry records that is configuration (exports carry it); api_base is left out: it may name a
# machine of the reader's network.
_NOT_EXPORTED = frozenset({"api_base"})


# LiteLLM routes (the `family/` of a model id) whose models come from one developer, when the id does not name
# another one (`openai/Qwen/Qwen3-8B` is Qwen's model on an OpenAI-compatible server).
ROUTE_DEVELOPERS = {
    "openai": "openai",
    "azure": "openai",
    "anthropic": "anthropic",
    "gemini": "google",
    "vertex_ai": "google",
    "mistral": "mistralai",
    "deepseek": "deepseek",
    "xai": "xai",
    "cohere": "cohere",
    "cohere_chat": "cohere",
}
# How prbj's own offline baselines and in-process models are filed.
PRBJ = "prbj"
LOCAL = "local"
UNKNOWN = "unknown"
IN_PROCESS = "local (in-process)"
OFFLINE = "prbj (offline)"


@dataclass(frozen=True)
class JudgeModel:
    judge: str
    called: str  # the model as prbj called it: a LiteLLM id, an hf: reference, `prbj/<judge>` for a baseline
    developer: str  # who made the model, from its id; `unknown` when the id does not say
    model_name: str  # the model's own name, after its developer's (or its route's) prefix
    platform: str  # where it ran: the LiteLLM route, `local (in-process)`, or `prbj (offline)`
    kind: str
    provider: str | None  # the prbj provider profile, for LLM judges
    deployment: str  # EEE: self_deployed | externally_managed | unknown
    availability: str  # EEE: open_weights | closed_weights | unknown
    params: dict[str, Any] = field(default_factory=dict)  # generation settings asked of the provider
    setup: dict[str, Any] = field(default_factory=dict)  # the judge's run.json entry, less api_base

    @property
    def model_id(self) -> str:
        """`developer/model` (Hugging Face style); a model of unknown developer under where it ran (its route, or
        `local`), since Every Eval Ever files a record under its id's prefix and refuses an `unknown` folder."""
        if self.developer != UNKNOWN:
            return f"{self.developer}/{self.model_name}"
        return f"{LOCAL if self.platform == IN_PROCESS else path_part(self.platform)}/{self.model_name}"


def path_part(text: str) -> str:
    """One folder-safe part of a model id: EEE files records under data/<benchmark>/<developer>/<model>/."""
    cleaned = safe_name(text)
    return f"x-{cleaned}" if cleaned.lower() in ("data", "unknown") else cleaned


def _path_parts(text: str) -> list[str]:
    return [path_part(part) for part in text.split("/") if part]


def _identity(judge: str, entry: dict[str, Any], provider: str | None) -> tuple[str, str, str, str]:
    """(as called, developer, model name, platform) of a judge's run.json entry."""
    model = entry.get("model")
    if (
        not isinstance(model, str)
        or not model
        or (provider is None and "/" not in model and "weights" not in entry)
    ):
        # An offline baseline (embed-profile's word vectors are a helper, not the judge): the judge is prbj's.
        return f"{PRBJ}/{judge}", PRBJ, path_part(judge), OFFLINE
    if provider is not None and not model.startswith("prbj-local/"):
        route, _, rest = model.partition("/")
        parts = _path_parts(rest) if rest else _path_parts(route)
        if len(parts) >= 2:  # the id names its developer: openai/Qwen/Qwen3-8B, openrouter/anthropic/claude-x
            return model, parts[0], "_".join(parts[1:]), route
        developer = ROUTE_DEVELOPERS.get(route, UNKNOWN) if rest else UNKNOWN
        return model, developer, parts[0] if parts else path_part(model), route if rest else UNKNOWN
    # In-process: an hf: reward model or an hf-local: generator, by hub id or by folder.
    ref = model.removeprefix("prbj-local/")
    for prefix in ("hf-local:", "hf:"):
        ref = ref.removeprefix(prefix)
    if (
        ref.startswith((".", "/", "~")) or Path(ref).expanduser().is_dir()
    ):  # a checkpoint on the reader's disk
        return model, UNKNOWN, path_part(ref.rstrip("/").rsplit("/", 1)[-1]), IN_PROCESS
    parts = _path_parts(ref)
    if len(parts) >= 2:  # a hub id: its owner made it
        return model, parts[0], "_".join(parts[1:]), IN_PROCESS
    return model, UNKNOWN, parts[0] if parts else path_part(ref), IN_PROCESS


def judge_model(run: RunData, judge: str) -> JudgeModel:
    entries = [j for j in run.run.get("judges") or [] if isinstance(j, dict) and j.get("name") == judge]
    entry = entries[0] if entries else {"name": judge}
    provider = entry.get("provider") if isinstance(entry.get("provider"), str) else None
    called, developer, model_name, platform = _identity(judge, entry, provider)
    params: dict[str, Any] = {}
    for usage in run.run.get("usage") or []:
        if isinstance(usage, dict) and usage.get("provider") == provider and usage.get("params"):
            asked = usage["params"][0].get("asked") if isinstance(usage["params"][0], dict) else None
            params = dict(asked) if isinstance(asked, dict) else {}
    if provider is not None and platform != IN_PROCESS:
        closed = any(str(entry.get("model", "")).startswith(f) for f in _CLOSED_FAMILIES)
        deployment, availability = "externally_managed", "closed_weights" if closed else "unknown"
    elif platform == IN_PROCESS:
        deployment, availability = "self_deployed", "open_weights"
    else:
        deployment, availability = "self_deployed", "unknown"
    setup = {k: v for k, v in entry.items() if k not in _NOT_EXPORTED}
    return JudgeModel(
        judge,
        called,
        developer,
        model_name,
        platform,
        str(entry.get("kind") or "judge"),
        provider,
        deployment,
        availability,
        params,
        setup,
    )
