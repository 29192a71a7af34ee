"""Gemini batch mode over Google's official SDK (`google-genai`): LiteLLM 1.110's batch functions reach Vertex AI
but not the Gemini API. A small job sends its requests inline; a large one uploads a JSONL file of
`{key, request}` lines (Files API) and names it. Each request is the generateContent body LiteLLM builds for a
live call, so batch and live ask the same thing. The job is an operation polled until done; answers come back
inline or in a results file."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any, cast

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
from prbj.llm.litellm_finish import gemini_end
from prbj.llm.logprobs import from_gemini
from prbj.llm.providers import KEYLESS_PLACEHOLDER
from prbj.llm.transport import Completion

# Inline requests must stay under 20 MB in all; an input file may hold up to 2 GB.
INLINE_MAX_BYTES = 20 * 1000 * 1000
GEMINI_LIMITS = Limits(max_requests=100_000, max_bytes=2 * 1000 * 1000 * 1000)
_ENDED = {
    "JOB_STATE_SUCCEEDED",
    "JOB_STATE_FAILED",
    "JOB_STATE_CANCELLED",
    "JOB_STATE_EXPIRED",
    "JOB_STATE_PARTIALLY_SUCCEEDED",
}


class GeminiBatchClient:
    def __init__(self, limits: Limits | None = None, inline_max_bytes: int = INLINE_MAX_BYTES) -> None:
        self.limits = limits or GEMINI_LIMITS
        self.inline_max_bytes = inline_max_bytes
        # One SDK client per endpoint and key, kept alive while its downloads and pages are read.
        self._clients: dict[tuple[str | None, str | None], Any] = {}

    def line_bytes(self, line: BatchLine) -> int:
        return json_bytes(_file_line(line)) + 1

    def _client(self, record: JobRecord) -> Any:
        from google import genai
        from google.genai import types

        api_key = record.api_key()
        base = record.api_base.rstrip("/").removesuffix("/v1beta") + "/" if record.api_base else None
        client = self._clients.get((base, api_key))
        if client is None:
            # One attempt: a create retried blindly could create a second job; the ledger decides instead.
            options = types.HttpOptions(
                base_url=base, api_version="v1beta", retry_options=types.HttpRetryOptions(attempts=1)
            )
            client = self._clients[(base, api_key)] = genai.Client(
                api_key=api_key or KEYLESS_PLACEHOLDER, http_options=options
            )
        return client.aio

    async def submit(self, record: JobRecord, lines: Sequence[BatchLine], save: Save) -> str:
        from google.genai import types

        client = self._client(record)
        size = sum(self.line_bytes(line) for line in lines)
        src: Any
        if size <= self.inline_max_bytes:
            src = [_inline(line, types) for line in lines]
        else:
            payload = "".join(
                json.dumps(_file_line(line), ensure_ascii=False) + "\n" for line in lines
            ).encode()
            uploaded = await client.files.upload(
                file=io.BytesIO(payload), config={"mime_type": "jsonl", "display_name": record.job_id}
            )
            record.input_file_id = uploaded.name
            save(record)
            src = uploaded.name
        job = await client.batches.create(
            model=bare_model(record.model), src=src, config={"display_name": record.job_id}
        )
        return str(job.name)

    async def find(self, record: JobRecord) -> str | None:
        async for job in await self._client(record).batches.list(config={"page_size": 100}):
            if job.display_name == record.job_id:
                return str(job.name)
        return None

    async def resume_submit(self, record: JobRecord, lines: Sequence[BatchLine], save: Save) -> str:
        if record.input_file_id is None:
            return await self.submit(record, lines, save)
        job = await self._client(record).batches.create(
            model=bare_model(record.model), src=record.input_file_id, config={"display_name": record.job_id}
        )
        return str(job.name)

    async def progress(self, record: JobRecord) -> Progress:
        job = await self._client(record).batches.get(name=record.provider_job_id)
        state = str(getattr(job.state, "value", job.state))
        ended = state in _ENDED
        total = len(record.entries)
        return Progress(
            ENDED if ended else RUNNING, state, total if state == "JOB_STATE_SUCCEEDED" else 0, 0, total
        )

    async def results(self, record: JobRecord) -> list[Outcome]:
        client = self._client(record)
        job = await client.batches.get(name=record.provider_job_id)
        state = str(getattr(job.state, "value", job.state))
        ids = record.custom_ids
        outcomes: list[Outcome] = []
        dest = job.dest
        if dest is not None and dest.inlined_responses:
            for index, item in enumerate(dest.inlined_responses):
                key = (item.metadata or {}).get("key") or (ids[index] if index < len(ids) else "")
                if item.error is not None:
                    outcomes.append(Outcome(key, error=_reason(item.error)))
                else:
                    response = item.response.model_dump(mode="json", by_alias=True, exclude_none=True)
                    outcomes.append(_outcome(key, response))
        elif dest is not None and dest.file_name:
            data = await client.files.download(file=dest.file_name)
            for row in data.decode().splitlines():
                if row.strip():
                    item = json.loads(row)
                    problem = item.get("error") or item.get("status")
                    if problem:
                        outcomes.append(Outcome(str(item.get("key")), error=_reason(problem)))
                    else:
                        outcomes.append(_outcome(str(item.get("key")), item.get("response") or {}))
        return with_unanswered(outcomes, record, f"batch {state}")

    async def cancel(self, record: JobRecord) -> None:
        await self._client(record).batches.cancel(name=record.provider_job_id)


def _body(line: BatchLine) -> dict[str, Any]:
    from prbj.llm.litellm_setup import litellm_part

    transformation = litellm_part("litellm.llms.vertex_ai.gemini.transformation")
    return dict(
        transformation._transform_request_body(
            messages=cast(Any, [dict(m) for m in line.call.messages]),
            model=bare_model(line.call.provider.model),
            optional_params=provider_params(line.call, "gemini"),
            custom_llm_provider="gemini",
            litellm_params={},
            cached_content=None,
        )
    )


def _file_line(line: BatchLine) -> dict[str, Any]:
    return {"key": line.custom_id, "request": _body(line)}


def _inline(line: BatchLine, types: Any) -> Any:
    body = _body(line)
    config = dict(body.get("generationConfig") or {})
    if body.get("system_instruction"):
        config["system_instruction"] = body["system_instruction"]
    return types.InlinedRequest(
        contents=body["contents"],
        config=types.GenerateContentConfig.model_validate(config),
        metadata={"key": line.custom_id},
    )


def _reason(error: Any) -> str:
    if isinstance(error, dict):
        return f"{error.get('code', 'error')}: {error.get('message', 'no reason given')}"
    return f"{getattr(error, 'code', 'error')}: {getattr(error, 'message', None) or error}"


def _outcome(key: str, response: dict[str, Any]) -> Outcome:
    candidates = response.get("candidates") or []
    parts = ((candidates[0] if candidates else {}).get("content") or {}).get("parts") or []
    text = "".join(p.get("text", "") for p in parts if not p.get("thought"))
    usage = response.get("usageMetadata") or response.get("usage_metadata") or {}
    prompt = int(usage.get("promptTokenCount") or usage.get("prompt_token_count") or 0)
    thoughts = int(usage.get("thoughtsTokenCount") or usage.get("thoughts_token_count") or 0)
    completion = int(usage.get("candidatesTokenCount") or usage.get("candidates_token_count") or 0) + thoughts
    # A blocked prompt has no candidates: a refusal naming its blockReason, as on the live path.
    end = gemini_end(response, thoughts)
    if not candidates and end.status != "refused":
        return Outcome(key, error=f"no candidates: {json.dumps(response)[:200]}")
    cached = int(usage.get("cachedContentTokenCount") or usage.get("cached_content_token_count") or 0)
    first = candidates[0] if candidates and isinstance(candidates[0], dict) else {}
    logprobs = from_gemini(first.get("logprobsResult") or first.get("logprobs_result"), text)
    return Outcome(
        key,
        completion=Completion(
            text=text,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cached_tokens=cached,
            logprobs=None if logprobs is None else tuple(logprobs),
            end=end,
        ),
    )
