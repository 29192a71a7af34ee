"""A Hugging Face sequence-classification reward model: checked when opened, weights loaded on first use,
scoring batches of conversations. Imported only when an `hf:` judge is used, because torch is heavy.

Exactness rules (each one guards against a way batching or templating could change a score):
- Tokenise once from the message list with the chat template: re-tokenising templated text would add a
  second BOS.
- Right padding with an attention mask: real tokens start at position 0 and a causal model's real tokens never
  attend to the pads after them, so an item's score does not depend on its neighbours.
- The score is read at the last real token. Transformers pools at the rightmost token that differs from the
  config's pad id; when the checkpoint defines none, the pad id used is one that ends no sequence in the batch,
  so the pooling position is exactly the one an unpadded single-item pass uses.
- Too long inputs lose their middle: the head (BOS, system, role markers, question) and the tail (end of the
  answer and of the assistant turn, where the score is read) both survive. The item is flagged.

Speed: the two answers of a pair share the whole user turn (in the 'profile' context most of the tokens). Rows
are grouped by their shared leading tokens; one pass runs each group's prefix once (left-padded, with explicit
positions, filling a KV cache), a second pass runs every row's own tokens on top of its group's cache. The
result equals a pass over the whole row up to float rounding; a self-check on the first batch falls back to
whole rows for architectures where it does not (and remote code or sliding-window attention never use it).
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

import torch

from prbj.data.files import json_problem
from prbj.errors import ConfigError
from prbj.local.packing import PrefixGroup, group_by_prefix, pack_by_tokens, pack_groups, truncate_middle

DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}

Messages = list[dict[str, str]]
# index in the batch, score, truncated, tokens fed to the model
OnScore = Callable[[int, float, bool, int], None]


@dataclass(frozen=True, slots=True)
class Encoded:
    ids: list[int]
    truncated: bool
    full_length: int


def default_batch_tokens(device: str) -> int:
    """A GPU is fastest on big batches; a CPU gains little from them and pays for padding and cache misses
    (bench/bench_scalar.py: 4096 beat 16384 by about a fifth of CPU time on a 2-core machine)."""
    return 16384 if device.startswith("cuda") else 4096


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA device is available to torch; use --device cpu")
    return device


def resolve_dtype(dtype: str, device: str) -> torch.dtype:
    """'auto' is bf16 on a GPU (the official protocol) and fp32 on a CPU, where bf16 is slow and inexact."""
    if dtype != "auto":
        return DTYPES[dtype]
    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


@dataclass(frozen=True, slots=True)
class _LoadPlan:
    auto_class: str  # the transformers Auto* class that builds the model with its reward head
    remote_code: bool


def _load_plan(folder: Path, ref: str, trust_remote_code: bool) -> _LoadPlan:
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise ConfigError(f"--provider hf:{ref}: no config.json in {folder}")
    try:
        raw = json.loads(config_file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        problem = json_problem(error, with_line=False)
        raise ConfigError(f"{config_file}:{error.lineno}: not valid JSON ({problem})") from None
    architectures = [str(a) for a in raw.get("architectures") or []]
    auto_map = raw.get("auto_map") or {}
    if "AutoModelForSequenceClassification" in auto_map:
        plan = _LoadPlan("AutoModelForSequenceClassification", remote_code=True)
    elif any(a.endswith("ForSequenceClassification") for a in architectures):
        plan = _LoadPlan("AutoModelForSequenceClassification", remote_code=False)
    elif "AutoModel" in auto_map and any("Reward" in a for a in architectures):
        # Reward models with their own head class (InternLM2-Reward and the like) register it as AutoModel.
        plan = _LoadPlan("AutoModel", remote_code=True)
    else:
        # Loading a causal LM as a classifier would silently score with a randomly initialised head.
        raise ConfigError(
            f"--provider hf:{ref}: not a sequence-classification reward model "
            f"(architectures: {', '.join(architectures) or 'none'})"
        )
    if plan.remote_code and not trust_remote_code:
        raise ConfigError(
            f"--provider hf:{ref}: the model ships its own Python code ({auto_map[plan.auto_class]}); "
            "rerun with --trust-remote-code if you trust it"
        )
    return plan


class ScalarModel:
    """One reward model. Opening it reads config and tokenizer (cheap, and enough to build cache keys and to
    report configuration errors before any judging); the weights are loaded by the first batch to score, on the
    worker thread, so a rerun served from the cache never loads them."""

    def __init__(
        self,
        folder: Path,
        *,
        ref: str,
        dtype: str = "auto",
        device: str = "auto",
        trust_remote_code: bool = False,
        max_length: int = 8192,
        batch_tokens: int | None = None,
        scalar_input: str = "chat",
    ) -> None:
        from transformers import AutoTokenizer

        if max_length < 2:
            raise ConfigError("--max-length must be at least 2 tokens")
        self.folder = folder
        self.ref = ref
        self.max_length = max_length
        self.scalar_input = scalar_input
        self.trust_remote_code = trust_remote_code
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        self.batch_tokens = batch_tokens or default_batch_tokens(self.device)
        self._plan = _load_plan(folder, ref, trust_remote_code)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=trust_remote_code)
        except (OSError, ValueError) as error:
            raise ConfigError(
                f"--provider hf:{ref}: cannot load its tokenizer ({_first_line(error)})"
            ) from None
        template = self.tokenizer.chat_template
        if not template:
            raise ConfigError(
                f"--provider hf:{ref}: the tokenizer has no chat template, so the conversation cannot be "
                "built the way the model was trained"
            )
        self.chat_template = template if isinstance(template, str) else json.dumps(template, sort_keys=True)
        self._sanitize = (
            "sanitize_control_tokens" in inspect.signature(self.tokenizer.apply_chat_template).parameters
        )
        self._model: Any = None
        self._checkpoint_pad_id: int | None = None
        self._load_lock = threading.Lock()
        self.forward_passes = 0
        self.tokens_scored = 0
        # None until the first batch checks that running shared prefixes once gives the same scores.
        self.prefix_sharing: bool | None = None
        self._cache_argument: str | None = None

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES[self.dtype]

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def encode(self, conversations: Sequence[Messages]) -> list[Encoded]:
        """Token ids of each conversation, straight from the message list (one tokenizer pass, no second BOS).
        Control tokens inside message text (a pasted '<|eot_id|>') stay text, where transformers supports it."""
        if self.scalar_input == "official":
            return self.encode_official(conversations)
        extra: dict[str, Any] = {"sanitize_control_tokens": True} if self._sanitize else {}
        # With tokenize=True and return_dict=False the tokenizer returns one id list per conversation.
        rows = cast(
            list[list[int]],
            self.tokenizer.apply_chat_template(
                [list(c) for c in conversations], tokenize=True, return_dict=False, **extra
            ),
        )
        encoded = []
        for ids in rows:
            kept, truncated = truncate_middle(ids, self.max_length)
            encoded.append(Encoded(kept, truncated, len(ids)))
        return encoded

    def encode_official(self, conversations: Sequence[Messages]) -> list[Encoded]:
        """As the official scripts build a reward model's input (`--scalar-input official`): the chat formatted
        to text, that text tokenised again (so a tokenizer that adds a BOS adds a second one after the
        template's) and cut from the right at max_length."""
        encoded = []
        for conversation in conversations:
            text = cast(str, self.tokenizer.apply_chat_template(list(conversation), tokenize=False))
            ids = cast(list[int], self.tokenizer(text)["input_ids"])
            encoded.append(Encoded(ids[: self.max_length], len(ids) > self.max_length, len(ids)))
        return encoded

    def score_conversations(
        self, conversations: Sequence[Messages], on_score: OnScore, stop: threading.Event | None = None
    ) -> None:
        """Score every conversation, calling `on_score` per item as each batch finishes. Runs on the worker."""
        encoded = self.encode(conversations)
        rows = [e.ids for e in encoded]
        self._ensure_loaded()
        batches: list[tuple[list[int], Callable[[], list[float]]]] = []
        groups = group_by_prefix(rows, self._checkpoint_pad_id) if self._use_prefix_sharing(rows) else []
        if groups and all(group.prefix_length > 0 for group in groups):
            for packed in pack_groups(groups, [len(r) for r in rows], self.batch_tokens):
                order = [i for group in packed for i in group.members]
                batches.append((order, partial(self.forward_shared, packed, rows)))
        else:
            for order in pack_by_tokens([len(r) for r in rows], self.batch_tokens):
                batches.append((order, partial(self.forward, [rows[i] for i in order])))
        for order, run in batches:
            if stop is not None and stop.is_set():
                return
            for index, score in zip(order, run(), strict=True):
                on_score(index, score, encoded[index].truncated, len(encoded[index].ids))

    def forward(self, rows: Sequence[Sequence[int]]) -> list[float]:
        """One forward pass over right-padded rows: the single logit, or the probability of the last class."""
        model = self._ensure_loaded()
        width = max(len(r) for r in rows)
        pad_id = self._set_pad_id(rows)
        input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, ids in enumerate(rows):
            input_ids[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            attention_mask[i, : len(ids)] = 1
        with torch.inference_mode():
            output = model(
                input_ids=input_ids.to(self.device),
                attention_mask=attention_mask.to(self.device),
                **self._forward_extra,
            )
        self.forward_passes += 1
        self.tokens_scored += sum(len(r) for r in rows)
        return self._scores(output, len(rows))

    def forward_shared(self, groups: Sequence[PrefixGroup], rows: Sequence[Sequence[int]]) -> list[float]:
        """Scores of the groups' member rows (in group order, then member order) with each prefix run once:
        prefixes left-padded so that they all end where the rows' own tokens begin, positions counted from
        each row's first real token, and the cache of each prefix repeated for each of its rows."""
        from transformers import DynamicCache

        model = self._ensure_loaded()
        owners = [g for g, group in enumerate(groups) for _ in group.members]
        members = [rows[i] for group in groups for i in group.members]
        pad_id = self._set_pad_id(members)
        width = max(group.prefix_length for group in groups)
        prefix_ids = torch.full((len(groups), width), pad_id, dtype=torch.long)
        prefix_mask = torch.zeros((len(groups), width), dtype=torch.long)
        for g, group in enumerate(groups):
            prefix = rows[group.members[0]][: group.prefix_length]
            prefix_ids[g, width - len(prefix) :] = torch.tensor(prefix, dtype=torch.long)
            prefix_mask[g, width - len(prefix) :] = 1
        prefix_positions = (prefix_mask.cumsum(dim=1) - 1).clamp(min=0)

        suffixes = [row[groups[g].prefix_length :] for g, row in zip(owners, members, strict=True)]
        suffix_width = max(len(s) for s in suffixes)
        suffix_ids = torch.full((len(members), suffix_width), pad_id, dtype=torch.long)
        suffix_mask = torch.zeros((len(members), suffix_width), dtype=torch.long)
        for r, suffix in enumerate(suffixes):
            suffix_ids[r, : len(suffix)] = torch.tensor(suffix, dtype=torch.long)
            suffix_mask[r, : len(suffix)] = 1
        starts = torch.tensor([groups[g].prefix_length for g in owners], dtype=torch.long)
        suffix_positions = starts[:, None] + torch.arange(suffix_width)[None, :]
        owner_index = torch.tensor(owners, dtype=torch.long)

        device = self.device
        cache = DynamicCache(config=model.config)
        # Set by _load: the name under which this model's forward() takes a key/value cache.
        cache_argument = cast(str, self._cache_argument)
        with torch.inference_mode():
            model(
                input_ids=prefix_ids.to(device),
                attention_mask=prefix_mask.to(device),
                position_ids=prefix_positions.to(device),
                use_cache=True,
                **{cache_argument: cache},
            )
            cache.reorder_cache(cast(torch.LongTensor, owner_index.to(device)))
            output = model(
                input_ids=suffix_ids.to(device),
                attention_mask=torch.cat([prefix_mask[owner_index], suffix_mask], dim=1).to(device),
                position_ids=suffix_positions.to(device),
                use_cache=True,
                **{cache_argument: cache},
            )
        self.forward_passes += 2
        self.tokens_scored += int(prefix_mask.sum()) + sum(len(s) for s in suffixes)
        return self._scores(output, len(members))

    def _scores(self, output: Any, n_rows: int) -> list[float]:
        logits = output.logits if hasattr(output, "logits") else output[0]
        logits = logits.float().reshape(n_rows, -1)
        scores = logits[:, 0] if logits.shape[1] == 1 else torch.softmax(logits, dim=-1)[:, -1]
        return [float(s) for s in scores.cpu()]

    def _use_prefix_sharing(self, rows: Sequence[Sequence[int]]) -> bool:
        """Whether shared prefixes are run once; decided on the first batch by comparing both ways."""
        if self.prefix_sharing is None and self._cache_argument is not None and len(rows) >= 2:
            self.prefix_sharing = self._prefix_sharing_agrees(rows[:2])
        return bool(self.prefix_sharing)

    def _prefix_sharing_agrees(self, rows: Sequence[Sequence[int]]) -> bool:
        counted = self.forward_passes, self.tokens_scored  # the check is not part of the scoring
        try:
            whole = [self.forward([row])[0] for row in rows]
            groups = group_by_prefix(rows, self._checkpoint_pad_id)
            shared = self.forward_shared(groups, rows)
        except Exception:  # an architecture whose forward does not take a cache this way: use whole rows
            return False
        finally:
            self.forward_passes, self.tokens_scored = counted
        order = [i for group in groups for i in group.members]
        tolerance = 1e-4 if self.dtype == torch.float32 else 5e-2
        return all(
            abs(shared[k] - whole[i]) <= tolerance * max(1.0, abs(whole[i])) for k, i in enumerate(order)
        )

    def _set_pad_id(self, rows: Sequence[Sequence[int]]) -> int:
        pad_id = self._pad_id_for(rows)
        if self._checkpoint_pad_id is None:
            _text_config(self._model).pad_token_id = pad_id
        return pad_id

    def _pad_id_for(self, rows: Sequence[Sequence[int]]) -> int:
        if self._checkpoint_pad_id is not None:
            return self._checkpoint_pad_id
        last_tokens = {r[-1] for r in rows if r}
        tok = self.tokenizer
        for candidate in (tok.pad_token_id, tok.eos_token_id, tok.bos_token_id, tok.unk_token_id, 0, 1):
            if isinstance(candidate, int) and candidate not in last_tokens:
                return candidate
        raise RuntimeError("no token id is free to pad with")  # unreachable: 0 and 1 cannot both end rows

    def _ensure_loaded(self) -> Any:
        with self._load_lock:
            if self._model is None:
                self._model = self._load()
            return self._model

    def _load(self) -> Any:
        import transformers

        transformers.utils.logging.disable_progress_bar()
        auto_class = getattr(transformers, self._plan.auto_class)
        try:
            model, info = auto_class.from_pretrained(
                str(self.folder),
                dtype=self.dtype,
                trust_remote_code=self.trust_remote_code,
                local_files_only=True,
                output_loading_info=True,
            )
        except Exception as error:  # corrupt or missing files, unknown model type, out of memory
            raise ConfigError(
                f"--provider hf:{self.ref}: cannot load the weights ({_first_line(error)})"
            ) from error
        if info.get("missing_keys"):
            missing = sorted(info["missing_keys"])
            raise ConfigError(
                f"--provider hf:{self.ref}: the checkpoint lacks weights the model needs "
                f"({', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}); it would score with random ones"
            )
        model = model.to(self.device).eval()
        text_config = _text_config(model)
        self._checkpoint_pad_id = text_config.pad_token_id
        parameters = inspect.signature(model.forward).parameters
        self._forward_extra = {"use_cache": False} if "use_cache" in parameters else {}
        # Transformers 5 calls the KV cache argument `cache`; 4.x `past_key_values`.
        cache_argument = next((n for n in ("cache", "past_key_values") if n in parameters), None)
        sliding = bool(getattr(text_config, "sliding_window", None)) and getattr(
            text_config, "use_sliding_window", True
        )
        layer_types = set(getattr(text_config, "layer_types", None) or ["full_attention"])
        if (
            self._plan.remote_code
            or sliding
            or layer_types != {"full_attention"}
            or "position_ids" not in parameters
        ):
            # Left-padded prefixes shift sliding windows, and foreign code may treat caches its own way.
            cache_argument = None
        self._cache_argument = cache_argument
        return model


def _text_config(model: Any) -> Any:
    config = model.config
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _first_line(error: BaseException) -> str:
    text = str(error).strip().split("\n")[0] or type(error).__name__
    return text if len(text) <= 160 else text[:157] + "..."
