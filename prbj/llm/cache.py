"""The disk cache every model call goes through (LLM calls, local RM forward passes, the scores of reward models
written in Python, planner outputs).

Keys are content hashes of everything that determines an answer (resolved model id, api_base, messages,
generation params, template hash, sample index, ...) and nothing that does not (concurrency, retry settings,
API keys). Values are JSON-able dicts. Errors are never stored. diskcache keeps its index in SQLite, so two prbj
processes can share one folder safely. The numbers reward models written in Python return, one per item and tens
of thousands a second, live beside it in a plain SQLite table of their own (prbj.llm.score_table, `scores.db`),
which `stats`, `prune`, `clear` and a read-only folder treat as part of the cache.

The folder is data, never code: values are stored as JSON (`JSONDisk`), not with diskcache's default pickle, so
a folder restored from a CI cache or shared by someone else cannot run anything when it is read. An entry that
is not JSON (a pickle planted or left by an older prbj) is refused as corrupt, and a folder written by an older
prbj (no `prbj-cache.json` marker) is refused with a "rebuild the cache" message rather than read. A corrupt
folder is one line naming it and the cause (ConfigError, exit 2); a read-only folder serves its hits and says
once, on stderr, that new answers will not be stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import json
import os
import socket
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import diskcache
from diskcache.core import MODE_BINARY, MODE_RAW

from prbj.errors import ConfigError
from prbj.llm.futures import settle
from prbj.llm.score_table import SCORES_FILE, SCORES_KIND, ScoreTable

DEFAULT_CACHE_DIR = Path("cache")
CACHE_ENV = "PRBJ_CACHE_DIR"
# Part of every key: bumped when what a key means changes, so old entries are simply missed rather than misread.
CACHE_FORMAT = 1
# How values are stored on disk (1: diskcache's pickle; 2: JSON). Recorded in FORMAT_FILE; a folder in another
# storage format is refused, never read.
STORAGE_FORMAT = 2
FORMAT_FILE = "prbj-cache.json"
_DB_FILE = "cache.db"
# Prefix of the lease entries (who is buying which answer right now); they are not answers.
_LEASE = "lease:"


def new_lease_holder() -> str:
    """A name for one gateway's leases: host and process id (so a lease left by a process that died on this
    machine can be taken over at once), and a random part (so two gateways in one process never collide)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"


def _holder_is_gone(holder: str) -> bool:
    """Whether a lease's holder was a process on this machine that no longer runs. The name comes from the
    cache folder, so it is parsed defensively: anything unexpected counts as alive (the lease then expires)."""
    host, _, rest = holder.partition(":")
    pid_text, _, _ = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, but not ours to signal
        return False
    return False


_REBUILD = "rebuild the cache: delete or move the folder (its answers will be bought again)"

# Names that must never be part of a key or a stored value: a key in the cache would leak with the folder.
_SECRET_FIELDS = frozenset({"api_key", "authorization", "x-api-key", "x-goog-api-key"})
T = TypeVar("T")


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


class CorruptEntry(Exception):
    """A stored value or key that is not plain JSON data: refused, never decoded."""


# One encoder for every value (json.dumps with options would build one per call).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _encode(value: Any) -> bytes:
    """How a value is stored: compact UTF-8 JSON."""
    return _ENCODER.encode(value).encode()


class JSONDisk(diskcache.Disk):
    """diskcache storage that writes values as UTF-8 JSON and reads back nothing else: no pickle, either way."""

    def put(self, key: Any) -> tuple[Any, bool]:
        if not isinstance(key, str):
            raise TypeError(f"cache keys are strings, got {type(key).__name__}")
        return super().put(key)

    def get(self, key: Any, raw: bool) -> Any:
        if not raw:  # a pickled key: only a foreign or older writer stores one
            raise CorruptEntry("a key is not plain text")
        return key

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN) -> Any:
        if read:
            raise TypeError("JSONDisk stores JSON-able values, not files")
        return super().store(_encode(value), False, key=key)

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool) -> Any:
        if read or mode not in (MODE_RAW, MODE_BINARY):
            raise CorruptEntry("a value is not JSON (pickled or text data)")
        blob = super().fetch(mode, filename, value, False)
        if not isinstance(blob, bytes):
            raise CorruptEntry("a value is not JSON (a bare number or text)")
        try:
            return json.loads(blob)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CorruptEntry(f"a value is not JSON ({err})") from None


class _ReadOnlyStore:
    """Reads a cache folder that cannot be written (diskcache itself writes on open): the SQLite index opened
    immutable, values decoded by JSONDisk. Only what ResponseCache needs."""

    def __init__(self, directory: Path) -> None:
        uri = (directory / _DB_FILE).resolve().as_uri() + "?mode=ro&immutable=1"
        self._db = sqlite3.connect(uri, uri=True)
        self._disk = JSONDisk(str(directory))
        self._db.execute("SELECT 1 FROM Cache LIMIT 1").fetchall()  # fails now if the index is unreadable

    def get(self, key: str) -> Any:
        row = self._db.execute(
            "SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = 1", (key,)
        ).fetchone()
        return None if row is None else self._disk.fetch(row[0], row[1], row[2], False)

    def __contains__(self, key: str) -> bool:
        return (
            self._db.execute("SELECT 1 FROM Cache WHERE key = ? AND raw = 1", (key,)).fetchone() is not None
        )

    def __iter__(self) -> Iterator[str]:
        for key, raw in self._db.execute("SELECT key, raw FROM Cache ORDER BY rowid").fetchall():
            yield self._disk.get(key, bool(raw))

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM Cache").fetchone()[0])

    def volume(self) -> int:
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        page_size = self._db.execute("PRAGMA page_size").fetchone()[0]
        files = self._db.execute("SELECT COALESCE(SUM(size), 0) FROM Cache").fetchone()[0]
        return int(pages * page_size + files)

    def close(self) -> None:
        self._db.close()


class ResponseCache:
    """A thin typed layer over diskcache.Cache; every failure of the folder is one ConfigError naming it."""

    def __init__(self, directory: Path | str | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self._opened: diskcache.Cache | _ReadOnlyStore | None = None
        # The Python reward models' answers, in a file of their own (prbj.llm.score_table).
        self._scores: ScoreTable | None = None
        self.read_only = False
        self._opening = threading.Lock()
        # The one thread that runs the async methods' SQLite work (a write commits in ~5 ms), so an event loop
        # never waits on the disk; one thread keeps them in the order they were asked for.
        self._worker: ThreadPoolExecutor | None = None
        # Lease claims and writes (aclaim_unless_stored, store_soon, renew_soon, release_soon) queue here; the
        # worker commits all that queued meanwhile in one SQLite transaction and hands the claims' answers back
        # to the event loop in one wake-up (a group commit: a busy run pays one commit and one thread hop per
        # batch, not three per call). A failed write that nobody awaits is raised by the next cache call or by
        # close(), never lost.
        self._queued: list[_Queued] = []
        self._queue_lock = threading.Lock()
        self._draining = False
        self._write_error: BaseException | None = None

    @property
    def _store(self) -> diskcache.Cache | _ReadOnlyStore:
        # Opened on first use, so a run that makes no model call leaves no cache folder behind.
        if self._opened is None:
            with self._opening, self._failures():
                if self._opened is None:
                    self._opened = self._open()
        return self._opened

    def _open(self) -> diskcache.Cache | _ReadOnlyStore:
        existing = (self.directory / _DB_FILE).exists()
        if self._ready_folder() and not existing and not os.access(self.directory, os.W_OK):
            # Only the score table is here, and no index can be made: nothing of diskcache's to read.
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self.directory))
        try:
            # No size limit: evicting a paid answer silently would make a rerun pay twice.
            return diskcache.Cache(
                str(self.directory), disk=JSONDisk, size_limit=2**62, eviction_policy="none"
            )
        except (OSError, sqlite3.OperationalError) as err:
            if not (existing and _is_read_only_failure(err)):
                raise
        store = _ReadOnlyStore(self.directory)
        self._say_read_only()
        return store

    def _ready_folder(self) -> bool:
        """What opening either of the folder's files (diskcache's index, the score table) needs first. A folder
        that holds either has its format checked (ConfigError if it is another): True, and nothing is written.
        Otherwise the folder is made and its format marker written (OSError if it cannot be): False."""
        if (self.directory / _DB_FILE).exists() or (self.directory / SCORES_FILE).exists():
            self._check_format()
            return True
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / FORMAT_FILE).write_text(json.dumps({"format": STORAGE_FORMAT}) + "\n")
        return False

    def _say_read_only(self) -> None:
        if not self.read_only:
            self.read_only = True
            print(
                f"prbj: cache folder {self.directory} is read-only: its answers are used, new answers will not be "
                f"stored",
                file=sys.stderr,
            )

    def _check_format(self) -> None:
        marker = self.directory / FORMAT_FILE
        try:
            found = json.loads(marker.read_text(encoding="utf-8")).get("format")
        except FileNotFoundError:
            raise ConfigError(
                f"cache folder {self.directory}: written by an older prbj (pickled values, which prbj no longer "
                f"reads); {_REBUILD}"
            ) from None
        except (OSError, ValueError, AttributeError) as err:
            raise ConfigError(
                f"cache folder {self.directory}: unreadable {FORMAT_FILE} ({err}); {_REBUILD}"
            ) from None
        if found != STORAGE_FORMAT:
            raise ConfigError(
                f"cache folder {self.directory}: storage format {found!r}, this prbj reads {STORAGE_FORMAT}; "
                f"{_REBUILD}"
            )

    @property
    def _score_table(self) -> ScoreTable:
        if self._scores is None:
            with self._opening:
                if self._scores is None:
                    self._scores = self._open_scores()
        return self._scores

    def _open_scores(self) -> ScoreTable:
        """The score table, without opening diskcache's index when nothing else has (a run of Python reward
        models alone never needs it, and making a new one costs a dozen disk syncs): the folder readied as for
        _open (_ready_folder), and a folder this process may not write opened read-only."""
        path = self.directory / SCORES_FILE
        if self._opened is not None:
            return ScoreTable(path, read_only=self.read_only)
        if self._ready_folder() and not os.access(self.directory, os.W_OK):
            self._say_read_only()
            return ScoreTable(path, read_only=True)
        return ScoreTable(path)

    @contextmanager
    def _failures(self, file: str = _DB_FILE) -> Iterator[None]:
        """Turns what a damaged folder raises (deep inside SQLite or diskcache) into one line naming it."""
        try:
            yield
        except CorruptEntry as err:
            raise ConfigError(
                f"cache folder {self.directory}: corrupt: {err}; it was not loaded (prbj never unpickles cache "
                f"data); {_REBUILD}"
            ) from None
        except sqlite3.DatabaseError as err:
            raise ConfigError(
                f"cache folder {self.directory}: corrupt index {file} ({err}); {_REBUILD}"
            ) from None
        except OSError as err:
            raise ConfigError(
                f"cache folder {self.directory}: cannot use it ({err.strerror or err}); {_REBUILD}"
            ) from None

    def get(self, key: str) -> dict[str, Any] | None:
        with self._failures():
            entry = self._store.get(key)
            return None if entry is None else _entry(entry)["value"]

    def set(self, key: str, value: dict[str, Any]) -> None:
        with self._failures():
            store = self._store
            if isinstance(store, diskcache.Cache):
                store.set(key, {"value": value, "stored_at": time.time()})

    def __contains__(self, key: str) -> bool:
        with self._failures():
            return key in self._store

    # --- numbers: a Python reward model's answers, a batch at a time (prbj.llm.score_table) ------------------
    def get_scores(self, keys: Sequence[bytes]) -> dict[bytes, float]:
        """The numbers stored under any of `keys` (absent keys are left out), in one query per few hundred keys.
        Safe from any thread."""
        with self._failures(SCORES_FILE):
            return self._score_table.get_many(keys)

    def commit_scores(self) -> None:
        """Wait until every number asked to be stored so far is committed."""
        with self._failures(SCORES_FILE):
            self._score_table.flush()

    def holds_scores_of(self, model: bytes) -> bool:
        """Whether any number of the model whose digest is `model` is stored (score_table.item_keys' `model`)."""
        with self._failures(SCORES_FILE):
            return self._score_table.holds(model)

    def store_scores_soon(self, rows: Sequence[tuple[bytes, float]]) -> None:
        """Store (key, finite number) rows on the score table's writer thread, without waiting; a key already
        stored keeps its first value. A failed write is raised by a later call or by close()."""
        with self._failures(SCORES_FILE):
            self._score_table.store_soon(rows)

    # --- leases: one process buys an answer, the others sharing the folder wait for it ----------------------
    def claim(self, key: str, holder: str, seconds: float) -> bool:
        """Take the lease on `key` for `seconds` unless another holder has one that has not expired. Atomic across
        processes (diskcache's `add` is one SQLite transaction; an expired lease counts as absent), so a
        crashed holder blocks the key for `seconds` at most, and not at all when it ran on this machine. A
        read-only folder can store no answer, so there is nothing to share: the claim always succeeds."""
        with self._failures():
            store = self._store
            if not isinstance(store, diskcache.Cache):
                return True
            lease = _LEASE + key
            entry = {"value": {"holder": holder}, "stored_at": time.time()}
            if store.add(lease, entry, expire=seconds):
                return True
            current = self._lease_holder(store, lease)
            if current is None or current == holder:
                return current == holder or bool(store.add(lease, entry, expire=seconds))
            if _holder_is_gone(current):
                # Its holder was killed (SIGKILL, OOM) on this machine: waiting for the expiry would only stall
                # the resumed run, so the lease is taken over now.
                with store.transact():
                    if self._lease_holder(store, lease) == current:
                        store.delete(lease)
                return bool(store.add(lease, entry, expire=seconds))
            return False

    def renew(self, key: str, holder: str, seconds: float) -> None:
        """Push the lease's expiry `seconds` ahead while its answer is still being bought."""
        with self._failures():
            store = self._store
            if isinstance(store, diskcache.Cache):
                with store.transact():
                    if self._lease_holder(store, _LEASE + key) == holder:
                        store.touch(_LEASE + key, expire=seconds)

    def release(self, key: str, holder: str) -> None:
        with self._failures():
            store = self._store
            if isinstance(store, diskcache.Cache):
                with store.transact():
                    if self._lease_holder(store, _LEASE + key) == holder:
                        store.delete(_LEASE + key)

    def leased(self, key: str) -> bool:
        """Whether some holder's lease on `key` is live."""
        with self._failures():
            store = self._store
            return isinstance(store, diskcache.Cache) and self._lease_holder(store, _LEASE + key) is not None

    @staticmethod
    def _lease_holder(store: diskcache.Cache, lease: str) -> str | None:
        entry = store.get(lease)  # an expired lease reads as absent
        return None if entry is None else str(_entry(entry)["value"].get("holder"))

    def keys(self) -> Iterator[str]:
        with self._failures():
            return iter([key for key in self._store if not str(key).startswith(_LEASE)])

    def stats(self) -> CacheStats:
        with self._failures():
            store = self._store
            by_kind: dict[str, int] = {}
            for key in store:
                if str(key).startswith(_LEASE):
                    continue
                kind = str(key).split(":", 1)[0]
                by_kind[kind] = by_kind.get(kind, 0) + 1
            size = int(store.volume())
        with self._failures(SCORES_FILE):
            scores = self._score_table
            if count := scores.count():
                by_kind[SCORES_KIND] = by_kind.get(SCORES_KIND, 0) + count
            size += scores.size_bytes()
        return CacheStats(str(self.directory), sum(by_kind.values()), size, by_kind)

    def clear(self) -> int:
        with self._failures():
            dropped = int(self._writable("clear").clear())
        with self._failures(SCORES_FILE):
            return dropped + self._score_table.delete()

    def prune(self, older_than_seconds: float) -> int:
        """Drop entries stored more than `older_than_seconds` ago; returns how many were dropped."""
        cutoff = time.time() - older_than_seconds
        dropped = 0
        with self._failures():
            store = self._writable("prune")
            for key in list(store):
                entry = store.get(key)
                if entry is not None and _entry(entry)["stored_at"] < cutoff and store.delete(key):
                    dropped += 1
        with self._failures(SCORES_FILE):
            return dropped + self._score_table.delete(older_than=cutoff)

    def _writable(self, action: str) -> diskcache.Cache:
        store = self._store
        if not isinstance(store, diskcache.Cache):
            raise ConfigError(f"cache folder {self.directory}: read-only, cannot {action} it")
        return store

    # --- the same, off the event loop: run on the cache's worker thread, awaited in order ------------------
    async def aget(self, key: str) -> dict[str, Any] | None:
        return await self._off_loop(self.get, key)

    async def aset(self, key: str, value: dict[str, Any]) -> None:
        await self._off_loop(self.set, key, value)

    async def aclaim_unless_stored(
        self, key: str, holder: str, seconds: float
    ) -> tuple[bool, dict[str, Any] | None]:
        """In one trip to the worker thread: the answer stored under `key` if there is one by now, else whether
        the lease on it was taken (and, once taken, whether the answer arrived just before). Queued with the
        writes, so it sees every answer stored before it was asked."""
        if self._opened_read_only():
            return self._claim_unless_stored(key, holder, seconds)
        answer: asyncio.Future[tuple[bool, dict[str, Any] | None]] = (
            asyncio.get_running_loop().create_future()
        )
        self._enqueue(_Queued(self._claim_unless_stored, (key, holder, seconds), answer))
        return await answer

    def _claim_unless_stored(
        self, key: str, holder: str, seconds: float
    ) -> tuple[bool, dict[str, Any] | None]:
        claimed = self.claim(key, holder, seconds)
        return claimed, self.get(key)

    async def arelease(self, key: str, holder: str) -> None:
        await self._off_loop(self.release, key, holder)

    def store_soon(self, key: str, value: dict[str, Any]) -> None:
        """Store `value` on the worker thread without waiting for the commit. Work on the thread runs in the
        order asked, so a lease released after this (release_soon) is released after the answer is stored, and a
        later claim or lookup of `key` (aclaim_unless_stored, aget) finds it."""
        self._soon(self.set, key, value)

    def renew_soon(self, key: str, holder: str, seconds: float) -> None:
        """`renew`, on the worker thread, without waiting."""
        self._soon(self.renew, key, holder, seconds)

    def release_soon(self, key: str, holder: str) -> None:
        """`release`, on the worker thread, without waiting (after everything asked for before)."""
        self._soon(self.release, key, holder)

    def _soon(self, work: Callable[..., None], *args: Any) -> None:
        if self._opened_read_only():
            work(*args)
            return
        self._enqueue(_Queued(work, args, None))

    def _opened_read_only(self) -> bool:
        """Opens the folder if need be, on the caller's thread, and says whether it is read-only: then its work
        runs right here, since a read-only folder has no writes to wait for and its one SQLite handle may not be
        used from another thread."""
        if isinstance(self._opened, diskcache.Cache):  # opened already: asked on every call, answered cheaply
            return False
        with self._failures():
            return not isinstance(self._store, diskcache.Cache)

    def _enqueue(self, item: _Queued) -> None:
        self._raise_failed_writes()
        with self._queue_lock:
            self._queued.append(item)
            if self._draining:
                return  # the worker's drain under way takes this one too
            self._draining = True
        self._thread().submit(self._drain)

    def _drain(self) -> None:
        """On the worker thread: run what was queued, in order, one transaction per batch, until none is left.
        Work asked of the thread after a write (a lookup) runs after this, so it sees the write. Answers are
        handed back only once their batch is committed."""
        store = self._store
        assert isinstance(store, diskcache.Cache)
        while True:
            with self._queue_lock:
                batch, self._queued = self._queued, []
                if not batch:
                    self._draining = False
                    return
            done: list[tuple[_Queued, Any, BaseException | None]]
            try:
                with self._failures(), store.transact():
                    done = [(item, item.work(*item.args), None) for item in batch]
            except BaseException:
                # The batch was rolled back: each item again on its own, so one bad write costs only itself.
                done = [item.run_alone() for item in batch]
            for item, _, error in done:
                if error is not None and item.answer is None:
                    with self._queue_lock:  # raised to the event loop's side later, never lost
                        self._write_error = self._write_error or error
            _hand_back(
                [(item.answer, value, error) for item, value, error in done if item.answer is not None]
            )

    def _raise_failed_writes(self) -> None:
        if self._write_error is None:
            return
        with self._queue_lock:
            error, self._write_error = self._write_error, None
        if error is not None:
            raise error

    def _thread(self) -> ThreadPoolExecutor:
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prbj-cache")
        return self._worker

    async def _off_loop(self, work: Callable[..., T], *args: Any) -> T:
        if self._opened_read_only():
            return work(*args)
        self._raise_failed_writes()
        # Shielded: a caller cancelled mid-way (Ctrl-C) does not cancel the work, so a stored answer or a
        # released lease is never half done; later work on the thread waits for it.
        return await asyncio.shield(asyncio.wrap_future(self._thread().submit(work, *args)))

    def close(self) -> None:
        try:
            if self._scores is not None:
                scores, self._scores = self._scores, None
                with self._failures(SCORES_FILE):
                    scores.close()
        finally:
            self._close_store()

    def _close_store(self) -> None:
        if self._worker is not None:
            # Finish what was asked for, then close the worker thread's own SQLite connection.
            worker, self._worker = self._worker, None
            if isinstance(self._opened, diskcache.Cache):
                worker.submit(self._opened.close)
            worker.shutdown(wait=True)
        if self._opened is not None:
            self._opened.close()
            self._opened = None
        self._raise_failed_writes()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True, slots=True)
class _Queued:
    """Work for the cache's thread; `answer` is the event loop's future awaiting its result, if anyone waits."""

    work: Callable[..., Any]
    args: tuple[Any, ...]
    answer: asyncio.Future[Any] | None

    def run_alone(self) -> tuple[_Queued, Any, BaseException | None]:
        try:
            return self, self.work(*self.args), None
        except BaseException as err:
            return self, None, err


def _hand_back(results: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    """From the cache's thread: set the awaited results on their event loop, in one wake-up per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]] = {}
    for result in results:
        by_loop.setdefault(result[0].get_loop(), []).append(result)
    for loop, some in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(_settle_all, some)


def _settle_all(results: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, value, error in results:
        settle(future, value, error)


def _entry(entry: Any) -> dict[str, Any]:
    if (
        not isinstance(entry, dict)
        or "value" not in entry
        or not isinstance(entry.get("stored_at"), int | float)
    ):
        raise CorruptEntry("an entry lacks its value or time stamp")
    return entry


def _is_read_only_failure(error: BaseException) -> bool:
    if isinstance(error, PermissionError):
        return True
    text = str(error).lower()
    return "readonly" in text or "read-only" in text or "unable to open" in text
