"""A Python reward model at work in a run: requests from every judgment in flight gathered into batches (the
local models' one batcher, prbj.local.batcher), looked up in the run's cache, the misses scored on the model's
worker thread (or its Ray actors) in calls of at most `batch_size` items, the answers stored.

A request is everything one judgment needs from the model (a pair's two answers, or the orders it is shown in)
and one cache entry: a rerun asks the model nothing it answered before, and a failure is never stored. The cache
is the gateway's, reached in bulk (ResponseCache.get_many, store_many_soon): one query per batch of lookups and
one statement per batch of answers, so a fast model is not held back by the disk.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prbj.llm.cache import ResponseCache
from prbj.local.batcher import Emit, MicroBatcher, WorkerThread
from prbj.local.rm_host import Item, Method, Outcome, RMFailure, RMHost
from prbj.local.rm_loader import LoadedRM

# Items per call of the model unless --batch-size says otherwise.
DEFAULT_BATCH_SIZE = 64
# The name of a request's values in its cache entry.
VALUES = "values"

Deliver = Callable[[int, Outcome], None]


@dataclass(slots=True)
class RMRequest:
    method: Method
    key: str
    items: tuple[Item, ...]


@dataclass(slots=True)
class RMResult:
    outcomes: tuple[Outcome, ...]
    # Answered from the cache without calling the model.
    cached: bool


class Runner(Protocol):
    """Where the model's calls run: this process (LocalRunner) or Ray actors (prbj.local.ray_executor)."""

    def run(self, work: Sequence[tuple[Method, Item]], deliver: Deliver, stop: threading.Event) -> None: ...


class LocalRunner:
    """The model in this process, on the runtime's worker thread: calls of at most `batch_size` items, one method
    at a time."""

    def __init__(self, host: RMHost, batch_size: int) -> None:
        self.host = host
        self.batch_size = batch_size

    def run(self, work: Sequence[tuple[Method, Item]], deliver: Deliver, stop: threading.Event) -> None:
        for method in dict.fromkeys(m for m, _ in work):
            indexes = [i for i, (m, _) in enumerate(work) if m == method]
            for start in range(0, len(indexes), self.batch_size):
                if stop.is_set():
                    return
                chunk = indexes[start : start + self.batch_size]
                outcomes = self.host.run(method, [work[i][1] for i in chunk], stop)
                for index, outcome in zip(chunk, outcomes, strict=True):
                    deliver(index, outcome)


def cached_values(entry: Any, request: RMRequest) -> tuple[float, ...] | None:
    """A stored entry's values when they fit the request (one finite number per item; a probability for
    `prefer`); None otherwise, and the request is computed again (the cache folder is input, never trusted)."""
    values = entry.get(VALUES) if isinstance(entry, dict) else None
    if not isinstance(values, list) or len(values) != len(request.items):
        return None
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        return None
    if request.method == "prefer" and not all(0.0 <= v <= 1.0 for v in values):
        return None
    return tuple(float(v) for v in values)


class RMRuntime:
    """One reward model instance of a run, with its worker thread, batcher and cache access."""

    def __init__(
        self,
        loaded: LoadedRM,
        *,
        cache: ResponseCache | None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        runner: Runner | None = None,
    ) -> None:
        self.loaded = loaded
        self.cache = cache
        self.batch_size = batch_size
        self.host = RMHost(loaded.instance, loaded.label)
        self.runner: Runner = runner or LocalRunner(self.host, batch_size)
        self.batcher: MicroBatcher[RMRequest, RMResult] = MicroBatcher(
            self._batch, WorkerThread(f"prbj-py:{loaded.label}")
        )
        # Requests answered by the model and from the cache, in this run.
        self.computed = 0
        self.hits = 0

    def submit(self, request: RMRequest) -> asyncio.Future[RMResult]:
        return self.batcher.submit(request)

    def _batch(self, requests: list[RMRequest], emit: Emit, stop: threading.Event) -> None:
        """On the worker thread: every request answered, from the cache or by the model (identical requests
        once)."""
        found = self.cache.get_many([r.key for r in requests]) if self.cache is not None else {}
        waiting: dict[str, list[int]] = {}
        for index, request in enumerate(requests):
            values = cached_values(found[request.key], request) if request.key in found else None
            if values is not None:
                self.hits += 1
                emit(index, RMResult(values, cached=True))
            else:
                waiting.setdefault(request.key, []).append(index)
        if not waiting:
            return
        # The model's work: the items of each distinct request missed, flat; where each item goes back.
        work: list[tuple[Method, Item]] = []
        slots: list[tuple[str, int]] = []
        pending: dict[str, list[Outcome | None]] = {}
        for key, indexes in waiting.items():
            request = requests[indexes[0]]
            pending[key] = [None] * len(request.items)
            for position, item in enumerate(request.items):
                work.append((request.method, item))
                slots.append((key, position))
        unstored: list[tuple[str, dict[str, Any]]] = []

        def deliver(index: int, outcome: Outcome) -> None:
            key, position = slots[index]
            outcomes = pending[key]
            outcomes[position] = outcome
            if any(o is None for o in outcomes):
                return
            done = tuple(o for o in outcomes if o is not None)
            self.computed += 1
            for waiter in waiting[key]:
                emit(waiter, RMResult(done, cached=False))
            if not any(isinstance(o, RMFailure) for o in done):
                unstored.append((key, {VALUES: list(done)}))
                if len(unstored) >= self.batch_size:
                    self._store(unstored)

        self.runner.run(work, deliver, stop)
        self._store(unstored)

    def _store(self, entries: list[tuple[str, dict[str, Any]]]) -> None:
        if self.cache is not None and entries:
            self.cache.store_many_soon(list(entries))
        entries.clear()
