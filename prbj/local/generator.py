"""Local generative judges: a Hugging Face causal LM run in-process (`--provider hf-local:<path-or-id>`).

Requests reach a `LocalGenerator` through the gateway's `local` transport (prbj.local.models), so local judges
go through the same call path as hosted ones: cache, token accounting (cost 0), failure statuses.

A model is loaded on first use, on its own worker thread, which also runs every generation: the event loop
stays free while the CPU works. Requests that arrive together are gathered by the one micro-batcher
(prbj.local.batcher) and generated as left-padded batches of at most `max_batch`. Generation is greedy and
bounded (`max_tokens`, at most MAX_NEW_TOKENS_CAP). torch and transformers are imported only when a model is
first used (`pip install 'prbj[local]'`). A `.gguf` file (or a folder holding one) is loaded through
transformers with `gguf_file=`, which dequantises it (the `gguf` package).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prbj.llm.logprobs import TokenChoice, kept_positions
from prbj.local.batcher import Emit, MicroBatcher, WorkerThread
from prbj.local.model_files import ModelSource

# The model ids of in-process providers: `prbj-local/<folder, .gguf file or hub id>`.
MODEL_PREFIX = "prbj-local/"
DEFAULT_MAX_NEW_TOKENS = 512  # the official generative protocol's bound
MAX_NEW_TOKENS_CAP = 4096
DEFAULT_MAX_BATCH = 8


def max_new_tokens(params: Mapping[str, Any]) -> int:
    requested = params.get("max_tokens") or params.get("max_completion_tokens") or DEFAULT_MAX_NEW_TOKENS
    return max(1, min(int(requested), MAX_NEW_TOKENS_CAP))


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop" (end of sequence) or "length" (hit max_new_tokens)
    # From the model's own logits, when the request asked for log-probabilities (prbj.llm.logprobs).
    logprobs: tuple[TokenChoice, ...] | None = None


@dataclass(frozen=True)
class _Job:
    messages: list[dict[str, str]]
    max_new_tokens: int
    # Alternatives per generated position to report with their log-probabilities; 0: none asked for.
    top_logprobs: int = 0


class LoadError(RuntimeError):
    """The model could not be loaded; every request for it fails with this message."""


class LocalGenerator:
    """One model, loaded and run on one worker thread; concurrent requests are generated in batches."""

    def __init__(self, source: ModelSource, *, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        self.source = source
        self.max_batch = max_batch
        self.batch_sizes: list[int] = []  # what the worker ran, for tests and benchmarks
        self._loaded = False
        self._load_error: str | None = None
        self._batcher: MicroBatcher[_Job, Generation] = MicroBatcher(
            self._run_batch, WorkerThread(f"prbj-local:{source.label}")
        )

    def generate(
        self, messages: Sequence[Mapping[str, str]], max_new_tokens: int, *, top_logprobs: int = 0
    ) -> asyncio.Future[Generation]:
        """Queue one conversation; await the future for its reply. Submit all that are ready before awaiting."""
        plain = [{"role": m["role"], "content": m["content"]} for m in messages]
        return self._batcher.submit(_Job(plain, max_new_tokens, top_logprobs))

    def run_batch(self, requests: Sequence[tuple[list[dict[str, str]], int]]) -> list[Generation | Exception]:
        """Generate replies for (messages, max_new_tokens) requests on the calling thread, in batches of at
        most `max_batch`; a request that fails gets its exception in its place. For a caller that is itself
        a worker (a Ray actor), with no event loop to batch on."""
        results: list[Generation | Exception | None] = [None] * len(requests)

        def keep(index: int, result: Any) -> None:
            results[index] = result

        jobs = [_Job([dict(m) for m in messages], n) for messages, n in requests]
        try:
            self._run_batch(jobs, keep, threading.Event())
        except Exception as err:  # the model cannot load: every request fails with the same message
            return [err] * len(jobs)
        return [r if r is not None else RuntimeError("no reply generated") for r in results]

    # --- worker thread ---------------------------------------------------------------------------------
    def _run_batch(self, jobs: list[_Job], emit: Emit, stop: threading.Event) -> None:
        self._ensure_loaded()
        for start in range(0, len(jobs), self.max_batch):
            if stop.is_set():
                return
            # A prompt that cannot be run (too long, untokenisable) fails alone, not the batch it arrived in.
            prepared: list[tuple[int, _Job, list[int]]] = []
            for index in range(start, min(start + self.max_batch, len(jobs))):
                try:
                    prepared.append((index, jobs[index], self._checked_prompt(jobs[index])))
                except Exception as err:
                    emit(index, err)
            if not prepared:
                continue
            try:
                results: Sequence[Generation | Exception] = self._generate(
                    [(job, ids) for _, job, ids in prepared]
                )
            except Exception as err:  # fails this group only; the next one may still run
                results = [err] * len(prepared)
            for (index, _, _), result in zip(prepared, results, strict=True):
                emit(index, result)

    def _ensure_loaded(self) -> None:
        """Load once; a broken model fails every request with the same message, and is not retried."""
        if not self._loaded and self._load_error is None:
            try:
                self._load()
                self._loaded = True
            except Exception as err:
                self._load_error = f"cannot load local model {self.source.label}: {type(err).__name__}: {err}"
        if self._load_error is not None:
            raise LoadError(self._load_error)

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
        scored = any(job.top_logprobs for job in jobs)
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
                # The raw logits of every step, only when a request asked for log-probabilities: the greedy
                # choice is the same either way.
                output_logits=scored,
                return_dict_in_generate=scored,
            )
        sequences = output.sequences if scored else output
        self.batch_sizes.append(len(jobs))
        results = []
        for index, (row, ids, job) in enumerate(
            zip(sequences[:, width:].tolist(), prompts, jobs, strict=True)
        ):
            new = row[: job.max_new_tokens]
            stop = next((i for i, token in enumerate(new) if token in self.eos_ids), None)
            kept = new if stop is None else new[:stop]
            text = str(self.tokenizer.decode(kept, skip_special_tokens=True))
            results.append(
                Generation(
                    text=text,
                    prompt_tokens=len(ids),
                    completion_tokens=len(kept) + (stop is not None),
                    finish_reason="length" if stop is None else "stop",
                    logprobs=self._logprobs(output.logits, index, kept, job.top_logprobs, text)
                    if scored and job.top_logprobs
                    else None,
                )
            )
        return results

    def _logprobs(
        self, logits: Sequence[Any], row: int, generated: list[int], top: int, text: str
    ) -> tuple[TokenChoice, ...]:
        """Each generated token's log-probability and the `top` most likely tokens at its step, from the
        model's logits (log-softmax over the vocabulary), placed in the reply's text."""
        torch = self._torch
        positions = []
        for step, token in enumerate(generated):
            logprobs = torch.log_softmax(logits[step][row].float(), dim=-1)
            values, indices = torch.topk(logprobs, top)
            alternatives = [
                (self._piece(int(i)), float(v))
                for v, i in zip(values.tolist(), indices.tolist(), strict=True)
            ]
            positions.append((self._piece(token), float(logprobs[token]), alternatives))
        return tuple(kept_positions(text, positions))

    def _piece(self, token: int) -> str:
        return str(self.tokenizer.decode([token], skip_special_tokens=True))


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
