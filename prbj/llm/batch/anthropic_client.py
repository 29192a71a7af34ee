"""Anthropic Message Batches over Anthropic's official SDK (`anthropic`): LiteLLM 1.110 can retrieve an Anthropic
batch but not create one or read its results. Each request is `{custom_id, params}` where params is the very
Messages body LiteLLM builds for a live call (its AnthropicConfig.transform_request), so batch and live ask the
same thing; results stream as JSONL lines of succeeded / errored / canceled / expired."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prbj.llm.batch.ledger import JobRecord
from prbj.llm.batch.wire import (
    ENDED,
    RUNNING,
    BatchLine,
    Limits,
    Outcome,
    Progress,
    Save,
    bare_model,
    json_bytes,
    provider_params,
    with_unanswered,
)
from prbj.llm.litellm_finish import native_end, thinking_tokens
from prbj.llm.providers import KEYLESS_PLACEHOLDER
from prbj.llm.transport import Completion, anthropic_cache_breakpoint

# Anthropic's documented ceiling per batch: 100,000 requests or 256 MB, whichever comes first.
ANTHROPIC_LIMITS = Limits(max_requests=100_000, max_bytes=256 * 1024 * 1024)
# How far back (seconds before the record was written) a job may have been created and still be ours.
_CLOCK_SKEW = 300.0


class AnthropicBatchClient:
    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or ANTHROPIC_LIMITS
        # One SDK client per endpoint and key, kept alive: a results stream dies with the client that opened it.
        self._clients: dict[tuple[str | None, str | None], Any] = {}

    def line_bytes(self, line: BatchLine) -> int:
        return json_bytes(_request(line))

    def _client(self, record: JobRecord) -> Any:
        import anthropic

        api_key = record.api_key()
        base = record.api_base.rstrip("/").removesuffix("/v1") if record.api_base else None
        client = self._clients.get((base, api_key))
        if client is None:
            # No SDK retries: a create retried blindly could create a second job; the ledger decides instead.
            client = anthropic.AsyncAnthropic(
                api_key=api_key or KEYLESS_PLACEHOLDER, base_url=base, max_retries=0
            )
            self._clients[(base, api_key)] = client
        return client

    async def submit(self, record: JobRecord, lines: Sequence[BatchLine], save: Save) -> str:
        batch = await self._client(record).messages.batches.create(
            requests=[_request(line) for line in lines]
        )
        return str(batch.id)

    async def find(self, record: JobRecord) -> str | None:
        """Anthropic batches carry no metadata: ours is the one created after the record was written holding
        exactly our custom ids (checked on its results once it ends, else by its request count)."""
        client = self._client(record)
        candidates = []
        async for batch in client.messages.batches.list(limit=100):
            created = batch.created_at.timestamp()
            if created < record.created_at - _CLOCK_SKEW:
                break
            counts = batch.request_counts
            total = counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired
            if total == len(record.entries):
                candidates.append(batch)
        return str(candidates[-1].id) if candidates else None

    async def resume_submit(self, record: JobRecord, lines: Sequence[BatchLine], save: Save) -> str:
        return await self.submit(record, lines, save)

    async def progress(self, record: JobRecord) -> Progress:
        batch = await self._client(record).messages.batches.retrieve(record.provider_job_id)
        counts = batch.request_counts
        failed = counts.errored + counts.canceled + counts.expired
        total = counts.processing + counts.succeeded + failed
        phase = ENDED if batch.processing_status == "ended" else RUNNING
        return Progress(
            phase, str(batch.processing_status), counts.succeeded, failed, total or len(record.entries)
        )

    async def results(self, record: JobRecord) -> list[Outcome]:
        outcomes: list[Outcome] = []
        stream = await self._client(record).messages.batches.results(record.provider_job_id)
        async for row in stream:
            outcomes.append(_outcome(row.custom_id, row.result))
        return with_unanswered(outcomes, record, "no result line")

    async def cancel(self, record: JobRecord) -> None:
        await self._client(record).messages.batches.cancel(record.provider_job_id)


def _request(line: BatchLine) -> dict[str, Any]:
    from prbj.llm.litellm_setup import litellm

    model = bare_model(line.call.provider.model)
    params = (
        litellm()
        .AnthropicConfig()
        .transform_request(
            model=model,
            # Anthropic caches prompt prefixes inside batches too (best effort): the same breakpoint as live.
            messages=anthropic_cache_breakpoint(line.call),
            optional_params=provider_params(line.call, "anthropic"),
            litellm_params={},
            headers={},
        )
    )
    return {"custom_id": line.custom_id, "params": params}


def _outcome(cid: str, result: Any) -> Outcome:
    kind = result.type
    if kind == "succeeded":
        message = result.message
        text = "".join(getattr(block, "text", "") for block in message.content if block.type == "text")
        thinking = "".join(
            getattr(block, "thinking", "") for block in message.content if block.type == "thinking"
        )
        usage = message.usage
        prompt = (
            (usage.input_tokens or 0)
            + (usage.cache_read_input_tokens or 0)
            + (usage.cache_creation_input_tokens or 0)
        )
        output = usage.output_tokens or 0
        return Outcome(
            cid,
            completion=Completion(
                text=text,
                prompt_tokens=prompt,
                completion_tokens=output,
                cached_tokens=usage.cache_read_input_tokens or 0,
                cache_write_tokens=usage.cache_creation_input_tokens or 0,
                # max_tokens (thinking counts against it) and refusal end as a live reply would.
                end=native_end(message.stop_reason, thinking_tokens(thinking, output)),
            ),
        )
    if kind == "errored":
        error = getattr(result.error, "error", None)
        return Outcome(
            cid, error=f"{getattr(error, 'type', 'error')}: {getattr(error, 'message', 'no reason given')}"
        )
    return Outcome(cid, error=f"batch request {kind}")
