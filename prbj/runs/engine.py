"""Run many awaitable jobs with bounded concurrency and a progress display; results come back in job order.

How many jobs run at once follows what the model providers admit: `concurrency` plus the requests in flight the
providers allow at the moment (the gateway's figure, from each provider's rate limit and latency), so a fan-out
never holds a provider below its limits, and memory stays bounded by the providers' ceilings.

Ctrl-C is handled here, where the jobs are fanned out: the first stops new jobs and new requests (through the
gateway's `stop_sending`) and gives the requests already on the wire a bounded grace period to finish and be
cached, since they are paid for either way; then KeyboardInterrupt is raised (exit 130). A second Ctrl-C
cancels what is left at once.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from rich.console import Console

from prbj.llm.gateway import stop_sending
from prbj.llm.limits import Gate
from prbj.runs.collector import freeze_what_is_loaded
from prbj.runs.progress import JobProgress, Meter

T = TypeVar("T")
# How long requests already sent may take to come back after the first Ctrl-C.
GRACE_SECONDS = 10.0


async def run_jobs(
    jobs: Sequence[Callable[[], Awaitable[T]]],
    *,
    concurrency: int = 16,
    description: str = "judging",
    console: Console | None = None,
    show_progress: bool = True,
    grace_seconds: float = GRACE_SECONDS,
    meter: Meter | None = None,
    admitted: Callable[[], int] | None = None,
) -> list[T]:
    """Await every job, at most `concurrency` + `admitted()` at a time (`admitted`: the requests in flight the
    providers allow now, read again as jobs finish). On cancellation the jobs still running are cancelled;
    whatever they already stored (the cache) stays, so a rerun picks up from there."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    freeze_what_is_loaded()
    results: list[T | None] = [None] * len(jobs)
    gate = Gate(concurrency + (admitted() if admitted is not None else 0))
    console = console or Console(stderr=True)
    progress = JobProgress(description, len(jobs), console=console, show=show_progress, meter=meter)
    stopping = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    deadline: list[asyncio.TimerHandle] = []

    async def run(index: int, job: Callable[[], Awaitable[T]]) -> None:
        async with gate:
            if stopping.is_set():
                return
            results[index] = await job()
        if admitted is not None:
            gate.resize(concurrency + admitted())
        progress.advance(results[index])

    def cancel_all() -> None:
        for task in tasks:
            task.cancel()

    def on_interrupt() -> None:
        loop = asyncio.get_running_loop()
        if stopping.is_set():
            cancel_all()
            return
        stopping.set()
        console.print(
            f"interrupted: no new requests; waiting up to {grace_seconds:g} s for those on the wire to be "
            "cached (Ctrl-C again to quit now)"
        )
        deadline.append(loop.call_later(grace_seconds, cancel_all))

    token = stop_sending.set(stopping)
    handled = _handle_sigint(on_interrupt)
    try:
        async with progress, asyncio.TaskGroup() as group:
            # Created while `stop_sending` holds this run's event: every call the jobs make sees it.
            tasks.extend(group.create_task(run(index, job)) for index, job in enumerate(jobs))
    finally:
        for timer in deadline:
            timer.cancel()
        if handled:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)
        stop_sending.reset(token)
    if stopping.is_set():
        raise KeyboardInterrupt
    # Every job ran to completion (no Ctrl-C, no error), so every slot holds that job's result.
    return results  # type: ignore[return-value]


def _handle_sigint(handler: Callable[[], None]) -> bool:
    """Route SIGINT to `handler` on this loop; False where that is impossible (not the main thread, Windows),
    and Ctrl-C then keeps asyncio's default (cancel everything at once)."""
    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, handler)
    except (NotImplementedError, RuntimeError, ValueError):
        return False
    return True
