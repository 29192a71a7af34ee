"""`prbj batch status|cancel|collect` behind the CLI: the ledger's jobs, by run, refreshed from the provider."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.table import Table

from prbj.display.fit import FittingTable
from prbj.display.width import output_console
from prbj.errors import ConfigError
from prbj.llm.batch.ledger import SUBMITTED, SUBMITTING, JobRecord, Ledger
from prbj.llm.batch.queue import BatchQueue, elapsed
from prbj.llm.batch.wire import ENDED
from prbj.llm.cache import ResponseCache, default_cache_dir


def _records(cache_dir: Path, run: str | None) -> list[JobRecord]:
    records = [r for r in Ledger(cache_dir).records() if run is None or r.run_id == run]
    if run is not None and not records:
        raise ConfigError(f"--run {run}: no batch jobs of that run in {cache_dir / 'batches'}")
    return records


async def _refresh(queue: BatchQueue, records: list[JobRecord]) -> None:
    for record in records:
        if record.state == SUBMITTED:
            await queue.refresh(record)


def run_batch_status(cache_dir: Path | None, run: str | None) -> int:
    folder = cache_dir or default_cache_dir()
    records = _records(folder, run)
    queue = BatchQueue(None, folder, run_id="status")
    asyncio.run(_refresh(queue, records))
    table = Table(title=f"Batch jobs in {folder / 'batches'}")
    for name in ("run", "job", "provider", "provider job", "state", "done", "failed", "total", "age"):
        table.add_column(name, justify="right" if name in ("done", "failed", "total") else "left")
    for r in records:
        state = (
            r.state if not r.provider_state or r.state == SUBMITTING else f"{r.state} ({r.provider_state})"
        )
        table.add_row(
            r.run_id,
            r.job_id,
            r.provider,
            r.provider_job_id or "-",
            state,
            str(r.done),
            str(r.failed),
            str(len(r.entries)),
            elapsed(r),
        )
    output_console().print(FittingTable(table, key_columns=2))
    return 0


def run_batch_cancel(cache_dir: Path | None, run: str | None) -> int:
    folder = cache_dir or default_cache_dir()
    queue = BatchQueue(None, folder, run_id="cancel")
    records = [r for r in _records(folder, run) if r.state == SUBMITTED]

    async def cancel() -> None:
        for record in records:
            await queue.cancel(record)

    asyncio.run(cancel())
    output_console().print(
        f"cancel requested for {len(records)} job(s); answers already made are still billed and stored: "
        "`prbj batch collect` stores them, and the rest become api_error judgments a rerun buys again.",
    )
    return 0


def run_batch_collect(cache_dir: Path | None, run: str | None, wait: bool, show_progress: bool = True) -> int:
    """Store the answers of ended jobs in the cache (waiting for the rest with --wait)."""
    folder = cache_dir or default_cache_dir()
    console = output_console()
    with ResponseCache(folder) as cache:
        queue = BatchQueue(cache, folder, run_id="collect", show_progress=show_progress)
        records = [r for r in _records(folder, run) if r.open]
        unresolved = [r for r in records if r.state == SUBMITTING]

        async def collect() -> tuple[int, int, int]:
            for record in unresolved:
                found = await queue.find(record)
                if found is not None:
                    record.provider_job_id, record.state = found, SUBMITTED
                    queue.ledger.save(record)
            ready = [r for r in records if r.state == SUBMITTED]
            if wait:
                await queue.poll(ready)
            answered = failed = 0
            for record in ready:
                if not wait and (await queue.refresh(record)).phase != ENDED:
                    continue
                answers = queue.collect(record, await queue.results(record))
                answered += sum(1 for a in answers if a.completion is not None)
                failed += sum(1 for a in answers if a.completion is None)
            return answered, failed, sum(1 for r in records if r.open)

        answered, failed, still_open = asyncio.run(collect())
    console.print(
        f"stored {answered} answers in {folder}; {failed} requests failed (a rerun buys them again).",
    )
    if still_open:
        console.print(
            f"{still_open} job(s) still open: collect again later, or rerun the command that submitted them "
            "(a job whose submission was cut off is resolved there).",
        )
    return 0
