"""Run many awaitable jobs with bounded concurrency and a progress bar; results come back in job order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from rich.console import Console

from prbj.runs.progress import JobProgress, Meter

T = TypeVar("T")


async def run_jobs(
    jobs: Sequence[Callable[[], Awaitable[T]]],
    *,
    concurrency: int = 16,
    description: str = "judging",
    console: Console | None = None,
    show_progress: bool = True,
    meter: Meter | None = None,
) -> list[T]:
    """Await every job, at most `concurrency` at a time. On cancellation (Ctrl-C) the jobs still running are
    cancelled; whatever they already stored (the cache) stays, so a rerun picks up from there."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    results: list[T | None] = [None] * len(jobs)
    gate = asyncio.Semaphore(concurrency)
    progress = JobProgress(description, len(jobs), console=console, show=show_progress, meter=meter)

    async with progress:

        async def run(index: int, job: Callable[[], Awaitable[T]]) -> None:
            async with gate:
                results[index] = await job()
            progress.advance(results[index])

        async with asyncio.TaskGroup() as group:
            for index, job in enumerate(jobs):
                group.create_task(run(index, job))
    return results  # type: ignore[return-value]
