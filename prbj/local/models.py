"""The in-process models of one run, owned by its gateway: causal-LM generators, scalar reward models, and where
the reward models written in Python run (prbj.local.rm_runtime).

`local_models(gateway)` registers one `LocalModels` on the gateway as its `local` transport, so that hf-local
chat requests go through the gateway's one call path (cache, accounting, statuses) and every judge of the run
that names the same model with the same options shares its loaded weights. Nothing is process-global: the
models go when the run's gateway goes. Each model has its own worker thread and micro-batcher
(prbj.local.batcher); torch is imported only when a model is first used.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prbj.errors import ConfigError
from prbj.llm.finish import LENGTH, STOP, ReplyEnd
from prbj.llm.gateway import Gateway
from prbj.llm.logprobs import asked
from prbj.llm.transport import ChatCall, Completion
from prbj.local.batcher import Emit, MicroBatcher, WorkerThread
from prbj.local.generator import MODEL_PREFIX, LoadError, LocalGenerator, max_new_tokens
from prbj.local.model_files import ModelSource, locate
from prbj.local.rm_host import RMHost
from prbj.local.rm_loader import LoadedRM, RMSource, load
from prbj.local.rm_runtime import LocalRunner, Runner

if TYPE_CHECKING:
    from prbj.local.scalar_model import Messages, ScalarModel

LOCAL_TRANSPORT = "local"


class LocalModelError(Exception):
    """A local model refused a request (it cannot load, the prompt does not fit). Carries HTTP 400 so that the
    gateway reports it as a failed call and does not retry: it would fail the same way."""

    status_code = 400


@dataclass(frozen=True, slots=True)
class ScalarOptions:
    """How local reward models are loaded and run (`prbj judge --dtype/--device/--max-length/...`); two judges
    share a loaded model only when all of these agree. Re-exported by prbj.judges.scalar."""

    dtype: str = "auto"
    device: str = "auto"
    trust_remote_code: bool = False
    max_length: int = 8192
    # Padded tokens (rows × longest row) per forward pass: bounds memory, not results. None: by device.
    batch_tokens: int | None = None
    # "chat": the message list tokenised once, middle truncation; "official": as the official scripts do it,
    # the chat formatted to text and tokenised again (a second BOS where the tokenizer adds one), right
    # truncation (`--scalar-input`).
    scalar_input: str = "chat"


@dataclass(frozen=True, slots=True)
class ItemScore:
    score: float
    truncated: bool
    tokens: int


class Scorer:
    """One reward model with its worker thread and batcher: conversations submitted together from many
    coroutines are scored as length-sorted batches."""

    def __init__(self, model: ScalarModel) -> None:
        self.model = model
        self.batcher: MicroBatcher[Messages, ItemScore] = MicroBatcher(
            self._score_batch, WorkerThread(f"prbj-scalar:{model.ref}")
        )

    def score(self, messages: Messages) -> asyncio.Future[ItemScore]:
        return self.batcher.submit(messages)

    def _score_batch(self, conversations: list[Messages], emit: Emit, stop: threading.Event) -> None:
        def on_score(index: int, score: float, truncated: bool, tokens: int) -> None:
            emit(index, ItemScore(score, truncated, tokens))

        self.model.score_conversations(conversations, on_score, stop)


class LocalModels:
    """The gateway's `local` transport and the owner of the run's loaded local models."""

    def __init__(self) -> None:
        self._generators: dict[str, LocalGenerator] = {}
        self._scorers: dict[tuple[str, ScalarOptions], Scorer] = {}

    async def send(self, call: ChatCall) -> Completion:
        try:
            generator = self.generator(call.provider.model.removeprefix(MODEL_PREFIX))
            generated = await generator.generate(
                call.messages, max_new_tokens(call.params), top_logprobs=asked(call.params)
            )
        except (ConfigError, LoadError, ValueError) as err:
            raise LocalModelError(str(err)) from err
        # A reply that hit max_new_tokens ended at its output cap, as a provider's `length`.
        end = ReplyEnd(LENGTH if generated.finish_reason == LENGTH else STOP)
        return Completion(
            generated.text,
            generated.prompt_tokens,
            generated.completion_tokens,
            logprobs=generated.logprobs,
            end=end,
        )

    def generator(self, path_or_id: str) -> LocalGenerator:
        found = self._generators.get(path_or_id)
        if found is None:
            source = locate(path_or_id, option="hf-local", gguf=True)
            found = self._generators[path_or_id] = self._new_generator(source)
        return found

    def scorer(self, folder: Path, ref: str, options: ScalarOptions) -> Scorer:
        """The reward model in `folder`, opened (config and tokenizer read, weights not yet loaded) once."""
        key = (str(folder.resolve()), options)
        found = self._scorers.get(key)
        if found is None:
            found = self._scorers[key] = self._new_scorer(folder, ref, options)
        return found

    def open_python_rm(self, source: RMSource) -> LoadedRM:
        """A reward model written in Python, instantiated here (one instance per call: per judge)."""
        return load(source)

    def python_rm_runner(self, loaded: LoadedRM, batch_size: int) -> Runner:
        """Where its calls run: here, on the runtime's worker thread."""
        return LocalRunner(RMHost(loaded.instance, loaded.label), batch_size)

    # Where the models run: here, in-process. prbj.local.ray_executor overrides these (and the two above) to run
    # them in Ray actors instead, behind the same interfaces.
    def _new_generator(self, source: ModelSource) -> LocalGenerator:
        return LocalGenerator(source)

    def _new_scorer(self, folder: Path, ref: str, options: ScalarOptions) -> Scorer:
        from prbj.local.scalar_model import ScalarModel

        # ScalarOptions' fields are ScalarModel's keyword arguments, by name.
        model = ScalarModel(folder, ref=ref, **asdict(options))
        return Scorer(model)


def local_models(gateway: Gateway) -> LocalModels:
    """The run's local models: registered on `gateway` as its `local` transport on first use."""
    found = gateway.transport(LOCAL_TRANSPORT)
    if found is None:
        found = gateway.add_transport(LOCAL_TRANSPORT, LocalModels())
    if not isinstance(found, LocalModels):
        raise ConfigError(f"internal: the gateway's {LOCAL_TRANSPORT!r} transport is not prbj's local models")
    return found
