"""Run many awaitable jobs with bounded concurrency and a progress bar; results come back in job order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

T = TypeVar("T")


async def run_jobs(
    jobs: Sequence[Callable[[], Awaitable[T]]],
    *,
    concurrency: int = 16,
    description: str = "judging",
    console: Console | None = None,
    show_progress: bool = True,
) -> list[T]:
    """Await every job, at most `concurrency` at a time. On cancellation (Ctrl-C) the jobs still running are
    cancelled; whatever they already stored (the cache) stays, so a rerun picks up from there."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    results: list[T | None] = [None] * len(jobs)
    gate = asyncio.Semaphore(concurrency)
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console or Console(stderr=True),
        transient=True,
        disable=not show_progress,
    )

    with progress:
        bar = progress.add_task(description, total=len(jobs))

        async def run(index: int, job: Callable[[], Awaitable[T]]) -> None:
            async with gate:
                results[index] = await job()
            progress.advance(bar)

        async with asyncio.TaskGroup() as group:
            for index, job in enumerate(jobs):
                group.create_task(run(index, job))
    return results  # type: ignore[return-value]
