"""The cache's table of numbers: one reward or probability per item of a reward model written in Python, in a
plain SQLite file of its own (`scores.db`) beside diskcache's index, in the same cache folder.

A fast model answers tens of thousands of items a second, and every item is its own entry (so an answer scored
once is never scored again, whatever it comes with). Through diskcache each entry cost a row with two indexes
and two trigger updates, and a JSON value to encode and decode; here it is a 16-byte key and a float in one
B-tree (`WITHOUT ROWID`): answers are committed a few thousand at a time, one INSERT statement each, on the
table's own writer thread; a batch of lookups is one SELECT, and no value is decoded.

Keys (`item_keys`) are a SHA-256 of everything the model is given for the item, cut to 128 bits: the part the
items of one request share is encoded (msgpack: every text framed by its length) and hashed once, and each
item's key hashes that digest with the item's own texts.

Two processes may share the folder: the file is in WAL mode (readers never wait for a writer), writers wait
for each other (`busy_timeout`), and a key already stored keeps its first value (`INSERT OR IGNORE`). The file
is untrusted input like the rest of the folder: a value that is not a finite number is read as absent (the item
is computed again), and a file of another format is refused rather than read.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

SCORES_FILE = "scores.db"
# What `prbj cache stats` counts the table's rows as (every row is a Python reward model's answer).
SCORES_KIND = "py-rm"
# The layout of the file (PRAGMA user_version); a file of another layout is refused, never read.
SCORES_FORMAT = 1
# Bytes of a key: 128 bits. The first PREFIX_BYTES name the model (a digest of its identity), so that one model's
# rows lie together (a new model's first run writes to a region of its own, however large the table) and a model
# with no rows at all is seen in one probe; the other 96 bits hash the item (2^48 items of one model before two
# are likely to meet in one key).
KEY_BYTES = 16
PREFIX_BYTES = 4
# Rows gathered for one commit, and the longest a row waits for its commit. A commit writes every page it
# touched to the log, and random keys touch a page each: a few thousand rows per commit cost half as much per
# row as a few hundred. A run stopped without closing the cache (killed) loses at most that long's answers.
ROWS_PER_COMMIT = 4096
COMMIT_WITHIN_SECONDS = 0.5
# How long a writer waits for another process's transaction (as diskcache does).
BUSY_SECONDS = 60.0
# Keys per SELECT, and rows per INSERT: a commit's rows in one statement (one trip into SQLite, the GIL let go
# once) where SQLite allows 32,766 parameters per statement (3.32 on), else 999.
KEYS_PER_QUERY = 500
ROWS_PER_INSERT = 8192 if sqlite3.sqlite_version_info >= (3, 32) else 499

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS scores (key BLOB PRIMARY KEY, value REAL NOT NULL, stored_at REAL NOT NULL) "
    "WITHOUT ROWID"
)
_sha256 = hashlib.sha256


@functools.cache
def _encoder() -> Callable[[Any], bytes]:
    """msgpack, imported when the first key is made: every command that opens the cache imports this module."""
    import msgspec

    return msgspec.msgpack.Encoder().encode


def digest(value: Any) -> bytes:
    """A SHA-256 of `value` (texts, numbers, None, bytes, lists and tuples of them), framed as item_keys frames."""
    return _sha256(_encoder()(value)).digest()


def item_keys(model: bytes, shared: Sequence[Any], each: Sequence[Sequence[str | None]]) -> tuple[bytes, ...]:
    """A key per `texts` of `each`: the model's prefix (`model`, a digest of its identity), then the hash of
    `model`, `shared` (texts, numbers, None, bytes, lists of them) and those texts. The shared part is hashed
    once, and each item's texts with that digest (cheaper than copying the hash)."""
    encode = _encoder()
    prefix = model[:PREFIX_BYTES]
    base = _sha256(encode((SCORES_FORMAT, SCORES_KIND, model, shared))).digest()
    cut = KEY_BYTES - PREFIX_BYTES
    return tuple([prefix + _sha256(base + encode(texts)).digest()[:cut] for texts in each])


class ScoreTable:
    """`scores.db` in a cache folder: lookups on the caller's thread, stores on the table's writer thread.

    Opened read-only (`read_only`), it serves what the file holds and stores nothing. SQLite's and the disk's
    errors are raised as they are (sqlite3.DatabaseError, OSError); the caller names the folder."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self._reader: sqlite3.Connection | None = None
        self._reading = threading.Lock()
        # Rows waiting for the writer thread, which inserts all that queued meanwhile in one transaction, once
        # ROWS_PER_COMMIT have queued or the first has waited COMMIT_WITHIN_SECONDS (or at once when `_urgent`).
        self._queued: list[tuple[bytes, float]] = []
        self._queue_lock = threading.Condition()
        self._draining = False
        self._urgent = False
        self._writer: ThreadPoolExecutor | None = None
        self._writer_db: sqlite3.Connection | None = None
        # A failed write nobody awaited: raised by the next call or by close(), never lost.
        self._error: BaseException | None = None

    # --- reading -----------------------------------------------------------------------------------------
    def _db(self, *, create: bool = True) -> sqlite3.Connection | None:
        """The connection lookups use (any thread, one at a time); None when there is no file and none is to be
        made (a read-only folder; `create` False)."""
        if self._reader is None:
            if not self.path.exists() and (self.read_only or not create):
                return None
            if self.read_only:
                uri = self.path.resolve().as_uri() + "?mode=ro&immutable=1"
                self._reader = _checked(sqlite3.connect(uri, uri=True, check_same_thread=False), create=False)
            else:
                self._reader = _checked(_connect(self.path, check_same_thread=False), create=True)
        return self._reader

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, float]:
        """The values stored under any of `keys`; a key absent, or whose value is not a finite number, is left
        out."""
        self._raise_failed_write()
        found: dict[bytes, float] = {}
        with self._reading:
            db = self._db()
            if db is None:
                return found
            for start in range(0, len(keys), KEYS_PER_QUERY):
                chunk = keys[start : start + KEYS_PER_QUERY]
                found.update(db.execute(_select(len(chunk)), chunk).fetchall())
        # `value REAL NOT NULL` holds floats (SQLite turns NaN into NULL, refused); the file is untrusted all the
        # same, so anything else (text, a blob, an infinity) is dropped.
        bad = [key for key, value in found.items() if type(value) is not float or value - value != 0.0]
        for key in bad:
            del found[key]
        return found

    def holds(self, model: bytes) -> bool:
        """Whether any row of the model whose digest is `model` is stored (one probe of the index): when none is,
        looking its items up would find nothing."""
        prefix = model[:PREFIX_BYTES]
        with self._reading:
            db = self._db(create=False)
            if db is None:
                return False
            row = db.execute(
                "SELECT key FROM scores WHERE key >= ? ORDER BY key LIMIT 1", (prefix,)
            ).fetchone()
        return row is not None and isinstance(row[0], bytes) and row[0].startswith(prefix)

    def count(self) -> int:
        with self._reading:
            db = self._db(create=False)
            return 0 if db is None else int(db.execute("SELECT COUNT(*) FROM scores").fetchone()[0])

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in (self.path, *_wal_files(self.path)) if p.exists())

    # --- writing -----------------------------------------------------------------------------------------
    def store_soon(self, rows: Sequence[tuple[bytes, float]]) -> None:
        """Store `rows` (key, finite value) on the writer thread, without waiting. A key already stored keeps its
        first value."""
        if self.read_only or not rows:
            return
        self._raise_failed_write()
        with self._queue_lock:
            self._queued.extend(rows)
            if len(self._queued) >= ROWS_PER_COMMIT:
                self._queue_lock.notify()
            if self._draining:
                return  # the writer's drain under way takes these too
            self._draining = True
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prbj-scores")
        self._writer.submit(self._drain)

    def _drain(self) -> None:
        """On the writer thread: commit what queued, a commit at a time, until nothing is left."""
        deadline = time.monotonic() + COMMIT_WITHIN_SECONDS
        while True:
            with self._queue_lock:
                while len(self._queued) < ROWS_PER_COMMIT and not self._urgent:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._queue_lock.wait(left)
                rows, self._queued = self._queued, []
                if not rows:
                    self._draining = False
                    return
            try:
                self._insert(rows)
            except BaseException as error:
                with self._queue_lock:
                    self._error = self._error or error
            deadline = time.monotonic() + COMMIT_WITHIN_SECONDS

    def _insert(self, rows: list[tuple[bytes, float]]) -> None:
        """On the writer thread: every row in one transaction, in one statement (ROWS_PER_INSERT: a few hundred
        per statement on an old SQLite)."""
        if self._writer_db is None:
            self._writer_db = _checked(_connect(self.path, check_same_thread=True), create=True)
        db = self._writer_db
        now = time.time()
        with _transaction(db):
            for start in range(0, len(rows), ROWS_PER_INSERT):
                chunk = rows[start : start + ROWS_PER_INSERT]
                db.execute(_insert(len(chunk)), [now, *[field for row in chunk for field in row]])

    def flush(self) -> None:
        """Wait until every row asked to be stored so far is committed (or its failure raised)."""
        if self._writer is not None:
            self._hurry()
            self._writer.submit(lambda: None).result()
            with self._queue_lock:
                self._urgent = False
        self._raise_failed_write()

    def _hurry(self) -> None:
        """Have the writer commit what is queued now, without waiting for more."""
        with self._queue_lock:
            self._urgent = True
            self._queue_lock.notify()

    def _raise_failed_write(self) -> None:
        if self._error is None:
            return
        with self._queue_lock:
            error, self._error = self._error, None
        if error is not None:
            raise error

    # --- upkeep (prbj cache clear, prune) ----------------------------------------------------------------
    def delete(self, older_than: float | None = None) -> int:
        """Delete the rows stored before `older_than` (a time.time() stamp), or all of them; how many went."""
        self.flush()
        if self.read_only:
            return 0
        with self._reading:
            db = self._db(create=False)
            if db is None:
                return 0
            with _transaction(db):
                if older_than is None:
                    return db.execute("DELETE FROM scores").rowcount
                return db.execute("DELETE FROM scores WHERE stored_at < ?", (older_than,)).rowcount

    def close(self) -> None:
        """Commit what is queued, then close; a failed write is raised here."""
        try:
            if self._writer is not None:
                self._hurry()
                writer, self._writer = self._writer, None
                writer.submit(self._close_writer_db)
                writer.shutdown(wait=True)
        finally:
            if self._reader is not None:
                self._reader.close()
                self._reader = None
        self._raise_failed_write()

    def _close_writer_db(self) -> None:
        if self._writer_db is not None:
            self._writer_db.close()
            self._writer_db = None


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """One transaction (the connection is in autocommit mode, where `with db:` would commit each statement)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:  # SQLite rolls some failures back itself
            db.execute("ROLLBACK")
        raise


def _connect(path: Path, *, check_same_thread: bool) -> sqlite3.Connection:
    # Autocommit (transactions are explicit: _transaction); WAL (set by _checked) so that readers, this process's
    # or another's, never wait for a writer; NORMAL sync as diskcache's own file (a power cut may lose the last
    # commits, never corrupt the file).
    db = sqlite3.connect(
        path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=check_same_thread
    )
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def _checked(db: sqlite3.Connection, *, create: bool) -> sqlite3.Connection:
    """`db` once its file is known to be a score table of this format (made so when `create` and it is new)."""
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version == 0 and create:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("BEGIN IMMEDIATE")  # two processes making the file at once: one makes it, one finds it
            try:
                version = db.execute("PRAGMA user_version").fetchone()[0]
                if version == 0 and _tables(db) == set():
                    db.execute(_SCHEMA)
                    db.execute(f"PRAGMA user_version={SCORES_FORMAT}")
                    version = SCORES_FORMAT
            finally:
                db.execute("COMMIT")
        if version != SCORES_FORMAT or "scores" not in _tables(db):
            raise sqlite3.DatabaseError(
                f"{SCORES_FILE} is of format {version}, this prbj reads {SCORES_FORMAT}"
            )
    except BaseException:
        db.close()
        raise
    return db


def _tables(db: sqlite3.Connection) -> set[str]:
    return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _wal_files(path: Path) -> tuple[Path, Path]:
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


@functools.cache
def _select(count: int) -> str:
    return f"SELECT key, value FROM scores WHERE key IN ({', '.join('?' * count)})"


@functools.cache
def _insert(count: int) -> str:
    """`count` rows (key, value) and one time stamp for all, a key already there kept as it is."""
    return (
        "INSERT OR IGNORE INTO scores (key, value, stored_at) SELECT column1, column2, ?1 FROM (VALUES "
        + ", ".join(["(?, ?)"] * count)
        + ")"
    )
