"""A provider that refuses to create, show or hand over a batch job (a bad key, no access, an unknown job, a server
error) ends the run with one line and exit 1, never a traceback. The ledger is left as it was: a job whose create
call failed stays `submitting` (the next run looks it up before creating it, so nothing is bought twice), a
submitted job stays submitted and is polled again by the next run or `prbj batch collect`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from prbj.errors import PrbjError
from prbj.llm.batch.ledger import JobRecord
from prbj.llm.provider_errors import from_provider


class BatchFailed(PrbjError):
    """A batch API call failed: the run stops (exit 1) with the provider's cause; the ledger is intact."""

    exit_code = 1


@asynccontextmanager
async def talking_to(record: JobRecord, doing: str) -> AsyncIterator[None]:
    """Run one call to `record`'s batch API (`doing`: "creating", "polling", …); a provider error becomes
    BatchFailed naming the provider, the job, the cause and what to do."""
    try:
        yield
    except PrbjError:
        raise
    except Exception as err:
        if not from_provider(err):
            raise
        raise BatchFailed(describe(record, doing, err)) from None


def describe(record: JobRecord, doing: str, error: BaseException) -> str:
    from prbj.llm.error_text import one_line
    from prbj.llm.retry import cause_of

    job = record.provider_job_id or record.job_id
    fix = {
        "401 Unauthorized": f"check {record.api_key_env or 'the key'}",
        "403 Forbidden": "check the key's access to the batch API and this model",
        "404 Not Found": "check the model and the job at the provider (`prbj batch status`)",
    }.get(cause_of(error), "rerun later")
    return (
        f"--batch: {doing} {record.provider} batch job {job} failed ({cause_of(error)}): "
        f"{one_line(error, secrets=[record.api_key()])}. The ledger keeps the job ({record.state}); {fix}, then "
        "rerun the same command: nothing is bought twice"
    )
