"""A Python reward model at work in a run: requests from every judgment in flight gathered into batches (the
local models' one batcher, prbj.local.batcher), looked up in the run's cache, the misses scored on the model's
worker thread (or its Ray actors) in calls of at most `batch_size` items, the answers stored.

A request is everything one judgment needs from the model (a pair's two answers, or the orders it is shown in);
each item is one cache entry, keyed by all the model is given for it: a rerun asks the model nothing it answered
before (whatever other items it comes with), and a failure is never stored. The cache is the gateway's, reached
in bulk (ResponseCache.get_many, store_many_soon): one query per batch of lookups and one statement per batch of
answers, so a fast model is not held back by the disk.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prbj.llm.cache import ResponseCache
from prbj.local.batcher import Emit, MicroBatcher, WorkerThread
from prbj.local.rm_host import Item, Method, Outcome, RMFailure, RMHost
from prbj.local.rm_loader import LoadedRM

# Items per call of the model unless --batch-size says otherwise.
DEFAULT_BATCH_SIZE = 64
# Answers handed to the cache at once (at the latest at the end of each batch): one transaction for many rows is
# far cheaper per row than one for a few (a commit costs as much as a few hundred rows).
STORE_EVERY = 1024
# Values the runtime remembers until the cache surely holds them (they are committed within milliseconds).
RECENT_ITEMS = 65_536
# Model calls quicker than this run on the event loop (see RMRuntime._fast).
INLINE_BELOW_SECONDS = 0.002
# The name of an item's value in its cache entry.
VALUE = "value"

Deliver = Callable[[int, Outcome], None]


@dataclass(slots=True)
class RMRequest:
    """The items one judgment needs (a pair's two answers, or the orders it is shown in), each with its key."""

    method: Method
    keys: tuple[str, ...]
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
    """The model in this process: calls of at most `batch_size` items, one method at a time."""

    def __init__(self, host: RMHost, batch_size: int) -> None:
        self.host = host
        self.batch_size = batch_size
        # How long the slowest call of the last batch took (None before the first).
        self.slowest: float | None = None

    def run(self, work: Sequence[tuple[Method, Item]], deliver: Deliver, stop: threading.Event) -> None:
        slowest = 0.0
        for method in dict.fromkeys(m for m, _ in work):
            indexes = [i for i, (m, _) in enumerate(work) if m == method]
            for start in range(0, len(indexes), self.batch_size):
                if stop.is_set():
                    return
                chunk = indexes[start : start + self.batch_size]
                began = time.perf_counter()
                outcomes = self.host.run(method, [work[i][1] for i in chunk], stop)
                slowest = max(slowest, time.perf_counter() - began)
                for index, outcome in zip(chunk, outcomes, strict=True):
                    deliver(index, outcome)
        self.slowest = slowest


def cached_value(entry: Any, method: Method) -> float | None:
    """A stored item's value when it is one finite number (a probability for `prefer`); None otherwise, and the
    item is computed again (the cache folder is input, never trusted)."""
    value = entry.get(VALUE) if isinstance(entry, dict) else None
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return None
    if method == "prefer" and not 0.0 <= value <= 1.0:
        return None
    return float(value)


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
        # Where its calls run: given (this process, or Ray actors: LocalModels.python_rm_runner), else here.
        self.runner: Runner = runner or LocalRunner(RMHost(loaded.instance, loaded.label), batch_size)
        self.batcher: MicroBatcher[RMRequest, RMResult] = MicroBatcher(
            self._batch, WorkerThread(f"prbj-py:{loaded.label}"), inline=self._fast
        )
        # Values computed lately, by key: a request that asks again before the cache has committed them (a
        # served trainer's next call) is answered from here. Bounded: emptied when full.
        self._recent: dict[str, dict[str, Any]] = {}
        # Items answered by the model and from the cache, in this run.
        self.computed = 0
        self.hits = 0
        # A batch whose model calls are this quick is cheaper to run on the event loop than to hand to the worker
        # thread and back (two thread switches; the loop stalls for at most that long).
        self.inline_below = INLINE_BELOW_SECONDS

    def submit(self, request: RMRequest) -> asyncio.Future[RMResult]:
        return self.batcher.submit(request)

    def _fast(self) -> bool:
        """Whether the next batch runs on the event loop: a model in this process whose calls took less than
        `inline_below` seconds each last time (the first batch, and a slow model's, go to the worker thread)."""
        runner = self.runner
        return (
            isinstance(runner, LocalRunner)
            and runner.slowest is not None
            and runner.slowest < self.inline_below
        )

    def _batch(self, requests: list[RMRequest], emit: Emit, stop: threading.Event) -> None:
        """On the worker thread: every request answered, each item from the cache or by the model (an item asked
        for twice, once)."""
        keys = list(dict.fromkeys(key for request in requests for key in request.keys))
        found = self.cache.get_many(keys) if self.cache is not None else {}
        # What this run computed lately: its stores may still wait in the cache's queue.
        found.update((key, self._recent[key]) for key in keys if key in self._recent)
        values: dict[str, Outcome] = {}
        # Items to compute: (method, item) by key, and the requests that wait for each key.
        work: dict[str, tuple[Method, Item]] = {}
        waiting: dict[str, list[int]] = {}
        missing = [0] * len(requests)
        for index, request in enumerate(requests):
            for key, item in zip(request.keys, request.items, strict=True):
                value = cached_value(found[key], request.method) if key in found else None
                if value is not None:
                    values[key] = value
                    continue
                work.setdefault(key, (request.method, item))
                waiting.setdefault(key, []).append(index)
                missing[index] += 1
            if not missing[index]:
                self.hits += len(request.items)
                emit(index, self._result(request, values, cached=True))
        if not work:
            return
        order = list(work)
        unstored: list[tuple[str, dict[str, Any]]] = []

        def deliver(position: int, outcome: Outcome) -> None:
            key = order[position]
            values[key] = outcome
            self.computed += 1
            if not isinstance(outcome, RMFailure):
                entry = {VALUE: outcome}
                unstored.append((key, entry))
                if len(self._recent) >= RECENT_ITEMS:
                    self._recent.clear()
                self._recent[key] = entry
                if len(unstored) >= STORE_EVERY:
                    self._store(unstored)
            for index in waiting[key]:
                missing[index] -= 1
                if not missing[index]:
                    emit(index, self._result(requests[index], values, cached=False))

        self.runner.run([work[key] for key in order], deliver, stop)
        self._store(unstored)

    @staticmethod
    def _result(request: RMRequest, values: dict[str, Outcome], *, cached: bool) -> RMResult:
        return RMResult(tuple(values[key] for key in request.keys), cached=cached)

    def _store(self, entries: list[tuple[str, dict[str, Any]]]) -> None:
        if self.cache is not None and entries:
            self.cache.store_many_soon(list(entries))
        entries.clear()
