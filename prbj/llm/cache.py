"""The disk cache every model call goes through (LLM calls, local RM forward passes, planner outputs).

Keys are content hashes of everything that determines an answer (resolved model id, api_base, messages,
generation params, template hash, sample index, ...) and nothing that does not (concurrency, retry settings,
API keys). Values are JSON-able dicts. Errors are never stored. diskcache keeps its index in SQLite, so two prbj
processes can share one folder safely.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import diskcache

DEFAULT_CACHE_DIR = Path("cache")
CACHE_ENV = "PRBJ_CACHE_DIR"
# Bumped when the layout of stored values changes, so old entries are simply missed rather than misread.
CACHE_FORMAT = 1

# Names that must never be part of a key or a stored value: a key in the cache would leak with the folder.
_SECRET_FIELDS = frozenset({"api_key", "authorization", "x-api-key", "x-goog-api-key"})


def default_cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE_DIR)


def cache_key(kind: str, **parts: Any) -> str:
    """A stable hash of `parts`; `kind` separates namespaces (llm call, scalar score, planner ...)."""
    leaked = _SECRET_FIELDS & {k.lower() for k in parts}
    if leaked:
        raise ValueError(f"refusing to put secret fields into a cache key: {sorted(leaked)}")
    blob = json.dumps({"kind": kind, "format": CACHE_FORMAT, **parts}, sort_keys=True, ensure_ascii=False)
    return f"{kind}:{hashlib.sha256(blob.encode()).hexdigest()}"


@dataclass(frozen=True, slots=True)
class CacheStats:
    directory: str
    entries: int
    size_bytes: int
    by_kind: dict[str, int]


class ResponseCache:
    """A thin typed layer over diskcache.Cache."""

    def __init__(self, directory: Path | str | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self._opened: diskcache.Cache | None = None

    @property
    def _store(self) -> diskcache.Cache:
        # Opened on first use, so a run that makes no model call leaves no cache folder behind.
        if self._opened is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            # No size limit: evicting a paid answer silently would make a rerun pay twice.
            self._opened = diskcache.Cache(str(self.directory), size_limit=2**62, eviction_policy="none")
        return self._opened

    def get(self, key: str) -> dict[str, Any] | None:
        entry = self._store.get(key)
        return None if entry is None else entry["value"]

    def set(self, key: str, value: dict[str, Any]) -> None:
        self._store.set(key, {"value": value, "stored_at": time.time()})

    def __contains__(self, key: str) -> bool:
        return key in self._store

    def keys(self) -> Iterator[str]:
        return iter(self._store)

    def stats(self) -> CacheStats:
        by_kind: dict[str, int] = {}
        for key in self._store:
            kind = str(key).split(":", 1)[0]
            by_kind[kind] = by_kind.get(kind, 0) + 1
        return CacheStats(str(self.directory), len(self._store), int(self._store.volume()), by_kind)

    def clear(self) -> int:
        return int(self._store.clear())

    def prune(self, older_than_seconds: float) -> int:
        """Drop entries stored more than `older_than_seconds` ago; returns how many were dropped."""
        cutoff = time.time() - older_than_seconds
        dropped = 0
        for key in list(self._store):
            entry = self._store.get(key)
            if entry is not None and entry["stored_at"] < cutoff and self._store.delete(key):
                dropped += 1
        return dropped

    def close(self) -> None:
        if self._opened is not None:
            self._opened.close()
            self._opened = None

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
