"""Build the three tiny demo reward models that experiments/sample.toml scores the bundled sample with.

They are LlamaForSequenceClassification checkpoints with random weights (tests/tiny_rm.py), of three sizes, whose
word-level vocabulary covers the sample's questions and answers. Their scores mean nothing: they exist so that the
sample experiment exercises scalar reward models, parameter counts and the size figure offline. Rebuild them with
`python scripts/build_demo_rms.py` (same seeds, same files).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from tiny_rm import build_reward_model  # noqa: E402

# name → (hidden size, layers, attention heads, seed)
SIZES = {"tiny-rm-s": (8, 1, 2, 1), "tiny-rm-m": (16, 1, 2, 2), "tiny-rm-l": (32, 2, 4, 3)}


def sample_texts() -> list[str]:
    texts = []
    for path in sorted((ROOT / "prbj" / "data" / "sample").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            texts += [record["question"], record["chosen"], record["rejected"]]
    return texts


def main() -> None:
    import torch
    from transformers import AutoModelForSequenceClassification

    texts = sample_texts()
    for name, (hidden, layers, heads, seed) in SIZES.items():
        folder = ROOT / "experiments" / "models" / name
        build_reward_model(
            folder, texts, hidden=hidden, layers=layers, heads=heads, seed=seed, max_positions=2048
        )
        # Half precision on disk halves the files; prbj runs them in fp32 on a CPU (--dtype auto).
        model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32)
        model.half().save_pretrained(folder)
        print(f"{folder}: {sum(p.numel() for p in model.parameters()):,} parameters")


if __name__ == "__main__":
    main()
