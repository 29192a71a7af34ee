"""Per-user files read as a stream: a JSONL file is read in chunks, each hashed into the dataset's fingerprint and
split into lines that are parsed one at a time, so that neither the file's bytes nor its records are all held at
once (a 1,000,000-row file is ~900 MB of text; held whole, with its records beside it, it took several GB).

The fingerprint is the very sha256 `dataset.blobs_hash` takes over whole files (each file's length, then its
bytes), so a dataset read either way has one fingerprint. Parquet and JSON files are read whole (their readers
need the whole file).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from prbj.data.dataset import Blob, blob_records, lines_records, records_from_files
from prbj.data.per_user import is_per_user
from prbj.data.validate import Location
from prbj.errors import DataError

CHUNK_BYTES = 16 * 1024 * 1024


def file_lines(path: Path, digest: Any) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of a file read in chunks, each chunk added to `digest` as it is read."""
    try:
        size = path.stat().st_size
        handle = path.open("rb")
    except OSError as err:
        raise DataError(f"{path}: cannot read: {err.strerror or err}") from None
    digest.update(f"{size}:".encode())
    number = 0
    carry = b""
    with handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
            lines = (carry + chunk).split(b"\n") if carry else chunk.split(b"\n")
            carry = lines.pop()
            for line in lines:
                number += 1
                yield number, line
    if carry:
        yield number + 1, carry


def streamed_records(files: Sequence[Path], digest: Any) -> Iterator[tuple[Location, Any]]:
    """The records of `files` in order, each file's bytes added to `digest` as `dataset.blobs_hash` adds them."""
    for path in files:
        if path.suffix == ".jsonl":
            yield from lines_records(str(path), file_lines(path, digest))
        else:
            yield from records_from_files([path], digest)


def names_its_users(path: Path) -> bool:
    """Whether a file is of the per-user layout (its first record names a user), read as little as it takes: a
    JSONL file to its first record, a Parquet file's schema only."""
    try:
        if path.suffix == ".jsonl":
            with path.open("rb") as handle:
                # Line by line from the buffered file: only as far as the first record.
                first = next((record for _, record in lines_records(str(path), enumerate(handle, 1))), None)
                return is_per_user(first)
        if path.suffix == ".parquet":
            import polars as pl

            try:
                return "user_id" in pl.read_parquet_schema(path)
            except Exception:  # not a readable Parquet file: the full read names the problem
                return False
        data = path.read_bytes()
    except OSError as err:
        raise DataError(f"{path}: cannot read: {err.strerror or err}") from None
    return is_per_user(next((record for _, record in blob_records(Blob(str(path), data))), None))
