"""Local generative judges: a Hugging Face causal LM run in-process, behind LiteLLM as a custom provider.

`--provider hf-local:<path-or-id>` resolves to the LiteLLM model id `prbj-local/<path-or-id>`; LiteLLM hands
such calls to `LocalHFLLM` (registered in `litellm.custom_provider_map` by prbj.llm.litellm_setup), so local
judges go through the same Gateway as hosted ones: cache, token accounting (cost 0), failure statuses.

Each model is loaded once per process, on its own worker thread, which also runs every generation: the event
loop stays free while the CPU works, and requests that arrive together are generated as one left-padded batch.
Generation is greedy and bounded (`max_tokens`, at most MAX_NEW_TOKENS_CAP). torch and transformers are
imported only when a model is first used (`pip install 'prbj[local]'`). A `.gguf` file (or a folder holding
one) is loaded through transformers with `gguf_file=`, which dequantises it (the `gguf` package).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import importlib.util
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prbj.errors import ConfigError

PROVIDER = "prbj-local"
MODEL_PREFIX = f"{PROVIDER}/"
DEFAULT_MAX_NEW_TOKENS = 512  # the official generative protocol's bound
MAX_NEW_TOKENS_CAP = 4096
DEFAULT_MAX_BATCH = 8
# How long the worker waits for more requests to join a batch once one has arrived.
BATCH_WINDOW_S = 0.02


@dataclass(frozen=True)
class ModelSource:
    """Where a local model comes from: a folder (or hub id) for from_pretrained, and a GGUF file in it, if any."""

    spec: str
    location: str
    gguf_file: str | None = None

    @property
    def label(self) -> str:
        return f"{self.location}/{self.gguf_file}" if self.gguf_file else self.location


def locate(path_or_id: str) -> ModelSource:
    """Resolve `hf-local:<path-or-id>`; a path that does not hold a model is a one-line configuration error."""
    if not path_or_id:
        raise ConfigError(
            "--provider hf-local:<path-or-id>: no model given (a folder, a .gguf file or a hub id)"
        )
    path = Path(path_or_id).expanduser()
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise ConfigError(
                f"--provider hf-local:{path_or_id}: a file must be a .gguf model; else give its folder"
            )
        return ModelSource(path_or_id, str(path.resolve().parent), path.name)
    if path.is_dir():
        if (path / "config.json").is_file():
            return ModelSource(path_or_id, str(path.resolve()))
        ggufs = sorted(p.name for p in path.glob("*.gguf"))
        if len(ggufs) == 1:
            return ModelSource(path_or_id, str(path.resolve()), ggufs[0])
        found = (
            f"several .gguf files ({', '.join(ggufs)}): name one" if ggufs else "no config.json or .gguf file"
        )
        raise ConfigError(f"--provider hf-local:{path_or_id}: {found}")
    looks_like_path = path_or_id.startswith(("/", ".", "~")) or path_or_id.count("/") != 1
    if looks_like_path:
        raise ConfigError(f"--provider hf-local:{path_or_id}: no such file or folder")
    # "owner/name": a hub id, loaded from the local hub cache (no download is attempted when offline).
    return ModelSource(path_or_id, path_or_id)


def weights_fingerprint(source: ModelSource) -> str:
    """What identifies the model's weights, for cache keys: another file at the same path must never be
    answered from the cache. A GGUF file is hashed alone, a folder file by file, a hub id by its snapshot."""
    from prbj.local.model_files import model_fingerprint

    if source.gguf_file is not None:
        digest = hashlib.sha256()
        with (Path(source.location) / source.gguf_file).open("rb") as handle:
            while chunk := handle.read(1 << 24):
                digest.update(chunk)
        return f"sha256:{digest.hexdigest()}"
    folder = Path(source.location)
    if not folder.is_dir():
        try:
            from huggingface_hub import snapshot_download

            folder = Path(snapshot_download(source.location, local_files_only=True))
        except Exception:
            return f"hub:{source.location}"  # not in the local cache: loading will say so
    return model_fingerprint(folder)


def check_installed() -> None:
    missing = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"local models need {' and '.join(missing)}: pip install torch==2.13.0 && pip install 'prbj[local]'"
        )


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop" (end of sequence) or "length" (hit max_new_tokens)


@dataclass
class _Job:
    messages: list[dict[str, str]]
    max_new_tokens: int
    future: concurrent.futures.Future[Generation] = field(default_factory=concurrent.futures.Future)


class LoadError(RuntimeError):
    """The model could not be loaded; every request for it fails with this message."""


class LocalGenerator:
    """One model, loaded and run on one worker thread; concurrent requests are generated in batches."""

    def __init__(self, source: ModelSource, *, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        self.source = source
        self.max_batch = max_batch
        self.batch_sizes: list[int] = []  # what the worker ran, for tests and benchmarks
        self._jobs: queue.Queue[_Job] = queue.Queue()
        self._load_error: str | None = None
        self._thread = threading.Thread(target=self._serve, name=f"prbj-local:{source.label}", daemon=True)
        self._thread.start()

    def submit(
        self, messages: Sequence[Mapping[str, str]], max_new_tokens: int
    ) -> concurrent.futures.Future[Generation]:
        job = _Job([{"role": m["role"], "content": m["content"]} for m in messages], max_new_tokens)
        self._jobs.put(job)
        return job.future

    # --- worker thread ---------------------------------------------------------------------------------
    def _serve(self) -> None:
        try:
            self._load()
        except Exception as err:  # reported to every request: a broken model must not hang the run
            self._load_error = f"cannot load local model {self.source.label}: {type(err).__name__}: {err}"
        while True:
            batch = [self._jobs.get()]
            deadline = time.monotonic() + BATCH_WINDOW_S
            while len(batch) < self.max_batch:
                try:
                    batch.append(self._jobs.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
            live = [job for job in batch if job.future.set_running_or_notify_cancel()]
            if not live:
                continue
            if self._load_error is not None:
                for job in live:
                    job.future.set_exception(LoadError(self._load_error))
                continue
            # A prompt that cannot be run (too long, untokenisable) fails alone, not the batch it arrived in.
            prepared: list[tuple[_Job, list[int]]] = []
            for job in live:
                try:
                    prepared.append((job, self._checked_prompt(job)))
                except Exception as err:
                    job.future.set_exception(err)
            if not prepared:
                continue
            try:
                results = self._generate(prepared)
            except Exception as err:
                for job, _ in prepared:
                    job.future.set_exception(err)
                continue
            for (job, _), result in zip(prepared, results, strict=True):
                job.future.set_result(result)

    def _load(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        kwargs: dict[str, Any] = {"gguf_file": self.source.gguf_file} if self.source.gguf_file else {}
        if Path(self.source.location).is_dir():
            # A local folder lacking a file must fail at once, not after minutes of hub retries.
            kwargs["local_files_only"] = True
        self.tokenizer = AutoTokenizer.from_pretrained(self.source.location, **kwargs)
        self.model = AutoModelForCausalLM.from_pretrained(self.source.location, dtype=torch.float32, **kwargs)
        self.model.eval()
        self._torch = torch
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_ids = {eos} if isinstance(eos, int) else set(eos or ())
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (min(self.eos_ids) if self.eos_ids else 0)
        self.context_limit = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of the conversation, tokenised once through the chat template (re-tokenising templated
        text would add a second BOS); a model without a template gets a plain role-labelled transcript."""
        if getattr(self.tokenizer, "chat_template", None):
            try:
                return _ids(
                    self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
                )
            except Exception:
                # Some templates refuse a system turn: fold it into the first user turn.
                return _ids(
                    self.tokenizer.apply_chat_template(
                        _without_system(messages), add_generation_prompt=True, tokenize=True
                    )
                )
        transcript = "".join(f"{m['role'].capitalize()}: {m['content']}\n\n" for m in messages) + "Assistant:"
        return list(self.tokenizer(transcript, add_special_tokens=True)["input_ids"])

    def _checked_prompt(self, job: _Job) -> list[int]:
        ids = self.prompt_ids(job.messages)
        if self.context_limit and len(ids) + job.max_new_tokens > self.context_limit:
            raise ValueError(
                f"prompt of {len(ids)} tokens + {job.max_new_tokens} new tokens exceeds the model's "
                f"context of {self.context_limit}"
            )
        return ids

    def _generate(self, prepared: list[tuple[_Job, list[int]]]) -> list[Generation]:
        torch = self._torch
        jobs = [job for job, _ in prepared]
        prompts = [ids for _, ids in prepared]
        budget = max(job.max_new_tokens for job in jobs)
        width = max(len(ids) for ids in prompts)
        # Left padding: every prompt ends at the same column, so generation continues all rows at once.
        input_ids = torch.tensor([[self.pad_id] * (width - len(ids)) + ids for ids in prompts])
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts])
        with torch.inference_mode():
            output = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                max_new_tokens=budget,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=self.pad_id,
            )
        self.batch_sizes.append(len(jobs))
        results = []
        for row, ids, job in zip(output[:, width:].tolist(), prompts, jobs, strict=True):
            new = row[: job.max_new_tokens]
            stop = next((i for i, token in enumerate(new) if token in self.eos_ids), None)
            kept = new if stop is None else new[:stop]
            results.append(
                Generation(
                    text=self.tokenizer.decode(kept, skip_special_tokens=True),
                    prompt_tokens=len(ids),
                    completion_tokens=len(kept) + (stop is not None),
                    finish_reason="length" if stop is None else "stop",
                )
            )
        return results


def _ids(encoded: Any) -> list[int]:
    if isinstance(encoded, Mapping) or hasattr(encoded, "keys"):
        encoded = encoded["input_ids"]
    if encoded and isinstance(encoded[0], list):
        encoded = encoded[0]
    return [int(token) for token in encoded]


def _without_system(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if system and rest and rest[0]["role"] == "user":
        rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
    return rest


_generators: dict[str, LocalGenerator] = {}
_generators_lock = threading.Lock()


def generator_for(path_or_id: str) -> LocalGenerator:
    """The process-wide generator of a model: loaded once, shared by every run and event loop."""
    with _generators_lock:
        found = _generators.get(path_or_id)
        if found is None:
            found = _generators[path_or_id] = LocalGenerator(locate(path_or_id))
        return found


def max_new_tokens(params: Mapping[str, Any]) -> int:
    requested = params.get("max_tokens") or params.get("max_completion_tokens") or DEFAULT_MAX_NEW_TOKENS
    return max(1, min(int(requested), MAX_NEW_TOKENS_CAP))


def make_handler(module: Any) -> Any:
    """The LiteLLM custom provider, built from the already imported LiteLLM `module` (importing it takes
    seconds, so this module does not)."""
    from litellm.llms.custom_llm import CustomLLMError

    class LocalHFLLM(module.CustomLLM):  # type: ignore[misc,name-defined]
        """Answers `prbj-local/<path-or-id>` chat completions with a local HF model."""

        async def acompletion(
            self, model: str, messages: list[dict[str, Any]], *args: Any, **kwargs: Any
        ) -> Any:
            params = kwargs.get("optional_params") or {}
            try:
                future = generator_for(model).submit(_plain(messages), max_new_tokens(params))
                generated = await asyncio.wrap_future(future)
            except (ConfigError, LoadError, ValueError) as err:
                # 400: LiteLLM raises BadRequestError, which prbj does not retry (it would fail the same way).
                raise CustomLLMError(status_code=400, message=str(err)) from err
            response = kwargs["model_response"]
            response.model = model
            response.choices[0].message.content = generated.text
            response.choices[0].finish_reason = generated.finish_reason
            response.usage = module.Usage(
                prompt_tokens=generated.prompt_tokens,
                completion_tokens=generated.completion_tokens,
                total_tokens=generated.prompt_tokens + generated.completion_tokens,
            )
            return response

        def completion(self, model: str, messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
            return asyncio.run(self.acompletion(model, messages, *args, **kwargs))

    return LocalHFLLM()


def _plain(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Chat messages with text content only (LiteLLM may hand over content as a list of parts)."""
    plain = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        plain.append({"role": str(message["role"]), "content": str(content or "")})
    return plain


def register(module: Any) -> None:
    """Add the local provider to LiteLLM's custom provider map (once)."""
    if any(item.get("provider") == PROVIDER for item in module.custom_provider_map):
        return
    module.custom_provider_map = [
        *module.custom_provider_map,
        {"provider": PROVIDER, "custom_handler": make_handler(module)},
    ]
