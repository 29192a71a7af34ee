"""OpenAI Batch over LiteLLM's file and batch functions (acreate_file, acreate_batch, aretrieve_batch,
alist_batches, afile_content, acancel_batch), which speak OpenAI's wire format: a JSONL file of
`{custom_id, method, url, body}` lines is uploaded (purpose "batch"), a batch is created from it, and when it ends
its output file holds the answered lines and its error file the failed, expired or cancelled ones."""

from __future__ import annotations

import io
import json
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
    provider_params,
    with_unanswered,
)
from prbj.llm.litellm_finish import native_end
from prbj.llm.litellm_setup import litellm
from prbj.llm.logprobs import from_response
from prbj.llm.transport import Completion

ENDPOINT = "/v1/chat/completions"
# OpenAI's documented ceiling per batch: 50,000 requests and a 200 MB input file.
OPENAI_LIMITS = Limits(max_requests=50_000, max_bytes=200 * 1024 * 1024)
_ENDED = {"completed", "failed", "expired", "cancelled"}
# Metadata naming the ledger record on the provider's side, so a job whose create call's answer was lost can be
# found again.
TAG = "prbj_job"


class OpenAIBatchClient:
    limits = OPENAI_LIMITS

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or OPENAI_LIMITS

    def line_bytes(self, line: BatchLine) -> int:
        return len(_line(line).encode()) + 1

    def _auth(self, record: JobRecord) -> dict[str, Any]:
        # No retries inside LiteLLM/the OpenAI client: a create retried blindly could create a second job.
        return {
            "custom_llm_provider": "openai",
            "api_base": record.api_base,
            "api_key": record.api_key(),
            "max_retries": 0,
        }

    async def submit(self, record: JobRecord, lines: Sequence[BatchLine], save: Save) -> str:
        payload = "\n".join(_line(line) for line in lines).encode() + b"\n"
        upload = await litellm().acreate_file(
            file=(f"{record.job_id}.jsonl", io.BytesIO(payload)), purpose="batch", **self._auth(record)
        )
        record.input_file_id = upload.id
        save(record)
        return await self._create(record)

    async def _create(self, record: JobRecord) -> str:
        assert record.input_file_id is not None
        batch = await litellm().acreate_batch(
            completion_window="24h",
            endpoint=ENDPOINT,
            input_file_id=record.input_file_id,
            metadata={TAG: record.job_id},
            **self._auth(record),
        )
        return str(batch.id)

    async def find(self, record: JobRecord) -> str | None:
        if record.input_file_id is None:
            return None  # died before the upload was recorded: no batch can name our file
        after: str | None = None
        while True:
            page = await litellm().alist_batches(after=after, limit=100, **self._auth(record))
            data = list(getattr(page, "data", None) or page.get("data", []))
            for batch in data:
                fields = batch if isinstance(batch, dict) else batch.model_dump()
                if (
                    fields.get("input_file_id") == record.input_file_id
                    or (fields.get("metadata") or {}).get(TAG) == record.job_id
                ):
                    return str(fields["id"])
            has_more = getattr(page, "has_more", None) if not isinstance(page, dict) else page.get("has_more")
            if not has_more or not data:
                return None
            last = data[-1]
            after = str(last["id"] if isinstance(last, dict) else last.id)

    async def resume_submit(self, record: JobRecord, lines: Sequence[BatchLine], save: Save) -> str:
        # The file was uploaded (its id is recorded) but no batch names it: create the batch from it.
        if record.input_file_id is None:
            return await self.submit(record, lines, save)
        return await self._create(record)

    async def progress(self, record: JobRecord) -> Progress:
        batch = await self._retrieve(record)
        counts = batch.request_counts
        done, failed, total = (
            int(getattr(counts, "completed", 0) or 0),
            int(getattr(counts, "failed", 0) or 0),
            int(getattr(counts, "total", 0) or 0),
        )
        phase = ENDED if batch.status in _ENDED else RUNNING
        return Progress(phase, str(batch.status), done, failed, total or len(record.entries))

    async def _retrieve(self, record: JobRecord) -> Any:
        assert record.provider_job_id is not None
        # LiteLLM's success logging of an ended batch downloads its output file again, to price it, in a task of
        # its own that nothing awaits: prbj reads and prices the results itself, and that task, cut short when
        # the run's event loop closes, left a 'coroutine OpenAIFilesAPI.afile_content was never awaited' behind
        # (and a second download of the file when it was not).
        return await litellm().aretrieve_batch(
            batch_id=record.provider_job_id,
            litellm_metadata={"batch_ignore_default_logging": True},
            **self._auth(record),
        )

    async def results(self, record: JobRecord) -> list[Outcome]:
        batch = await self._retrieve(record)
        outcomes: list[Outcome] = []
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                outcomes += [
                    _outcome(json.loads(row))
                    for row in (await self._content(record, file_id)).splitlines()
                    if row.strip()
                ]
        errors = _batch_errors(batch)
        reason = f"batch {batch.status}" + (f": {errors}" if errors else "")
        # Lines the batch never reached (a failed validation, an expiry without an error line) still get a reason.
        return with_unanswered(outcomes, record, reason)

    async def _content(self, record: JobRecord, file_id: str) -> str:
        content = await litellm().afile_content(file_id=file_id, **self._auth(record))
        return content.content.decode() if hasattr(content, "content") else str(content)

    async def cancel(self, record: JobRecord) -> None:
        assert record.provider_job_id is not None
        await litellm().acancel_batch(batch_id=record.provider_job_id, **self._auth(record))


def _line(line: BatchLine) -> str:
    body = {"model": bare_model(line.call.provider.model), "messages": line.call.messages}
    body.update(provider_params(line.call, "openai"))
    return json.dumps(
        {"custom_id": line.custom_id, "method": "POST", "url": ENDPOINT, "body": body}, ensure_ascii=False
    )


def _outcome(row: dict[str, Any]) -> Outcome:
    cid = str(row.get("custom_id"))
    response = row.get("response") or {}
    body = response.get("body") or {}
    if row.get("error") or int(response.get("status_code") or 0) != 200:
        error = row.get("error") or body.get("error") or {}
        code = error.get("code") or response.get("status_code") or "error"
        return Outcome(cid, error=f"{code}: {error.get('message') or 'no reason given'}")
    usage = body.get("usage") or {}
    choice = (body.get("choices") or [{}])[0]
    text = (choice.get("message") or {}).get("content") or ""
    reasoning = int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
    logprobs = from_response(choice.get("logprobs"), text)
    return Outcome(
        cid,
        completion=Completion(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_tokens=int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0),
            logprobs=None if logprobs is None else tuple(logprobs),
            # A line cut at its cap (length) or filtered (content_filter) ends as a live reply would.
            end=native_end(choice.get("finish_reason"), reasoning),
        ),
    )


def _batch_errors(batch: Any) -> str:
    errors = getattr(batch, "errors", None)
    data = getattr(errors, "data", None) or []
    return "; ".join(str(getattr(e, "message", e)) for e in data)[:300]
