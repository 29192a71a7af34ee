"""Provider-neutral shapes of batch work and the protocol each provider's batch client implements."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prbj.llm.batch.ledger import JobRecord
from prbj.llm.transport import ChatCall, Completion
from prbj.llm.wire_params import bare_model as bare_model
from prbj.llm.wire_params import family_of as family_of
from prbj.llm.wire_params import mapped_params

# A provider job's state, in prbj's words: still running, or over (its results can be read).
RUNNING = "running"
ENDED = "ended"


@dataclass(frozen=True)
class BatchLine:
    custom_id: str
    call: ChatCall


@dataclass(frozen=True)
class Outcome:
    """What became of one request of a job: a completion, or the provider's reason it has none."""

    custom_id: str
    completion: Completion | None = None
    error: str | None = None


@dataclass(frozen=True)
class Progress:
    phase: str  # RUNNING | ENDED
    provider_state: str
    done: int
    failed: int
    total: int


@dataclass(frozen=True)
class Limits:
    """One job's ceiling at the provider: requests and bytes of the request payload."""

    max_requests: int
    max_bytes: int


Save = Callable[[JobRecord], None]


class BatchClient(Protocol):
    limits: Limits

    def line_bytes(self, line: BatchLine) -> int:
        """Size of `line` in the job's payload (for splitting under `limits.max_bytes`)."""
        ...

    async def submit(self, record: JobRecord, lines: Sequence[BatchLine], save: Save) -> str:
        """Create the job; return the provider's job id. Intermediate ids (an uploaded file) are put on `record`
        and saved through `save` before the next request leaves."""
        ...

    async def find(self, record: JobRecord) -> str | None:
        """The provider's id of the job `record` was submitting when its process died, or None if the create
        call never took effect (then submitting again buys nothing twice)."""
        ...

    async def resume_submit(self, record: JobRecord, lines: Sequence[BatchLine], save: Save) -> str:
        """Finish a submission that `find` shows never took effect."""
        ...

    async def progress(self, record: JobRecord) -> Progress: ...

    async def results(self, record: JobRecord) -> list[Outcome]: ...

    async def cancel(self, record: JobRecord) -> None: ...


def with_unanswered(outcomes: list[Outcome], record: JobRecord, reason: str) -> list[Outcome]:
    """`outcomes` and, for each request of `record` they do not answer, an error outcome giving `reason`: every
    request the job held gets an outcome, even when the provider returned no line for it."""
    seen = {o.custom_id for o in outcomes}
    return outcomes + [Outcome(cid, error=reason) for cid in record.custom_ids if cid not in seen]


def split(
    lines: Sequence[BatchLine], limits: Limits, size: Callable[[BatchLine], int]
) -> Iterator[list[BatchLine]]:
    """`lines` in order, cut into jobs that each stay within the provider's request and byte limits."""
    chunk: list[BatchLine] = []
    used = 0
    for line in lines:
        bytes_ = size(line)
        if chunk and (len(chunk) >= limits.max_requests or used + bytes_ > limits.max_bytes):
            yield chunk
            chunk, used = [], 0
        chunk.append(line)
        used += bytes_
    if chunk:
        yield chunk


def provider_params(call: ChatCall, family: str) -> dict[str, Any]:
    """The generation parameters as the provider's API spells them, mapped by LiteLLM exactly as for a live
    call (e.g. max_tokens → max_completion_tokens for OpenAI reasoning models), so a batch line asks what the
    live request would have asked."""
    return mapped_params(call.provider.model, call.params, family)


def json_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())
