"""A Python reward model at work in a run: requests from every judgment in flight gathered into batches (the
local models' one batcher, prbj.local.batcher), looked up in the run's cache, the misses scored on the model's
worker thread (or its Ray actors) in calls of at most `batch_size` items, the answers stored.

A request is everything one judgment needs from the model (a pair's two answers, or the orders it is shown in);
each item is one cache entry, keyed by all the model is given for it: a rerun asks the model nothing it answered
before (whatever other items it comes with), and a failure is never stored. The entries are the cache folder's
table of numbers (prbj.llm.score_table), reached in bulk: one query per batch of lookups and one statement per
batch of answers, so a fast model is not held back by the disk.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

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
# Bumped when what a cached value of a Python reward model means changes.
PY_KEY_VERSION = 1

Deliver = Callable[[int, Outcome], None]


@dataclass(slots=True)
class RMRequest:
    """The items one judgment needs (a pair's two answers, or the orders it is shown in), each with its key."""

    method: Method
    keys: tuple[bytes, ...]
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


class RMRuntime:
    """One reward model instance of a run, with its worker thread, batcher and cache access."""

    def __init__(
        self,
        loaded: LoadedRM,
        *,
        cache: ResponseCache | None,
        runner: Runner,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        self.loaded = loaded
        self.cache = cache
        self.batch_size = batch_size
        # The model's identity (file hash, version, NAME) as one digest: the start of every key of its items.
        self.model_digest = hashlib.sha256(
            json.dumps([PY_KEY_VERSION, loaded.identity()], sort_keys=True).encode()
        ).digest()
        # Whether items are looked up in the cache. Not while it holds no answer of this model (a changed model's
        # first run asks the disk nothing): asked again before each batch until this runtime stores its first
        # answer (another process's, stored meanwhile, are then found). After that, what the cache holds of the
        # model is what this runtime stored, all of it remembered in _recent, until _recent overflows.
        self._look_up = False
        self._stored_any = False
        # Where its calls run: this process, or Ray actors (LocalModels.python_rm_runner).
        self.runner = runner
        self.batcher: MicroBatcher[RMRequest, RMResult] = MicroBatcher(
            self._batch,
            WorkerThread(f"prbj-py:{loaded.label}"),
            inline=self._fast,
            first=self._answer_known,
        )
        # Values computed lately, by key: a request that asks again before the cache has committed them (a
        # served trainer's next call) is answered from here. Bounded: emptied when full.
        self._recent: dict[bytes, float] = {}
        # What _answer_known found for the batch about to run (items of requests it could not answer whole).
        self._found: dict[bytes, Outcome] = {}
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

    def _answer_known(self, requests: list[RMRequest], emit: Emit) -> list[int]:
        """On the event loop, before each batch: every request whose items the cache (or this run) holds is
        answered; the others are left for _batch, with what was found for some of their items. A read in the
        cache's file (WAL: it never waits for a writer) costs the loop less than two thread switches."""
        found = self._known(requests)
        if not found:
            return list(range(len(requests)))
        left = []
        for index, request in enumerate(requests):
            keys = request.keys
            if all(map(found.__contains__, keys)):
                self.hits += len(keys)
                emit(index, RMResult(tuple([found[key] for key in keys]), cached=True))
            else:
                left.append(index)
        if left:
            self._found = found
        return left

    def _batch(self, requests: list[RMRequest], emit: Emit, stop: threading.Event) -> None:
        """On the worker thread (or the event loop), after _answer_known: each request's items computed by the
        model (an item asked for twice, once), save those found already."""
        values, self._found = self._found, {}
        # The items to compute, each once however many requests hold it, and the requests that wait for each.
        keys: list[bytes] = []
        work: list[tuple[Method, Item]] = []
        waiting: list[list[int]] = []
        position_of: dict[bytes, int] = {}
        missing = [0] * len(requests)
        for index, request in enumerate(requests):
            method = request.method
            for key, item in zip(request.keys, request.items, strict=True):
                if key in values:
                    continue
                position = position_of.get(key)
                if position is None:
                    position_of[key] = len(keys)
                    keys.append(key)
                    work.append((method, item))
                    waiting.append([index])
                else:
                    waiting[position].append(index)
                missing[index] += 1
            if not missing[index]:  # found whole meanwhile (_answer_known leaves none such)
                emit(index, RMResult(tuple([values[key] for key in request.keys]), cached=True))
        unstored: list[tuple[bytes, float]] = []
        recent = self._recent
        # Requests still waiting for an item. The rows computed are handed to the cache before the last of them is
        # answered: once every answer is out, the run may close the cache at once, and rows handed over after the
        # close would be lost (the next run would compute them again).
        open_requests = sum(1 for m in missing if m)

        def deliver(position: int, outcome: Outcome) -> None:
            nonlocal open_requests
            key = keys[position]
            values[key] = outcome
            self.computed += 1
            if not isinstance(outcome, RMFailure):
                # Remembered before any request holding it is answered: the next may ask for it at once.
                if len(recent) >= RECENT_ITEMS:
                    self._store(unstored)
                    self._forget()
                recent[key] = outcome
                unstored.append((key, outcome))
                if len(unstored) >= STORE_EVERY:
                    self._store(unstored)
            for index in waiting[position]:
                missing[index] -= 1
                if not missing[index]:
                    open_requests -= 1
                    if not open_requests:
                        self._store(unstored)
                    done = requests[index]
                    emit(index, RMResult(tuple([values[k] for k in done.keys]), cached=False))

        try:
            self.runner.run(work, deliver, stop)
        finally:
            self._store(unstored)

    def _known(self, requests: list[RMRequest]) -> dict[bytes, Outcome]:
        """The values the cache, or this run lately, holds for the requests' items (a probability only where it
        lies in [0, 1]: the cache folder is input, never trusted)."""
        keys = [key for request in requests for key in request.keys]
        found: dict[bytes, Outcome] = {}
        cache = self.cache
        if cache is not None and not self._look_up and not self._stored_any:
            self._look_up = cache.holds_scores_of(self.model_digest)
        if cache is not None and self._look_up:
            found.update(cache.get_scores(keys))
        # What this run computed lately: its stores may still wait for the cache's writer.
        recent = self._recent
        if recent:
            found.update((key, recent[key]) for key in keys if key in recent)
        for request in requests:
            if request.method == "prefer":
                for key in request.keys:
                    value = found.get(key)
                    if isinstance(value, float) and not 0.0 <= value <= 1.0:
                        del found[key]
        return found

    def _store(self, rows: list[tuple[bytes, float]]) -> None:
        if rows:
            self._stored_any = True
            if self.cache is not None:
                self.cache.store_scores_soon(rows)  # taken at once: the list can be reused
            rows.clear()

    def _forget(self) -> None:
        """Empties _recent (it is full): what it held must now be found on disk, so it is committed first (once
        per RECENT_ITEMS items), and items are looked up from now on."""
        if self.cache is not None:
            self.cache.commit_scores()
        self._recent.clear()
        self._look_up = True
