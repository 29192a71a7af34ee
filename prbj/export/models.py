"""Who a judge is, as exports name it: a model id in the `provider/model` or Hugging Face form, its developer,
where it ran, and the generation settings the run asked for. Read from run.json (its `judges` and `usage`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prbj.analysis.run_data import RunData
from prbj.data.files import safe_name

# Provider families whose models are only reachable through their makers' APIs.
_CLOSED_FAMILIES = ("gemini", "vertex_ai", "anthropic", "openai/gpt", "openai/o", "azure")
# What a judge entry records that is configuration (exports carry it); api_base is left out: it may name a
# machine of the reader's network.
_NOT_EXPORTED = frozenset({"api_base"})


@dataclass(frozen=True)
class JudgeModel:
    judge: str
    model_id: str  # developer/model: the EEE datastore files it under these two folders
    kind: str
    provider: str | None  # the prbj provider profile, for LLM judges
    deployment: str  # EEE: self_deployed | externally_managed | unknown
    availability: str  # EEE: open_weights | closed_weights | unknown
    params: dict[str, Any] = field(default_factory=dict)  # generation settings asked of the provider
    setup: dict[str, Any] = field(default_factory=dict)  # the judge's run.json entry, less api_base

    @property
    def developer(self) -> str:
        return self.model_id.split("/", 1)[0]

    @property
    def model_name(self) -> str:
        return self.model_id.split("/", 1)[1]

    @property
    def platform(self) -> str:
        return self.developer if self.provider else "local (in-process)"


def path_part(text: str) -> str:
    """One folder-safe part of a model id: EEE files records under data/<benchmark>/<developer>/<model>/."""
    cleaned = safe_name(text)
    return f"x-{cleaned}" if cleaned.lower() in ("data", "unknown") else cleaned


def _model_id(judge: str, entry: dict[str, Any]) -> str:
    model = entry.get("model")
    if not isinstance(model, str) or not model:
        return f"prbj/{path_part(judge)}"
    for prefix in ("hf-local:", "hf:"):
        model = model.removeprefix(prefix)
    if model.startswith((".", "/", "~")):  # a checkpoint on the reader's disk: its folder name only
        return f"local/{path_part(model.rstrip('/').rsplit('/', 1)[-1])}"
    if (
        "/" not in model
    ):  # an offline judge's helper model (embed-profile's word vectors): the judge is prbj's
        return f"prbj/{path_part(judge)}"
    return "/".join(path_part(part) for part in model.split("/") if part)


def judge_model(run: RunData, judge: str) -> JudgeModel:
    entries = [j for j in run.run.get("judges") or [] if isinstance(j, dict) and j.get("name") == judge]
    entry = entries[0] if entries else {"name": judge}
    model_id = _model_id(judge, entry)
    provider = entry.get("provider") if isinstance(entry.get("provider"), str) else None
    params: dict[str, Any] = {}
    for usage in run.run.get("usage") or []:
        if isinstance(usage, dict) and usage.get("provider") == provider and usage.get("params"):
            asked = usage["params"][0].get("asked") if isinstance(usage["params"][0], dict) else None
            params = dict(asked) if isinstance(asked, dict) else {}
    if provider is not None:
        closed = any(str(entry.get("model", "")).startswith(f) for f in _CLOSED_FAMILIES)
        deployment, availability = "externally_managed", "closed_weights" if closed else "unknown"
    elif "weights" in entry or str(entry.get("model", "")).startswith("hf"):
        deployment, availability = "self_deployed", "open_weights"
    else:
        deployment, availability = "self_deployed", "unknown"
    setup = {k: v for k, v in entry.items() if k not in _NOT_EXPORTED}
    return JudgeModel(
        judge, model_id, str(entry.get("kind") or "judge"), provider, deployment, availability, params, setup
    )
