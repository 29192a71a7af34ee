"""Batch mode behind the gateway: requests the cache cannot answer are queued, then `flush` submits them as
provider batch jobs (split under each provider's limits, every job recorded in the ledger before its create call
returns), polls them with a Rich display, and stores each answer in the cache entry a live call would write.

A request already in an open job of the ledger (a run killed and started again) is never submitted again: its
job is polled instead. Failed lines (errored, expired, cancelled) are kept as reasons, so the run reports them as
`api_error`; they are bought again only by a later run (e.g. with --retry-failed).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from prbj.llm.answer import answer_value
from prbj.llm.batch import BatchSubmitted
from prbj.llm.batch.ledger import COLLECTED, SUBMITTED, SUBMITTING, Entry, JobRecord, Ledger, custom_id
from prbj.llm.batch.trouble import talking_to
from prbj.llm.batch.wire import ENDED, BatchClient, BatchLine, Outcome, family_of, split
from prbj.llm.batch.wire import Progress as JobProgress  # rich's Progress draws the display
from prbj.llm.cache import ResponseCache
from prbj.llm.prompt_cache import cache_rates
from prbj.llm.providers import ProviderSpec
from prbj.llm.transport import ChatCall, Completion

# Batch APIs sell the same calls at half the live price (OpenAI, Anthropic and Gemini alike).
BATCH_PRICE_FACTOR = 0.5
POLL_ENV = "PRBJ_BATCH_POLL_SECONDS"
DEFAULT_POLL_SECONDS = 30.0


@dataclass
class Pending:
    spec: ProviderSpec
    key: str
    call: ChatCall
    purpose: str
    reserved: float = 0.0


@dataclass(frozen=True)
class Answer:
    """One queued request's fate after a flush: an answer (stored in the cache already) or the reason none came."""

    key: str
    completion: Completion | None
    cost_usd: float
    live_cost_usd: float
    error: str | None = None
    provider_cache_saved_usd: float = 0.0


def batch_prices(spec: ProviderSpec) -> tuple[float, float]:
    """USD per input and output token in a batch job: the profile's batch prices, else half its live ones."""
    if not spec.paid:
        return 0.0, 0.0
    input_price = spec.batch_input_price
    output_price = spec.batch_output_price
    return (
        input_price if input_price is not None else (spec.input_price or 0.0) * BATCH_PRICE_FACTOR,
        output_price if output_price is not None else (spec.output_price or 0.0) * BATCH_PRICE_FACTOR,
    )


def batch_cost(spec: ProviderSpec, prompt_tokens: int, completion_tokens: int) -> float:
    input_price, output_price = batch_prices(spec)
    return prompt_tokens * input_price + completion_tokens * output_price


def default_clients() -> dict[str, BatchClient]:
    from prbj.llm.batch.anthropic_client import AnthropicBatchClient
    from prbj.llm.batch.gemini_client import GeminiBatchClient
    from prbj.llm.batch.openai_client import OpenAIBatchClient

    return {"openai": OpenAIBatchClient(), "anthropic": AnthropicBatchClient(), "gemini": GeminiBatchClient()}


class BatchQueue:
    def __init__(
        self,
        cache: ResponseCache | None,
        cache_dir: Path,
        *,
        run_id: str,
        wait: bool = True,
        clients: Mapping[str, BatchClient] | None = None,
        show_progress: bool = True,
        poll_seconds: float | None = None,
    ) -> None:
        self.cache = cache
        self.ledger = Ledger(cache_dir)
        self.run_id = run_id
        self.wait = wait
        self._clients = dict(clients) if clients is not None else None
        self.show_progress = show_progress
        self.poll_seconds = (
            poll_seconds
            if poll_seconds is not None
            else float(os.environ.get(POLL_ENV) or DEFAULT_POLL_SECONDS)
        )
        self.pending: dict[str, Pending] = {}
        # Cache key → the provider's reason its line got no answer (this run's batches).
        self.failures: dict[str, str] = {}

    def client(self, family: str) -> BatchClient:
        if self._clients is None:
            self._clients = default_clients()
        client = self._clients.get(family)
        if client is None:
            from prbj.errors import ConfigError

            raise ConfigError(
                f"--batch: no batch API for {family} models (OpenAI, Anthropic and Gemini have one)"
            )
        return client

    def enqueue(self, pending: Pending) -> None:
        """Queue `pending`; a key queued already keeps its first request (and its one reservation)."""
        self.pending.setdefault(pending.key, pending)

    # --- one flush: resolve, submit, wait, collect ---------------------------------------------------
    async def flush(self) -> list[Answer]:
        queued, self.pending = self.pending, {}
        with self.ledger.locked():
            open_records = self.ledger.open_records()
            in_flight = {key for record in open_records for key in record.keys}
            mine = [r for r in open_records if set(r.keys) & queued.keys()]
            for record in mine:
                if record.state == SUBMITTING:
                    await self._resolve(record, queued)
            # Answered since this round asked (another process collected them): nothing to buy.
            fresh = [p for key, p in queued.items() if key not in in_flight and not self._cached(key)]
            mine += await self._submit(fresh)
        if not self.wait:
            raise BatchSubmitted(self._no_wait_message(mine))
        await self.poll(mine)
        answers: list[Answer] = []
        for record in mine:
            answers += self.collect(record, await self.results(record), queued)
        return answers

    def _cached(self, key: str) -> bool:
        return self.cache is not None and self.cache.get(key) is not None

    async def _resolve(self, record: JobRecord, queued: Mapping[str, Pending]) -> None:
        """A record left `submitting` by a process that died: adopt the job if it was created, else create it."""
        client = self.client(record.family)
        found = await self.find(record)
        if found is None:
            lines = [BatchLine(custom_id(k), queued[k].call) for k in record.keys if k in queued]
            record.entries = [e for e in record.entries if e.key in queued]
            async with talking_to(record, "creating"):
                found = await client.resume_submit(record, lines, self.ledger.save)
        record.provider_job_id, record.state = found, SUBMITTED
        self.ledger.save(record)

    async def _submit(self, fresh: list[Pending]) -> list[JobRecord]:
        records: list[JobRecord] = []
        by_provider: dict[str, list[Pending]] = {}
        for pending in fresh:
            by_provider.setdefault(pending.spec.name, []).append(pending)
        for group in by_provider.values():
            spec = group[0].spec
            family = family_of(spec.model)
            client = self.client(family)
            by_id = {custom_id(p.key): p for p in group}
            lines = [BatchLine(cid, p.call) for cid, p in by_id.items()]
            input_price, output_price = batch_prices(spec)
            cache_read_price, cache_write_price = cache_rates(spec)
            for chunk in split(lines, client.limits, client.line_bytes):
                record = JobRecord.new(
                    self.run_id,
                    provider=spec.name,
                    family=family,
                    model=spec.model,
                    api_base=spec.api_base,
                    api_key_env=spec.api_key_env,
                    input_price=input_price,
                    output_price=output_price,
                    live_input_price=spec.input_price or 0.0 if spec.paid else 0.0,
                    live_output_price=spec.output_price or 0.0 if spec.paid else 0.0,
                    cache_read_price=cache_read_price,
                    cache_write_price=cache_write_price,
                    entries=[
                        Entry(by_id[line.custom_id].key, by_id[line.custom_id].purpose) for line in chunk
                    ],
                )
                # Durable before the create call leaves: a crash (or a refused create) from here on leaves a
                # record to resolve.
                self.ledger.save(record)
                async with talking_to(record, "creating"):
                    record.provider_job_id = await client.submit(record, chunk, self.ledger.save)
                record.state = SUBMITTED
                self.ledger.save(record)
                records.append(record)
        return records

    async def poll(self, records: list[JobRecord]) -> None:
        console = Console(stderr=True)
        columns = (
            TextColumn("{task.description}"),
            TextColumn("[cyan]{task.fields[state]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        waiting = [r for r in records if r.state == SUBMITTED]
        with Progress(*columns, console=console, disable=not self.show_progress or not waiting) as display:
            tasks = {
                r.job_id: display.add_task(
                    f"{r.provider} {r.provider_job_id}", total=len(r.entries), state=""
                )
                for r in waiting
            }
            while waiting:
                still: list[JobRecord] = []
                for record in waiting:
                    progress = await self.refresh(record)
                    display.update(
                        tasks[record.job_id],
                        completed=progress.done + progress.failed,
                        state=progress.provider_state,
                    )
                    if progress.phase != ENDED:
                        still.append(record)
                waiting = still
                if waiting:
                    await asyncio.sleep(self.poll_seconds)

    async def refresh(self, record: JobRecord) -> JobProgress:
        """The job's progress at its provider, kept on the record (saved to the ledger only when it changed)."""
        async with talking_to(record, "polling"):
            progress = await self.client(record.family).progress(record)
        now = (progress.provider_state, progress.done, progress.failed)
        if (record.provider_state, record.done, record.failed) != now:
            record.provider_state, record.done, record.failed = now
            self.ledger.save(record)
        return progress

    async def find(self, record: JobRecord) -> str | None:
        """The provider's id of the job a `submitting` record was creating, if the create took effect."""
        async with talking_to(record, "looking up"):
            return await self.client(record.family).find(record)

    async def results(self, record: JobRecord) -> list[Outcome]:
        """What became of each request of an ended job."""
        async with talking_to(record, "reading the results of"):
            return await self.client(record.family).results(record)

    async def cancel(self, record: JobRecord) -> None:
        async with talking_to(record, "cancelling"):
            await self.client(record.family).cancel(record)

    def collect(
        self, record: JobRecord, outcomes: list[Outcome], queued: Mapping[str, Pending] | None = None
    ) -> list[Answer]:
        """Store the answers of an ended job in the cache, keep its failures, mark it collected."""
        by_id = {custom_id(e.key): e for e in record.entries}
        answers: list[Answer] = []
        for outcome in outcomes:
            entry = by_id.get(outcome.custom_id)
            if entry is None:
                continue
            completion = outcome.completion
            if completion is None:
                record.failures[entry.key] = outcome.error or "no answer"
                self.failures[entry.key] = outcome.error or "no answer"
                answers.append(Answer(entry.key, None, 0.0, 0.0, outcome.error))
                continue
            cost, live, cache_saved = _costs(record, completion)
            if self.cache is not None:
                self.cache.set(
                    entry.key,
                    answer_value(
                        completion.text,
                        completion.prompt_tokens,
                        completion.completion_tokens,
                        cost,
                        record.model,
                        entry.purpose,
                        logprobs=completion.logprobs,
                        end=completion.end,
                    ),
                )
            record.failures.pop(entry.key, None)
            answers.append(Answer(entry.key, completion, cost, live, provider_cache_saved_usd=cache_saved))
        record.state = COLLECTED
        self.ledger.save(record)
        return answers

    def _no_wait_message(self, records: list[JobRecord]) -> str:
        jobs = ", ".join(f"{r.provider}:{r.provider_job_id}" for r in records) or "none new"
        cache = self.ledger.folder.parent
        return (
            f"submitted {sum(len(r.entries) for r in records)} requests as batch jobs ({jobs}); results usually "
            f"come within hours (24 h at most). Collect them with `prbj batch collect --cache-dir {cache}`, then "
            f"rerun this command (answers come from the cache). `prbj batch status --cache-dir {cache}` shows "
            f"progress."
        )


def _costs(record: JobRecord, completion: Completion) -> tuple[float, float, float]:
    """(batch cost, live cost, saved by the provider's prompt cache) of one answer. Cache reads and writes are
    discounted like the rest of a batch job."""
    cached, written = completion.cached_tokens, completion.cache_write_tokens
    uncached = completion.prompt_tokens - cached - written
    ratio = record.input_price / record.live_input_price if record.live_input_price else 0.0
    cache_cost = cached * record.cache_read_price + written * record.cache_write_price
    live = (
        uncached * record.live_input_price
        + cache_cost
        + completion.completion_tokens * record.live_output_price
    )
    batch = (
        uncached * record.input_price
        + cache_cost * ratio
        + completion.completion_tokens * record.output_price
    )
    saved = ((cached + written) * record.live_input_price - cache_cost) * ratio
    return batch, live, saved


def elapsed(record: JobRecord) -> str:
    seconds = int(time.time() - record.created_at)
    return (
        f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
        if seconds >= 3600
        else f"{seconds // 60}m{seconds % 60:02d}s"
    )
