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

from prbj.data.dataset import Blob, blob_records, lines_records
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
            continue
        try:
            data = path.read_bytes()
        except OSError as err:
            raise DataError(f"{path}: cannot read: {err.strerror or err}") from None
        digest.update(f"{len(data)}:".encode())
        digest.update(data)
        yield from blob_records(Blob(str(path), data))


def first_record(path: Path) -> Any:
    """The first record of a file, read without reading the rest of a JSONL file (None for an empty file)."""
    lines = file_lines(path, _NoDigest()) if path.suffix == ".jsonl" else None
    records = lines_records(str(path), lines) if lines is not None else None
    if records is None:
        try:
            records = blob_records(Blob(str(path), path.read_bytes()))
        except OSError as err:
            raise DataError(f"{path}: cannot read: {err.strerror or err}") from None
    for _, record in records:
        return record
    return None


class _NoDigest:
    def update(self, _: bytes) -> None:
        return None
