"""A benchmark's pairs in memory (`Dataset`) and the files they are read from: JSONL, JSON and Parquet records,
each with the place it came from, and the hash of the bytes read (the dataset's fingerprint)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from prbj.data.files import json_problem
from prbj.data.json_limits import deep_field, loads
from prbj.data.names import did_you_mean
from prbj.data.schema import Pair
from prbj.data.validate import Location
from prbj.errors import DataError

_TOO_DEEP = "nested too deeply (objects and lists inside one another, hundreds of levels down)"
DATA_SUFFIXES = frozenset({".jsonl", ".json", ".parquet"})
# A card's loader may read CSV files too (PersonaMem publishes its questions so); a dataset read without a card
# never takes them.
CARD_SUFFIXES = DATA_SUFFIXES | {".csv"}


@dataclass(frozen=True)
class Dataset:
    source: str
    pairs: tuple[Pair, ...]
    # sha256 of the bytes the pairs were read from (every file, in load order), or of the parent dataset's
    # fingerprint and the ids kept by a selection; None for pairs made in memory.
    content_hash: str | None = None
    # Which benchmark the pairs are (its card's name and version; the card file for a user's own card).
    benchmark: str = "prb"
    benchmark_version: str = "1"
    card: str | None = None
    # Records read that are not judged: the users' earlier choices (train and val rows).
    history_rows: int = 0
    # What reading the data decided that a reader should know (e.g. tied ratings dropped).
    notes: tuple[str, ...] = ()
    # The fingerprint of the whole dataset a selection was taken from (None when this is the whole of it).
    selected_from: str | None = None

    @property
    def benchmark_record(self) -> dict[str, str]:
        """How run.json names the benchmark: enough to read the same pairs again."""
        record = {"name": self.benchmark, "version": self.benchmark_version}
        return record | ({"card": self.card} if self.card else {})

    @property
    def users(self) -> int:
        return len({p.user_id for p in self.pairs})

    @property
    def subsets(self) -> list[str]:
        return sorted({p.category for p in self.pairs})

    def fingerprint(self) -> str:
        """What run files, baselines and leaderboard groups record as "the same data": the hash of the bytes
        the pairs were read from (a re-export to another format or order is another dataset), so it costs one
        pass of sha256 over the files and no per-pair work. Pairs made in memory hash their fields instead."""
        known: str | None = self.__dict__.get("_fingerprint")
        if known is None:
            known = self.content_hash or _fields_hash(self.pairs)
            known = self.__dict__["_fingerprint"] = known[:16]
        return known

    def keep(self, pairs: Sequence[Pair]) -> Dataset:
        """This dataset narrowed to `pairs` (a selection of its own pairs, in their order); its fingerprint
        names both the source and what was kept."""
        kept = tuple(pairs)
        if kept == self.pairs:
            return self
        digest = hashlib.sha256(self.fingerprint().encode())
        for pair in kept:
            digest.update(b"\n" + pair.id.encode())
        # A fresh instance: the parent's remembered fingerprint must not carry over.
        return replace(
            self,
            pairs=kept,
            content_hash=digest.hexdigest(),
            selected_from=self.selected_from or self.fingerprint(),
        )

    def select(self, subsets: Sequence[str] = (), limit: int | None = None) -> Dataset:
        """Keep the named subsets (all when none are named), then the first `limit` pairs of each subset."""
        pairs = list(self.pairs)
        if subsets:
            wanted = {match_subset(name, self.subsets) for name in subsets}
            pairs = [p for p in pairs if p.category in wanted]
        if limit is not None:
            taken: dict[str, int] = {}
            kept = []
            for pair in pairs:
                if taken.get(pair.category, 0) < limit:
                    taken[pair.category] = taken.get(pair.category, 0) + 1
                    kept.append(pair)
            pairs = kept
        return self.keep(pairs)


def _fields_hash(pairs: Sequence[Pair]) -> str:
    """sha256 over every field of every pair in id order, each string length-prefixed (so no two different
    datasets give the same byte stream)."""
    digest = hashlib.sha256()
    for pair in sorted(pairs, key=lambda p: p.id):
        parts = [pair.id, pair.category, pair.question, pair.narrative, pair.chosen, pair.rejected]
        if (
            pair.user_id != pair.id
            or pair.groups
            or pair.seen is not None
            or not pair.user_profile.only_posts
            or pair.others
        ):
            # Users beyond Personalized RewardBench's one pair each (whose fingerprints stay what they were).
            parts += [pair.user_id, repr(pair.groups), repr(pair.seen), repr(pair.turns), *pair.others]
            parts += pair.user_profile.texts()
        parts.append(str(len(pair.profile)))
        for post in pair.profile:
            parts += (post.id, post.category, post.text)
        parts.append(str(len(pair.rubric_aspects)))
        for aspect in pair.rubric_aspects:
            parts += (aspect.aspect, aspect.evidence, aspect.reason)
        digest.update("".join([f"{len(part)}:{part}" for part in parts]).encode())
    return digest.hexdigest()


def match_subset(name: str, available: Sequence[str], *, within: str = "this dataset") -> str:
    """The subset `name` refers to: an exact name (any case) or an unambiguous prefix."""
    for subset in available:
        if subset.lower() == name.lower():
            return subset
    # Unambiguous prefixes ("art", "lifestyle", "society") save typing the long official names.
    matches = [s for s in available if s.lower().startswith(name.lower())]
    if len(matches) == 1:
        return matches[0]
    near = did_you_mean(name, available)
    raise DataError(f"--subset {name!r}: not in {within};{near} available: {', '.join(available)}")


def folder_files(folder: Path, *, with_csv: bool = False) -> list[Path]:
    """Every data file of a folder (.jsonl, .json, .parquet; and .csv for a card's loader), in name order, at any
    depth."""
    suffixes = CARD_SUFFIXES if with_csv else DATA_SUFFIXES
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in suffixes)
    if not files:
        raise DataError(f"--dataset {folder}: no .jsonl, .json or .parquet files in this folder")
    return files


def dataset_files(folder: Path) -> list[Path]:
    """Files of a dataset folder, as published on the hub (`<subset>/test-*.parquet`) or flat."""
    files = folder_files(folder)
    # A hub snapshot holds every split; the benchmark is the test split.
    split_files = [p for p in files if p.suffix == ".parquet" and p.name.startswith("test")]
    return split_files or files


@dataclass(frozen=True)
class Blob:
    """The bytes of one data file, with the name errors give it."""

    name: str
    data: bytes

    @property
    def suffix(self) -> str:
        return Path(self.name).suffix


def file_blobs(files: Sequence[Path]) -> list[Blob]:
    blobs = []
    for path in files:
        if path.suffix not in CARD_SUFFIXES:
            raise DataError(f"{path}: unsupported file type {path.suffix!r} (use .jsonl, .json or .parquet)")
        try:
            blobs.append(Blob(str(path), path.read_bytes()))
        except OSError as err:
            raise DataError(f"{path}: cannot read: {err.strerror or err}") from None
    return blobs


def _hash_file(digest: Any, data: bytes) -> None:
    # Length first, so that moving bytes from one file to the next changes the hash.
    digest.update(f"{len(data)}:".encode())
    digest.update(data)


def blobs_hash(blobs: Sequence[Blob], *extra: str) -> str:
    """sha256 over every blob's bytes (length first), then `extra` (e.g. a card's digest)."""
    digest = hashlib.sha256()
    for blob in blobs:
        _hash_file(digest, blob.data)
    for text in extra:
        digest.update(f"\n{text}".encode())
    return digest.hexdigest()


def blob_records(blob: Blob) -> Iterator[tuple[Location, Any]]:
    """The records of one file, each with where it came from."""
    if blob.suffix == ".parquet":
        return _parquet_records(Path(blob.name), blob.data)
    if blob.suffix == ".json":
        return _json_records(Path(blob.name), blob.data)
    if blob.suffix == ".csv":
        return _csv_records(Path(blob.name), blob.data)
    return jsonl_records(blob.name, blob.data)


def records_from_files(files: Sequence[Path], digest: Any = None) -> Iterator[tuple[Location, Any]]:
    """The records of `files`, in order; each file's bytes are added to `digest` (a hashlib object) if given."""
    for path in files:
        if path.suffix not in DATA_SUFFIXES:
            raise DataError(f"{path}: unsupported file type {path.suffix!r} (use .jsonl, .json or .parquet)")
        try:
            data = path.read_bytes()
        except OSError as err:
            raise DataError(f"{path}: cannot read: {err.strerror or err}") from None
        if digest is not None:
            _hash_file(digest, data)
        yield from blob_records(Blob(str(path), data))


def jsonl_records(source: str, data: bytes) -> Iterator[tuple[Location, Any]]:
    return lines_records(source, enumerate(data.split(b"\n"), start=1))


def lines_records(source: str, lines: Iterable[tuple[int, bytes]]) -> Iterator[tuple[Location, Any]]:
    """The records of a JSONL file's (line number, bytes) lines; a line that is not one names its place."""
    for number, raw in lines:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(
                f"{source}:{number}: not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1})"
            ) from None
        if not line.strip():
            continue
        try:
            record = loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{source}:{number}: bad JSON: {json_problem(err, with_line=False)}") from None
        except RecursionError:
            raise DataError(f"{source}:{number}: field '{deep_field(line)}': {_TOO_DEEP}") from None
        yield Location(source, number), record


def _json_records(path: Path, data: bytes) -> Iterator[tuple[Location, Any]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not valid UTF-8") from None
    try:
        data = loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: bad JSON: {json_problem(err, with_line=False)}") from None
    except RecursionError:
        raise DataError(f"{path}: {_TOO_DEEP}") from None
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON array of records, got {type(data).__name__}")
    for index, record in enumerate(data, start=1):
        yield Location(str(path), index, "record"), record


def _csv_records(path: Path, data: bytes) -> Iterator[tuple[Location, Any]]:
    """A CSV file's rows, every cell a string (its header names the columns); row n is line n + 1 of the file
    when no cell spans lines."""
    import io

    import polars as pl

    try:
        frame = pl.read_csv(io.BytesIO(data), infer_schema=False)
    except Exception as err:  # polars raises several types for unreadable files
        raise DataError(f"{path}: not a readable CSV file ({type(err).__name__}: {err})") from None
    for index, record in enumerate(frame.iter_rows(named=True), start=1):
        yield Location(str(path), index, "row"), record


def _parquet_records(path: Path, data: bytes) -> Iterator[tuple[Location, Any]]:
    import io

    import polars as pl

    try:
        frame = pl.read_parquet(io.BytesIO(data))
    except Exception as err:  # polars raises several types for unreadable files
        raise DataError(f"{path}: not a readable Parquet file ({type(err).__name__}: {err})") from None
    for index, record in enumerate(frame.iter_rows(named=True), start=1):
        yield Location(str(path), index, "row"), record
