"""Parameter counts of hf: reward models without loading their weights: from safetensors headers, else from
config.json on PyTorch's meta device; equal to the count of the loaded model."""

from __future__ import annotations

import shutil
from pathlib import Path

from tiny_rm import build_reward_model

from prbj.experiments.params import parameter_count, params_billions


def test_counts_equal_the_loaded_models(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification

    folder = build_reward_model(tmp_path / "rm", ["a small vocabulary for a tiny model"], hidden=16, layers=2)
    loaded = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32)
    expected = sum(p.numel() for p in loaded.parameters())
    assert parameter_count(str(folder)) == expected
    assert params_billions(str(folder)) == expected / 1e9
    # Without safetensors files the model is built from config.json on the meta device: no weights read.
    config_only = tmp_path / "config-only"
    shutil.copytree(folder, config_only)
    for weights in config_only.glob("*.safetensors"):
        weights.unlink()
    assert parameter_count(str(config_only)) == expected


def test_a_model_not_on_this_machine_has_no_count(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    assert parameter_count("someone/not-downloaded-rm") is None
