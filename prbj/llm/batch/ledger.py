"""The durable job ledger: one JSON file per submitted batch job, in `<cache folder>/batches/`.

A job's file is written (and fsynced) *before* the request that creates the job leaves, in state `submitting`,
and rewritten as the job moves on. So a process killed at any point leaves a record naming the requests it may
have bought; the next run resolves a `submitting` record against the provider (did the job get created?) and
polls the existing job instead of buying its requests again. Records hold request keys, never prompts or keys.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no cross-process lock, so one --batch run per cache folder at a time there
    fcntl = None  # type: ignore[assignment]  # the module or None: checked before every lock

LEDGER_DIR = "batches"
# Local states; a provider's own state names ride along in `provider_state`.
SUBMITTING = "submitting"  # the record exists, the create call may or may not have reached the provider
SUBMITTED = "submitted"  # the provider returned a job id; poll it
COLLECTED = "collected"  # results (or failures) are stored; nothing left to do
OPEN_STATES = (SUBMITTING, SUBMITTED)


@dataclass
class Entry:
    """One request of a job: its cache key and what the stored answer needs besides the reply."""

    key: str
    purpose: str = "judge"


@dataclass
class JobRecord:
    job_id: str
    run_id: str
    provider: str
    family: str
    model: str
    api_base: str | None
    api_key_env: str | None
    # USD per token, already at batch rates: what a collected answer costs (stored with it like a live one).
    input_price: float
    output_price: float
    live_input_price: float
    live_output_price: float
    entries: list[Entry]
    # USD per token read from / written to the provider's prompt cache, at live rates.
    cache_read_price: float = 0.0
    cache_write_price: float = 0.0
    state: str = SUBMITTING
    provider_job_id: str | None = None
    provider_state: str = ""
    input_file_id: str | None = None
    done: int = 0
    failed: int = 0
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    # Requests the provider did not answer (errored, expired, cancelled): cache key → the provider's reason.
    failures: dict[str, str] = field(default_factory=dict)

    @property
    def keys(self) -> list[str]:
        return [e.key for e in self.entries]

    @property
    def custom_ids(self) -> list[str]:
        """The ids its requests carry inside the provider's job, in order."""
        return [custom_id(e.key) for e in self.entries]

    def api_key(self) -> str | None:
        """The key, read from the environment variable the record names (the record never holds the key)."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    @property
    def open(self) -> bool:
        return self.state in OPEN_STATES

    @staticmethod
    def new(run_id: str, **fields: Any) -> JobRecord:
        return JobRecord(job_id=f"prbj-{uuid.uuid4().hex[:16]}", run_id=run_id, **fields)

    @staticmethod
    def from_json(data: dict[str, Any]) -> JobRecord:
        entries = [Entry(**e) for e in data.pop("entries")]
        return JobRecord(entries=entries, **data)


def custom_id(key: str) -> str:
    """The id a request carries inside a job: the hash part of its cache key (Anthropic allows [A-Za-z0-9_-]{1,64})."""
    return key.split(":", 1)[-1][:64]


class Ledger:
    def __init__(self, cache_dir: Path) -> None:
        self.folder = Path(cache_dir) / LEDGER_DIR

    def save(self, record: JobRecord) -> None:
        """Write `record` durably: a temporary file, fsynced, renamed over the old one, the folder fsynced."""
        self.folder.mkdir(parents=True, exist_ok=True)
        record.updated_at = time.time()
        target = self.folder / f"{record.job_id}.json"
        temporary = target.with_suffix(f".tmp-{os.getpid()}")
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(asdict(record), handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
        directory = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def records(self) -> Iterator[JobRecord]:
        if not self.folder.is_dir():
            return
        for path in sorted(self.folder.glob("*.json")):
            yield JobRecord.from_json(json.loads(path.read_text(encoding="utf-8")))

    def open_records(self) -> list[JobRecord]:
        return [r for r in self.records() if r.open]

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive across processes sharing the folder: what is in flight is read and new jobs are submitted
        under it, so two runs never submit the same request side by side."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if fcntl is None:
            yield
            return
        with open(self.folder / ".lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def get(self, job_id: str) -> JobRecord | None:
        path = self.folder / f"{job_id}.json"
        return JobRecord.from_json(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else None
