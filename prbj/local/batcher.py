"""Gather requests that arrive concurrently into batches, and run the batches one at a time on one thread.

The engine awaits one coroutine per pair; a local model is fastest when it sees many items at once. A
`MicroBatcher` lets each coroutine submit its items and wait, while one drain task hands everything pending to
a `WorkerThread` as one batch. Items that arrive while a batch is running wait and go together in the next one,
so no timer is needed: the batch size follows the load. Results stream back per item as soon as the worker
emits them, so the progress bar moves and finished work is never held back by a slower neighbour.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from prbj.llm.futures import settle

I = TypeVar("I")  # noqa: E741 - the conventional name for an item type
R = TypeVar("R")

# How many event-loop turns without a new arrival count as "everyone who was ready has submitted". Waking a
# judge, releasing the engine's semaphore and starting the next job take a few turns each; a turn costs
# microseconds, a forward pass milliseconds or more.
QUIET_TURNS = 3

# How long an exiting process waits for the forward pass in flight.
EXIT_GRACE_SECONDS = 120.0

Emit = Callable[[int, Any], None]
BatchFn = Callable[[list[Any], Emit, threading.Event], None]
# Answers on the event loop what it can of a batch (emitting those) and returns the indexes of the items left.
FirstFn = Callable[[list[Any], Emit], list[int]]


class WorkerThread:
    """One daemon thread that runs submitted calls in order.

    One thread, because a model's forward passes do not run in parallel anyway and the model need not be
    thread-safe. A daemon, because an interrupted run must be able to exit without waiting for the forward pass
    in flight (asyncio's default executor would make Ctrl-C wait for it)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], Callable[..., None]]]
        self._queue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending = 0
        self._idle = threading.Condition()
        # A daemon killed in the middle of a torch kernel aborts the process ("terminate called without an
        # active exception"): at exit, let the call in flight finish. An interrupted batch stops after its
        # current forward pass, so the wait is one pass at most.
        atexit.register(self.wait_idle, EXIT_GRACE_SECONDS)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no call is queued or running (or `timeout` passes); whether it is idle."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def run(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Schedule `fn(*args)` on the worker; the returned future (of the running loop) gets its outcome."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def deliver(result: Any = None, error: BaseException | None = None) -> None:
            # The loop is closed when the run was interrupted; the result is then simply dropped.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, future, result, error)

        self._start()
        with self._idle:
            self._pending += 1
        self._queue.put((fn, args, deliver))
        return future

    def _start(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            fn, args, deliver = self._queue.get()
            try:
                result = fn(*args)
            except BaseException as error:  # handed to the awaiting coroutine, which re-raises it
                deliver(error=error)
            else:
                deliver(result)
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()


class MicroBatcher(Generic[I, R]):
    """Collects items submitted from coroutines and runs them in batches with `batch_fn` on `worker`.

    `batch_fn(items, emit, stop)` runs on the worker thread; it must call `emit(index, result)` once per item
    (in any order) and should return early when `stop` is set (the run was cancelled). Emitting an exception
    as the result fails that item alone (a prompt too long for the model); an exception the function raises
    fails every item of that batch that has not been emitted yet."""

    def __init__(
        self,
        batch_fn: BatchFn,
        worker: WorkerThread,
        *,
        inline: Callable[[], bool] | None = None,
        first: FirstFn | None = None,
    ) -> None:
        self._batch_fn = batch_fn
        self._worker = worker
        # Asked before each batch: run it right here on the event loop instead (a model so fast that handing the
        # batch to the worker thread and the results back would cost more than the batch itself).
        self._inline = inline
        # Run on the event loop before each batch (a lookup in a cache): what it answers never reaches the
        # worker, and a batch it answers whole costs no thread switch.
        self._first = first
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[tuple[I, asyncio.Future[R]]] = []
        self._drainer: asyncio.Task[None] | None = None
        self.batches_run = 0

    def submit(self, item: I) -> asyncio.Future[R]:
        """Queue `item`; await the returned future for its result. Submit every item of a request before
        awaiting any, so that they can share a batch."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A new asyncio.run(): whatever belonged to the old loop is gone with it.
            self._loop, self._pending, self._drainer = loop, [], None
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append((item, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = loop.create_task(self._drain())
        return future

    async def _drain(self) -> None:
        while self._pending:
            await self._wait_for_arrivals()
            batch = [(item, future) for item, future in self._pending if not future.done()]
            self._pending = []
            if batch:
                await self._run(batch)

    async def _wait_for_arrivals(self) -> None:
        quiet = 0
        while quiet < QUIET_TURNS:
            before = len(self._pending)
            await asyncio.sleep(0)
            quiet = quiet + 1 if len(self._pending) == before else 0

    async def _run(self, batch: list[tuple[I, asyncio.Future[R]]]) -> None:
        if self._first is not None:
            batch = self._answer_first(batch)
            if not batch:
                return
        loop = asyncio.get_running_loop()
        futures = [future for _, future in batch]
        stop = threading.Event()
        if self._inline is not None and self._inline():
            self._run_here(batch, futures, stop)
            return
        # Results emitted since the event loop last took them: handed over in one wake-up of the loop, not one
        # each (a fast model emits thousands a second; each wake-up is a write to the loop's self-pipe).
        ready: list[tuple[int, Any]] = []
        lock = threading.Lock()

        def hand_over() -> None:
            with lock:
                taken = ready[:]
                ready.clear()
            for index, result in taken:
                _settle_one(futures[index], result)

        def emit(index: int, result: R | BaseException) -> None:
            with lock:
                ready.append((index, result))
                if len(ready) > 1:
                    return  # a hand-over is already scheduled and will take this one too
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(hand_over)

        self.batches_run += 1
        try:
            await self._worker.run(self._batch_fn, [item for item, _ in batch], emit, stop)
        except asyncio.CancelledError:
            stop.set()
            raise
        except Exception as error:
            _fail_all(futures, error)
            return
        # Emits are queued on the loop before the batch's own completion, so they have all landed by now;
        # an item the batch function forgot must not leave its caller waiting forever.
        hand_over()
        _forgotten(futures)

    def _answer_first(self, batch: list[tuple[I, asyncio.Future[R]]]) -> list[tuple[I, asyncio.Future[R]]]:
        """The batch less what `first` answered (failing the whole batch if it raised)."""
        assert self._first is not None

        def emit(index: int, result: R | BaseException) -> None:
            _settle_one(batch[index][1], result)

        try:
            left = self._first([item for item, _ in batch], emit)
        except Exception as error:
            _fail_all([future for _, future in batch], error)
            return []
        return [batch[index] for index in left]

    def _run_here(
        self,
        batch: list[tuple[I, asyncio.Future[R]]],
        futures: list[asyncio.Future[R]],
        stop: threading.Event,
    ) -> None:
        def emit(index: int, result: R | BaseException) -> None:
            _settle_one(futures[index], result)

        self.batches_run += 1
        try:
            self._batch_fn([item for item, _ in batch], emit, stop)
        except Exception as error:
            _fail_all(futures, error)
            return
        _forgotten(futures)


def _settle_one(future: asyncio.Future[Any], result: Any) -> None:
    """One item's outcome as the batch function emitted it: its result, or the exception it failed with."""
    if isinstance(result, BaseException):
        settle(future, None, result)
    else:
        settle(future, result, None)


def _fail_all(futures: list[asyncio.Future[Any]], error: BaseException) -> None:
    """Every item of a batch whose function raised fails with that error."""
    for future in futures:
        settle(future, None, error)


def _forgotten(futures: list[asyncio.Future[Any]]) -> None:
    """An item the batch function forgot must not leave its caller waiting forever."""
    for future in futures:
        settle(future, None, RuntimeError("batch finished without a result for this item"))
