"""Load benchmark pairs from JSONL/JSON files, Parquet files or folders, the HF hub, or the bundled sample."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any

from prbj.data.names import did_you_mean
from prbj.data.schema import Pair
from prbj.data.validate import Location, validate_records
from prbj.errors import DataError

SAMPLE = "sample"
HF_PREFIX = "hf:"
OFFICIAL_HF_DATASET = "QiyaoMa/Personalized-RewardBench"


@dataclass(frozen=True)
class Dataset:
    source: str
    pairs: tuple[Pair, ...]

    @property
    def subsets(self) -> list[str]:
        return sorted({p.category for p in self.pairs})

    def fingerprint(self) -> str:
        """A content hash of the pairs, independent of file format and record order; computed once per
        Dataset (it is frozen). The value is recorded in run files and CI baselines, so its definition stays:
        the sha256 of each pair's sorted-key JSON, in id order."""
        known: str | None = self.__dict__.get("_fingerprint")
        if known is None:
            digest = hashlib.sha256()
            encode = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode
            for pair in sorted(self.pairs, key=lambda p: p.id):
                digest.update(encode(_plain(pair)).encode())
            known = self.__dict__["_fingerprint"] = digest.hexdigest()[:16]
        return known

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
        return Dataset(self.source, tuple(pairs))


def _plain(pair: Pair) -> dict[str, Any]:
    """What dataclasses.asdict gives for a pair (its fields; tuples of posts or aspects as lists of their
    fields), without asdict's deep copies and generic recursion: a tenth of the time on a full-size dataset."""
    document: dict[str, Any] = {}
    for name in _field_names(Pair):
        value = getattr(pair, name)
        if isinstance(value, tuple):
            value = [{n: getattr(item, n) for n in _field_names(type(item))} for item in value]
        document[name] = value
    return document


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(kind: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = tuple(f.name for f in fields(kind))
    return names


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


def load_dataset(spec: str | None = None) -> Dataset:
    """`spec`: None or 'sample' (bundled demo), 'hf:<repo>', a .jsonl/.json/.parquet file, or a folder."""
    if spec is None or spec == SAMPLE:
        return _load_sample()
    if spec.startswith(HF_PREFIX):
        return _load_hf(spec[len(HF_PREFIX) :])
    path = Path(spec)
    if not path.exists():
        raise DataError(f"--dataset {spec}: no such file or folder")
    if path.is_dir():
        files = dataset_files(path)
        return Dataset(str(path), tuple(validate_records(records_from_files(files))))
    return Dataset(str(path), tuple(validate_records(records_from_files([path]))))


def _load_sample() -> Dataset:
    folder = resources.files("prbj.data") / "sample"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".jsonl")), key=lambda f: f.name)
    records: list[tuple[Location, Any]] = []
    for file in files:
        records.extend(jsonl_records(f"sample/{file.name}", file.read_bytes()))
    return Dataset(SAMPLE, tuple(validate_records(records)))


def dataset_files(folder: Path) -> list[Path]:
    """Files of a dataset folder, as published on the hub (`<subset>/test-*.parquet`) or flat."""
    files = sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix in {".jsonl", ".json", ".parquet"}
    )
    # A hub snapshot holds every split; the benchmark is the test split.
    split_files = [p for p in files if p.suffix == ".parquet" and p.name.startswith("test")]
    if split_files:
        files = split_files
    if not files:
        raise DataError(f"--dataset {folder}: no .jsonl, .json or .parquet files in this folder")
    return files


def records_from_files(files: Sequence[Path]) -> Iterator[tuple[Location, Any]]:
    for path in files:
        if path.suffix == ".parquet":
            yield from _parquet_records(path)
        elif path.suffix == ".json":
            yield from _json_records(path)
        elif path.suffix == ".jsonl":
            yield from jsonl_records(str(path), path.read_bytes())
        else:
            raise DataError(f"{path}: unsupported file type {path.suffix!r} (use .jsonl, .json or .parquet)")


def jsonl_records(source: str, data: bytes) -> Iterator[tuple[Location, Any]]:
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(
                f"{source}:{number}: not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1})"
            ) from None
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{source}:{number}: bad JSON at column {err.colno}: {err.msg}") from None
        yield Location(source, number), record


def _json_records(path: Path) -> Iterator[tuple[Location, Any]]:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        line = path.read_bytes()[: err.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not valid UTF-8") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: bad JSON at column {err.colno}: {err.msg}") from None
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON array of records, got {type(data).__name__}")
    for index, record in enumerate(data, start=1):
        yield Location(str(path), index, "record"), record


def _parquet_records(path: Path) -> Iterator[tuple[Location, Any]]:
    import polars as pl

    try:
        frame = pl.read_parquet(path)
    except Exception as err:  # polars raises several types for unreadable files
        raise DataError(f"{path}: not a readable Parquet file ({type(err).__name__}: {err})") from None
    for index, record in enumerate(frame.iter_rows(named=True), start=1):
        yield Location(str(path), index, "row"), record


def _load_hf(repo_id: str) -> Dataset:
    if not repo_id:
        raise DataError(f"--dataset hf:<repo>: no repository named (e.g. hf:{OFFICIAL_HF_DATASET})")
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(
            repo_id=repo_id, repo_type="dataset", allow_patterns=["*.parquet", "*.jsonl", "*.json"]
        )
    except Exception as err:  # network, auth and missing-repo errors all end the same way for the user
        cause = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(
            f"--dataset hf:{repo_id}: could not fetch it from the Hugging Face hub ({type(err).__name__}: "
            f"{cause}). Without network access, download the Parquet files elsewhere and pass their folder "
            f"with --dataset <folder>."
        ) from None
    files = [p for p in dataset_files(Path(folder)) if p.suffix != ".json" or p.name != "dataset_infos.json"]
    return Dataset(f"hf:{repo_id}", tuple(validate_records(records_from_files(files))))
