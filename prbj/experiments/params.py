"""Parameter counts of `hf:` reward models, without loading their weights.

A safetensors file starts with a JSON header listing every tensor's shape: summing their products counts the
parameters exactly, reading a few kilobytes (through the `safetensors` library, which maps the file and reads
only the header). A checkpoint without safetensors files is counted from its config.json by building the
model on PyTorch's meta device (no memory, no weights) with transformers and accelerate.
"""

from __future__ import annotations

import json
from pathlib import Path

from prbj.errors import ConfigError

SAFETENSORS_INDEX = "model.safetensors.index.json"


def _local_folder(ref: str) -> Path | None:
    """The checkpoint's folder: a local path, or a hub id already in the local hub cache (nothing downloaded)."""
    path = Path(ref).expanduser()
    if path.is_dir():
        return path
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    found = try_to_load_from_cache(ref, "config.json")
    return Path(found).parent if isinstance(found, str) else None


def _safetensors_files(folder: Path) -> list[Path]:
    index = folder / SAFETENSORS_INDEX
    if index.is_file():
        shards = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values()
        return [folder / name for name in sorted(set(shards))]
    return sorted(folder.glob("*.safetensors"))


def _count_safetensors(files: list[Path]) -> int:
    from safetensors import safe_open

    total = 0
    for file in files:
        with safe_open(str(file), framework="numpy") as handle:
            for name in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
                count = 1
                for size in handle.get_slice(name).get_shape():
                    count *= int(size)
                total += count
    return total


def _count_from_config(folder: Path) -> int:
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForSequenceClassification

    config = AutoConfig.from_pretrained(folder)
    with init_empty_weights():
        model = AutoModelForSequenceClassification.from_config(config)
    return sum(p.numel() for p in model.parameters())


def parameter_count(ref: str) -> int | None:
    """Parameters of the checkpoint `ref` (folder or hub id); None when it is not on this machine."""
    folder = _local_folder(ref)
    if folder is None:
        return None
    files = _safetensors_files(folder)
    try:
        if files and all(f.is_file() for f in files):
            return _count_safetensors(files)
        if (folder / "config.json").is_file():
            return _count_from_config(folder)
    except (OSError, ValueError, json.JSONDecodeError) as err:
        raise ConfigError(f"hf:{ref}: cannot count its parameters: {err}") from None
    return None


def params_billions(ref: str) -> float | None:
    count = parameter_count(ref)
    return None if count is None else count / 1e9
