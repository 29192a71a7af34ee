"""Tiny sequence-classification reward models built from scratch for tests and benchmarks: random weights from a
Llama config, and a word-level tokenizer with BOS/EOS, a chat template and no network involved."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

BOS, EOS, PAD, UNK = "<s>", "</s>", "<pad>", "<unk>"
ROLE_TOKENS = ("<|user|>", "<|assistant|>")
# Every turn ends with EOS, like Llama 3 templates whose end-of-turn token is the EOS: padding with EOS would
# then hide the last real token from the pooling, which the scorer must avoid.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|> "
    "{{ message['content'] }} {{ eos_token }}{% endfor %}"
)
_WORD = re.compile(r"\w+|[^\w\s]")


def vocabulary(texts: Iterable[str]) -> list[str]:
    return sorted({w.lower() for text in texts for w in _WORD.findall(text)})


def build_tokenizer(
    folder: Path, words: Iterable[str], *, with_pad: bool, chat_template: str | None = CHAT_TEMPLATE
):
    """A WordLevel tokenizer whose post-processor adds BOS, like Llama's: templated text fed through it again
    would start with two BOS tokens."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = [UNK, PAD, BOS, EOS, *ROLE_TOKENS]
    vocab = {token: i for i, token in enumerate([*specials, *words])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, vocab[BOS])]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        pad_token=PAD if with_pad else None,
        additional_special_tokens=list(ROLE_TOKENS),
    )
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    tokenizer.save_pretrained(folder)
    return tokenizer


def build_reward_model(
    folder: Path,
    texts: Iterable[str],
    *,
    hidden: int = 32,
    layers: int = 2,
    heads: int = 4,
    num_labels: int = 1,
    with_pad: bool = False,
    zero_head: bool = False,
    seed: int = 0,
    chat_template: str | None = CHAT_TEMPLATE,
    max_positions: int = 4096,
) -> Path:
    """A LlamaForSequenceClassification with random weights saved to `folder` with its tokenizer.
    `with_pad` gives tokenizer and config a pad token; without it the checkpoint has none, as many RMs."""
    import torch
    from transformers import LlamaConfig, LlamaForSequenceClassification

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(folder, vocabulary(texts), with_pad=with_pad, chat_template=chat_template)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=max_positions,
        num_labels=num_labels,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id if with_pad else None,
    )
    torch.manual_seed(seed)
    model = LlamaForSequenceClassification(config)
    with torch.no_grad():
        # Random init gives a head with tiny weights; scale it so scores differ visibly between answers.
        model.score.weight.mul_(0.0 if zero_head else 50.0)
    model.save_pretrained(folder)
    return folder


def build_causal_lm(folder: Path, texts: Iterable[str]) -> Path:
    """A LlamaForCausalLM checkpoint: loading it as a classifier would invent a random head."""
    from transformers import LlamaConfig, LlamaForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(folder, vocabulary(texts), with_pad=False)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


REMOTE_MODULE = """from transformers import LlamaForSequenceClassification


class CustomRewardModel(LlamaForSequenceClassification):
    \"\"\"Stands in for a reward model that ships its own modeling code.\"\"\"
"""


def mark_as_remote_code(folder: Path, auto_class: str = "AutoModelForSequenceClassification") -> Path:
    """Make the checkpoint ship its own model class, registered under `auto_class`, as InternLM2-Reward does
    (it registers its reward class as AutoModel)."""
    (folder / "modeling_custom.py").write_text(REMOTE_MODULE)
    config_file = folder / "config.json"
    config = json.loads(config_file.read_text())
    config["architectures"] = ["CustomRewardModel"]
    config["auto_map"] = {auto_class: "modeling_custom.CustomRewardModel"}
    config_file.write_text(json.dumps(config, indent=2))
    return folder
