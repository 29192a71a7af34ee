"""Issue 45 item 6: who a judge is, as exports say it. The developer comes from the model id (`openai/Qwen/
Qwen3-8B` is Qwen's model, served on an OpenAI-compatible route), or is `unknown`; the platform is the route. An
Every Eval Ever record is filed where Every Eval Ever files it (under its id's prefix, never `unknown`), and every
kind of judge gets an Inspect model name from which Every Eval Ever's own Inspect converter reads a developer (it
refused prbj's offline baselines, `none/<judge>`).

The `readers` test converts a log of every judge kind with Every Eval Ever itself (PRBJ_EEE_PYTHON); the default
one checks the converter's rule as its source states it: the name's first part must be a provider it knows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from export_runs import judged_run
from test_export import every_eval_ever, export

from prbj.export.inspect_log import inspect_model_name
from prbj.export.models import judge_model

# Every kind of judge, as run.json records it → (EEE model id, developer, platform, Inspect model name).
KINDS: dict[str, tuple[dict[str, Any], tuple[str, str, str, str]]] = {
    "offline baseline": (
        {"kind": "BM25ProfileJudge"},
        ("prbj/JUDGE", "prbj", "prbj (offline)", "hf/prbj/JUDGE"),
    ),
    "offline baseline with a helper model": (
        {"kind": "EmbedProfileJudge", "model": "l2_supercat_64d"},
        ("prbj/JUDGE", "prbj", "prbj (offline)", "hf/prbj/JUDGE"),
    ),
    "a maker's API": (
        {"provider": "gemini-3-flash", "model": "gemini/gemini-3-flash-preview"},
        ("google/gemini-3-flash-preview", "google", "gemini", "google/gemini-3-flash-preview"),
    ),
    "OpenAI": (
        {"provider": "gpt-5.1", "model": "openai/gpt-5.1-2025-11-13"},
        ("openai/gpt-5.1-2025-11-13", "openai", "openai", "openai/gpt-5.1-2025-11-13"),
    ),
    "Anthropic": (
        {"provider": "claude-sonnet-4-6", "model": "anthropic/claude-sonnet-4-6"},
        ("anthropic/claude-sonnet-4-6", "anthropic", "anthropic", "anthropic/claude-sonnet-4-6"),
    ),
    "a self-hosted model on an OpenAI-compatible server": (
        {"provider": "litellm:openai/Qwen/Qwen3-8B", "model": "openai/Qwen/Qwen3-8B"},
        ("Qwen/Qwen3-8B", "Qwen", "openai", "openai-api/Qwen/Qwen3-8B"),
    ),
    "a router naming the developer": (
        {"provider": "litellm:openrouter/anthropic/claude-x", "model": "openrouter/anthropic/claude-x"},
        ("anthropic/claude-x", "anthropic", "openrouter", "openrouter/anthropic/claude-x"),
    ),
    "a route that names no developer": (
        {"provider": "litellm:ollama/llama3", "model": "ollama/llama3"},
        ("ollama/llama3", "unknown", "ollama", "ollama/llama3"),
    ),
    "a scalar RM from the hub": (
        {"kind": "ScalarJudge", "model": "Skywork/Skywork-Reward-V2-Qwen3-0.6B", "weights": "abc"},
        ("Skywork/Skywork-Reward-V2-Qwen3-0.6B", "Skywork", "local (in-process)",
         "hf/Skywork/Skywork-Reward-V2-Qwen3-0.6B"),
    ),
    "a scalar RM in a folder": (
        {"kind": "ScalarJudge", "model": "/models/my-rm", "weights": "abc"},
        ("local/my-rm", "unknown", "local (in-process)", "hf/local/my-rm"),
    ),
    "a local generative judge from the hub": (
        {"provider": "hf-local:HuggingFaceTB/SmolLM2-135M-Instruct",
         "model": "prbj-local/HuggingFaceTB/SmolLM2-135M-Instruct"},
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "HuggingFaceTB", "local (in-process)",
         "hf/HuggingFaceTB/SmolLM2-135M-Instruct"),
    ),
    "a local generative judge in a folder": (
        {"provider": "hf-local:/models/smol.gguf", "model": "prbj-local//models/smol.gguf"},
        ("local/smol.gguf", "unknown", "local (in-process)", "hf/local/smol.gguf"),
    ),
}  # fmt: skip

# The providers Every Eval Ever 0.3.0's Inspect converter reads a developer from (the first part of the name;
# every_eval_ever/converters/inspect/utils.py, MODEL_HANDLER_MAP): any other is "Cannot determine model developer".
CONVERTER_PROVIDERS = {
    "openai", "anthropic", "google", "grok", "mistral", "deepseek", "perplexity", "bedrock", "azure-ai", "azureai",
    "groq", "together", "fireworks", "cf", "hf-inference-providers", "sambanova", "openrouter", "openai-api", "hf",
    "vllm", "ollama", "llamacpp", "llama-cpp-python", "sglang",
}  # fmt: skip


def _model(judge: str, entry: dict[str, Any]) -> Any:
    run = SimpleNamespace(run={"judges": [{"name": judge, **entry}], "usage": []})
    return judge_model(run, judge)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_of_judge_is_named_by_its_developer_and_its_route(kind: str) -> None:
    entry, expected = KINDS[kind]
    model = _model("bm25-profile", entry)
    named = (model.model_id, model.developer, model.platform, inspect_model_name(model))
    assert named == tuple(part.replace("JUDGE", "bm25-profile") for part in expected)
    # Filed by Every Eval Ever's rule: the id's prefix is the folder, and never `unknown`.
    assert model.model_id.split("/", 1)[0] != "unknown"
    assert inspect_model_name(model).split("/", 1)[0] in CONVERTER_PROVIDERS


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return judged_run(tmp_path_factory.mktemp("identity"))


@pytest.mark.readers
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_eval_ever_converts_the_inspect_log_of_every_kind_of_judge(
    run_dir: Path, tmp_path: Path, kind: str
) -> None:
    """The run's LLM judge recorded as each kind of judge in turn; its Inspect log goes through Every Eval Ever's
    converter, which must find the developer prbj's own EEE export names, and file it in the same folder."""
    entry, (model_id, developer, _, _) = KINDS[kind]
    model_id = model_id.replace("JUDGE", "gemini-3-flash")
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    document = json.loads((run / "run.json").read_text())
    for judge in document["judges"]:
        if judge["name"] == "gemini-3-flash":
            for key in ("provider", "model", "weights"):
                judge.pop(key, None)
            judge.update(entry)
    (run / "run.json").write_text(json.dumps(document))
    export(run, "--format", "inspect", "--out", tmp_path / "logs")
    (log,) = tmp_path.glob("logs/*_gemini-3-flash_profile.eval")
    converted = every_eval_ever("convert", "inspect", "--log_path", log, "--output_dir", tmp_path / "data")
    assert converted.returncode == 0, converted.stdout + converted.stderr
    (aggregate,) = tmp_path.glob("data/*/*/*/*.json")
    info = json.loads(aggregate.read_text())["model_info"]
    assert info["id"] == model_id
    assert info["developer"] == (developer if developer != "unknown" else model_id.split("/", 1)[0])
    # prbj's own EEE export files the judge in the folder the converter chose.
    export(run, "--format", "eee", "--out", tmp_path / "ours")
    (ours,) = [
        p
        for p in tmp_path.glob("ours/data/*/*/*/*.json")
        if json.loads(p.read_text())["model_info"]["name"] == "gemini-3-flash"
    ]
    assert (
        ours.parent.relative_to(tmp_path / "ours" / "data").parts[1:]
        == aggregate.parent.relative_to(tmp_path / "data").parts[1:]
    )
    checked = every_eval_ever("validate", "--format", "json", *sorted(str(p) for p in ours.parent.iterdir()))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert all(not report["warnings"] for report in json.loads(checked.stdout)), checked.stdout
