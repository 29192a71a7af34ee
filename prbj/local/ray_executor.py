"""Local models in Ray actors (`--ray [auto|ADDRESS]`): the run's reward models and causal LMs spread over a
Ray cluster, the driver keeping the cache.

`RayModels` is the gateway's `local` transport, like `LocalModels`, and hands out scorers and generators with
the same interfaces; only where the forward passes run changes. The driver still asks the gateway first
(`Gateway.cached` for scores, `Gateway.call` for replies), so only cache misses reach this module; the
actors return scores and replies and never see the cache folder, and the driver stores them exactly as a
local run would. So results, cache entries and run files are those of a local run.

Each model gets `replicas` actors (data parallel: each batch of misses is cut into chunks dealt round-robin
over them), created on its first miss (a rerun served from the cache starts none). An actor that dies is
restarted by Ray (`max_restarts`) and the chunks it had not answered are sent again; a model that cannot
load fails its own requests with one message and leaves the other models running.

Ray is imported only here, and only when `--ray` is given (`pip install 'prbj[ray]'`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import sys
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from prbj.errors import ConfigError
from prbj.llm.gateway import Gateway
from prbj.local.batcher import Emit
from prbj.local.generator import Generation, LocalGenerator, _Job
from prbj.local.model_files import ModelSource
from prbj.local.models import LOCAL_TRANSPORT, ItemScore, LocalModelError, LocalModels, ScalarOptions, Scorer
from prbj.local.rm_host import Item, Method, Outcome, RMFailure, RMHost
from prbj.local.rm_loader import LoadedRM, RMSource, load
from prbj.local.rm_runtime import Deliver, LocalRunner, Runner

ENV_ADDRESS = "PRBJ_RAY_ADDRESS"
INSTALL_HINT = "--ray needs Ray: pip install 'prbj[ray]'"
# Items per task sent to an actor: small enough that results stream back (the progress bar moves) and that a
# dead actor costs little work to redo, large enough that a reward model still sees useful batches.
CHUNK_ITEMS = 32
# Ray restarts a dead actor this many times; the driver resends a chunk whose actor died as often.
MAX_RESTARTS = 3
# How often the dispatching thread looks up from waiting to notice a cancelled run.
POLL_SECONDS = 0.2
# After this long without its actors placed, a model says that it is waiting for cluster resources.
WAIT_NOTICE_SECONDS = 20.0


@dataclass(frozen=True, slots=True)
class RayOptions:
    """`--ray`, `--gpus-per-model`, `--cpus-per-model`, `--replicas`; `ray` None means no Ray at all."""

    ray: str | None = None
    gpus_per_model: float | None = None
    cpus_per_model: float = 1.0
    replicas: int = 1

    @classmethod
    def pop_from(cls, options: dict[str, Any]) -> RayOptions:
        """Take the Ray options out of a command's keyword arguments."""
        return cls(**{name: options.pop(name) for name in cls.__dataclass_fields__ if name in options})

    @contextlib.contextmanager
    def attach(self, gateway: Gateway, *, progress: bool = True) -> Iterator[RayModels | None]:
        """With `--ray`: connect to the cluster and make the run's local models Ray actors, for the block's
        duration (the actors are killed at its end). Without it: nothing."""
        if self.ray is None:
            yield None
            return
        models = RayModels(self, progress=progress)
        registered = gateway.add_transport(LOCAL_TRANSPORT, models)
        if registered is not models:
            raise ConfigError("internal: --ray must be set up before any local model is opened")
        try:
            yield models
        finally:
            models.close()


def check_installed() -> None:
    if importlib.util.find_spec("ray") is None:
        raise ConfigError(INSTALL_HINT)


def _connect(address: str) -> Any:
    """Ray, connected: to the cluster already joined by this process, else to `address` ("auto": the cluster
    this machine belongs to (RAY_ADDRESS, `ray start`), or a new one-machine cluster when there is none)."""
    check_installed()
    import ray

    if not ray.is_initialized():
        # Workers import prbj as the cluster's nodes were set up to (docs/cluster.md); a cluster started here
        # inherits this process's environment, PYTHONPATH included.
        try:
            ray.init(
                address=None if address == "auto" else address,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.ERROR,
            )
        except (ConnectionError, ValueError, RuntimeError) as err:
            raise ConfigError(f"--ray {address}: cannot connect to the Ray cluster ({err})") from None
    return ray


# --- inside an actor --------------------------------------------------------------------------------------


class ModelActor:
    """One model in one Ray actor: opened on its first task, then scoring or generating whole chunks. Only
    model files are read here; answers go back to the driver, which alone writes the cache."""

    def __init__(self, kind: str, location: str, gguf_file: str | None, options: dict[str, Any]) -> None:
        self.kind = kind
        self.location = location
        self.gguf_file = gguf_file
        self.options = options
        self._model: Any = None

    def placement(self) -> dict[str, Any]:
        import ray

        context = ray.get_runtime_context()
        gpus = context.get_accelerator_ids().get("GPU", [])
        return {"node": ray.util.get_node_ip_address(), "gpus": [str(g) for g in gpus], "pid": os.getpid()}

    def score(self, conversations: list[list[dict[str, str]]]) -> list[tuple[float, bool, int]]:
        from prbj.local.scalar_model import ScalarModel

        if self._model is None:
            self._model = ScalarModel(Path(self.location), **self.options)
        found: dict[int, tuple[float, bool, int]] = {}

        def keep(index: int, score: float, truncated: bool, tokens: int) -> None:
            found[index] = (score, truncated, tokens)

        self._model.score_conversations(conversations, keep)
        return [found[i] for i in range(len(conversations))]

    def python_rm(self, work: list[tuple[Method, Item]]) -> list[Outcome]:
        """A reward model written in Python: opened here from its source (it must be the driver's: same file
        hash and version), then every user fitted on first sight and the work scored in batches."""
        if self._model is None:
            self._model = _python_rm_host(self.options)
        outcomes: list[Outcome] = [RMFailure("api_error", "lost", "no outcome")] * len(work)

        def keep(index: int, outcome: Outcome) -> None:
            outcomes[index] = outcome

        LocalRunner(self._model, self.options["batch_size"]).run(work, keep, threading.Event())
        return outcomes

    def generate(self, requests: list[tuple[list[dict[str, str]], int]]) -> list[Generation | str]:
        if self._model is None:
            self._model = LocalGenerator(ModelSource(self.location, self.gguf_file))
        # An exception does not always pickle; its message does.
        return [
            r if isinstance(r, Generation) else f"{type(r).__name__}: {r}"
            for r in self._model.run_batch(requests)
        ]


def _python_rm_host(options: dict[str, Any]) -> RMHost:
    source = RMSource(*options["source"])
    loaded = load(source)
    if loaded.identity() != options["identity"]:
        raise ConfigError(
            f"{source.label} on this node is not the driver's (file hash or version differ): install the same code "
            "on every node"
        )
    return RMHost(loaded.instance, loaded.label)


def user_route(work: tuple[Method, Item]) -> int:
    """The actor (modulo their number) a Python reward model's item goes to: always the same for one user, so
    that each user is fitted once, by the actor that scores them."""
    return zlib.crc32(work[1].user_id.encode())


# --- on the driver ----------------------------------------------------------------------------------------


@dataclass
class _Chunk:
    indices: list[int]
    items: list[Any]
    actor: int
    sends: int = 0


@dataclass
class ActorPool:
    """The actors of one model and the dispatch of chunks to them; runs on the model's worker thread."""

    label: str
    kind: str  # the actor method: "score", "generate" or "python_rm"
    source: ModelSource
    options: dict[str, Any]
    ray_options: RayOptions
    gpus: float  # per actor; 0: a CPU actor with --cpus-per-model
    say: Callable[[str], None]
    chunk_items: int = CHUNK_ITEMS
    # Which actor an item must go to (modulo the actors' number); None: chunks dealt round-robin.
    route: Callable[[Any], int] | None = None
    actors: list[Any] = field(default_factory=list)
    items_sent: int = 0
    resends: int = 0
    broken: str | None = None  # why the model cannot run; every later request fails with it

    def run(self, items: Sequence[Any], emit: Emit, stop: threading.Event) -> None:
        """Answer every item through `emit(index, result)`: chunks dealt over the actors, chunks of a dead
        actor sent again (Ray restarts it), a model that cannot load failing every item with one message."""
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError, RayTaskError

        if self.broken is None and not self.actors:
            self._start()
        if self.broken is not None:
            for index in range(len(items)):
                emit(index, LocalModelError(self.broken))
            return
        chunks = self._chunks(items)
        for chunk in chunks:
            chunk.items = [items[i] for i in chunk.indices]
        waiting: dict[Any, _Chunk] = {}
        for chunk in chunks:
            waiting[self._send(chunk)] = chunk
        while waiting and not stop.is_set():
            if self.broken is not None:
                for chunk in waiting.values():
                    for index in chunk.indices:
                        emit(index, LocalModelError(self.broken))
                return
            ready, _ = ray.wait(list(waiting), num_returns=1, timeout=POLL_SECONDS)
            for ref in ready:
                chunk = waiting.pop(ref)
                try:
                    results = ray.get(ref)
                except (RayActorError, ActorUnavailableError) as err:
                    if chunk.sends > MAX_RESTARTS:
                        self._fail(f"its actor died {chunk.sends} times ({_last_line(err)})")
                        waiting[ref] = chunk
                        continue
                    self.resends += 1
                    waiting[self._send(chunk)] = chunk
                    continue
                except RayTaskError as err:
                    self._fail(_last_line(err.cause if err.cause is not None else err))
                    waiting[ref] = chunk
                    continue
                for index, result in zip(chunk.indices, results, strict=True):
                    emit(index, self._decode(result))
        if stop.is_set():
            for ref in waiting:
                with contextlib.suppress(Exception):
                    ray.cancel(ref)

    def _chunks(self, items: Sequence[Any]) -> list[_Chunk]:
        size, actors = self.chunk_items, len(self.actors)
        if self.route is None:
            return [
                _Chunk(list(range(start, min(start + size, len(items)))), [], actor=n % actors)
                for n, start in enumerate(range(0, len(items), size))
            ]
        by_actor: dict[int, list[int]] = {}
        for index, item in enumerate(items):
            by_actor.setdefault(self.route(item) % actors, []).append(index)
        return [
            _Chunk(indices[start : start + size], [], actor=actor)
            for actor, indices in sorted(by_actor.items())
            for start in range(0, len(indices), size)
        ]

    def _send(self, chunk: _Chunk) -> Any:
        chunk.sends += 1
        self.items_sent += len(chunk.items)
        method = getattr(self.actors[chunk.actor], self.kind)
        return method.remote(chunk.items)

    def _fail(self, why: str) -> None:
        if self.broken is None:
            self.broken = f"cannot run {self.label} on Ray: {why}"
            self.say(f"ray: {self.broken}")

    def _decode(self, result: Any) -> Any:
        if self.kind == "python_rm":
            return result
        if self.kind == "score":
            score, truncated, tokens = result
            return ItemScore(float(score), bool(truncated), int(tokens))
        return result if isinstance(result, Generation) else LocalModelError(result)

    def _start(self) -> None:
        import ray

        for replica in range(self.ray_options.replicas):
            actor_class = ray.remote(ModelActor).options(
                num_gpus=self.gpus,
                num_cpus=0 if self.gpus else self.ray_options.cpus_per_model,
                max_restarts=MAX_RESTARTS,
                max_task_retries=0,  # the driver resends, and so knows what was resent
                name=f"prbj-{os.getpid()}-{id(self):x}-{replica}",
            )
            self.actors.append(
                actor_class.remote(self.kind, self.source.location, self.source.gguf_file, self.options)
            )
        asked = [actor.placement.remote() for actor in self.actors]
        _, pending = ray.wait(asked, num_returns=len(asked), timeout=WAIT_NOTICE_SECONDS)
        if pending:
            # Not an error: an autoscaling cluster may add the node; a fixed one never will, hence the line.
            need = f"{self.gpus:g} GPU" if self.gpus else f"{self.ray_options.cpus_per_model:g} CPU"
            self.say(f"ray: {self.label} waits for a free {need} per actor (see --cpus-per-model)")
        where = ray.get(asked)
        placed = ", ".join(
            f"{p['node']} " + (f"GPU {','.join(p['gpus'])}" if p["gpus"] else "CPU") for p in where
        )
        self.say(f"ray: {self.label} on {len(self.actors)} actor{'s' * (len(self.actors) > 1)}: {placed}")

    def close(self) -> None:
        import ray

        for actor in self.actors:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        self.actors.clear()


class RayScorer(Scorer):
    """A reward model whose batches of misses are scored by its actors. `model` is a driver-side view (config
    and tokenizer, never weights) that describes the model and builds its cache keys as the actors run it."""

    def __init__(self, model: Any, pool: ActorPool) -> None:
        self.pool = pool
        super().__init__(model)

    def _score_batch(self, conversations: list[Any], emit: Emit, stop: threading.Event) -> None:
        self.pool.run(conversations, emit, stop)


class RayGenerator(LocalGenerator):
    """A causal LM whose batches of requests are generated by its actors; nothing is loaded on the driver."""

    def __init__(self, source: ModelSource, pool: ActorPool) -> None:
        self.pool = pool
        super().__init__(source)

    def _run_batch(self, jobs: list[_Job], emit: Emit, stop: threading.Event) -> None:
        self.pool.run([(job.messages, job.max_new_tokens) for job in jobs], emit, stop)


class RayRunner:
    """A Python reward model's calls in its Ray actors: each user's items always to the same actor."""

    def __init__(self, pool: ActorPool) -> None:
        self.pool = pool

    def run(self, work: Sequence[tuple[Method, Item]], deliver: Deliver, stop: threading.Event) -> None:
        def emit(index: int, result: Any) -> None:
            if isinstance(result, BaseException):
                deliver(index, RMFailure("api_error", "cannot run on Ray", str(result)))
            else:
                deliver(index, result)

        self.pool.run(work, emit, stop)


class RayModels(LocalModels):
    """The gateway's `local` transport when the run has `--ray`: every model it opens runs in Ray actors."""

    def __init__(self, options: RayOptions, *, progress: bool = True) -> None:
        super().__init__()
        self.options = options
        self.progress = progress
        self.pools: list[ActorPool] = []
        check_installed()
        self._connected: Any = None

    @property
    def _ray(self) -> Any:
        """Ray, connected when the run opens its first model: a model given wrong (no such folder) is then one
        line at once, before a one-machine cluster is started for nothing (~10 s)."""
        if self._connected is None:
            self._connected = _connect(self.options.ray or "auto")
        return self._connected

    def say(self, line: str) -> None:
        if self.progress:
            print(line, file=sys.stderr, flush=True)

    @property
    def items_sent(self) -> int:
        return sum(pool.items_sent for pool in self.pools)

    def _pool(
        self, label: str, kind: str, source: ModelSource, options: dict[str, Any], gpus: float
    ) -> ActorPool:
        _ = self._ray  # the actors need the cluster
        pool = ActorPool(label, kind, source, options, self.options, gpus, self.say)
        self.pools.append(pool)
        return pool

    def _new_generator(self, source: ModelSource) -> LocalGenerator:
        # The causal-LM generator runs on the CPU (prbj.local.generator), so its actors are CPU actors.
        return RayGenerator(source, self._pool(f"hf-local:{source.label}", "generate", source, {}, 0.0))

    def _new_scorer(self, folder: Path, ref: str, options: ScalarOptions) -> Scorer:
        from prbj.local.scalar_model import ScalarModel, default_batch_tokens

        gpus = self._gpus(options.device)
        device = "cuda" if gpus else "cpu"
        dtype = options.dtype if options.dtype != "auto" else ("bf16" if device == "cuda" else "fp32")
        # ScalarModel's keyword arguments (ScalarOptions' fields), with device, dtype and batch size settled here.
        actor_options: dict[str, Any] = {
            **asdict(options),
            "ref": ref,
            "dtype": dtype,
            "device": device,
            "batch_tokens": options.batch_tokens or default_batch_tokens(device),
        }
        # The view is opened on the CPU (the driver may have no GPU) and then says where the actors run, so
        # that what run.json records and what the cache keys hold match the actors' forward passes.
        view = ScalarModel(folder, **{**actor_options, "device": "cpu"})
        view.device = device
        pool = self._pool(f"hf:{ref}", "score", ModelSource(str(folder)), actor_options, gpus)
        return RayScorer(view, pool)

    def open_python_rm(self, source: RMSource) -> LoadedRM:
        # A class is not instantiated on the driver (its actors do that); a factory is called to read its version.
        return load(source, instantiate=False)

    def python_rm_runner(self, loaded: LoadedRM, batch_size: int) -> Runner:
        source = loaded.source
        options = {
            "source": (source.spec, source.kind, source.target, source.attribute),
            "identity": loaded.identity(),
            "batch_size": batch_size,
        }
        pool = self._pool(loaded.label, "python_rm", ModelSource(source.target), options, self._gpus("auto"))
        pool.chunk_items = batch_size
        pool.route = user_route
        return RayRunner(pool)

    def _gpus(self, device: str) -> float:
        """GPUs per reward-model actor: --gpus-per-model, else one when the cluster has any; none for --device
        cpu."""
        if device == "cpu":
            return 0.0
        gpus = self.options.gpus_per_model
        if gpus is None:
            gpus = 1.0 if self._ray.cluster_resources().get("GPU", 0) > 0 else 0.0
        if device == "cuda" and not gpus:
            raise ConfigError(
                "--device cuda with --ray: no GPU for the model (the cluster has none, or --gpus-per-model 0)"
            )
        return gpus

    def close(self) -> None:
        for pool in self.pools:
            if pool.actors:
                self.say(
                    f"ray: {pool.label}: {pool.items_sent} items sent to {len(pool.actors)} "
                    f"actor{'s' * (len(pool.actors) > 1)}, {pool.resends} chunks resent"
                )
            else:
                self.say(f"ray: {pool.label}: nothing sent (every answer came from the cache)")
            pool.close()


def _last_line(error: BaseException) -> str:
    """The last non-blank line of the error: a Ray error's own message comes after the remote traceback."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[-1] if lines else type(error).__name__
    return text if len(text) <= 200 else text[:197] + "..."
