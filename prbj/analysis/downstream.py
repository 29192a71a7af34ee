"""The downstream table: how much each reward model helped a policy, per source (BoN, PPO, ...), subset and k.

One Parquet file, `<store>/downstream.parquet`, one row per (rm, source, subset, k):

| column | type | meaning |
|---|---|---|
| rm | str | reward model name, as `prbj correlate` matches it against benchmark results |
| source | str | how the outcome was produced: "bon", "ppo", or any label the user picks |
| subset | str | benchmark subset the policy was evaluated on ("all" for an overall figure) |
| k | int, nullable | best-of-k for BoN; null when the source has no k (PPO) |
| score | float | mean gold score of the policy's answers (higher = better) |
| n | int, nullable | number of evaluated questions |
| std | float, nullable | standard deviation of the per-question scores |
| origin | str | the file the row was read from |
| scale | float | top of the scale `score` is on: always 1.0 in the store (every score lies on [0, 1]) |
| original_scale | float, nullable | top of the scale the source file used when it was converted on ingest |

One scale: prbj's BoN gold scores are means on [0, 1]; the official `evaluation_summary.json` holds means on
the official 0-2 scale. Official files are divided by 2 on ingest (with a note, see `conversions`), records may
name their own `scale` (e.g. 10 for 0-10) and are converted the same way, and `add_outcomes` refuses any row not
on [0, 1], so a table can never mix scales unconverted.

Adding rows replaces rows with the same (rm, source, subset, k), so re-ingesting a file updates it. A prbj BoN
run directory feeds this table by holding a `downstream.parquet` with these columns (origin optional); the
official `evaluation_summary.json` shape and PPO result tables are read too (see `read_outcomes`).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from prbj.data.files import json_problem, read_json, write_parquet
from prbj.data.validate import Location
from prbj.errors import ConfigError, DataError

DEFAULT_STORE = Path("reports/downstream")
STORE_FILE = "downstream.parquet"
SUMMARY_FILE = "evaluation_summary.json"
KEY = ("rm", "source", "subset", "k")
SCHEMA: dict[str, Any] = {
    "rm": pl.String,
    "source": pl.String,
    "subset": pl.String,
    "k": pl.Int64,
    "score": pl.Float64,
    "n": pl.Int64,
    "std": pl.Float64,
    "origin": pl.String,
    "scale": pl.Float64,
    "original_scale": pl.Float64,
}
REQUIRED_RECORD_FIELDS = ("rm", "subset", "score")
# The official gold judge scores each aspect 0, 1 or 2; the store's scale is [0, 1].
OFFICIAL_SCALE = 2.0
UNIT_SCALE = 1.0


@dataclass(frozen=True, slots=True)
class Outcome:
    rm: str
    source: str
    subset: str
    k: int | None
    score: float
    n: int | None
    std: float | None
    origin: str
    # Top of the scale `score` and `std` are on; `original_scale` is set once a row has been converted.
    scale: float = UNIT_SCALE
    original_scale: float | None = None

    def on_unit_scale(self) -> Outcome:
        """This outcome with score and std divided onto [0, 1] (itself when it is there already)."""
        if self.scale == UNIT_SCALE:
            return self
        if not self.scale > 0:
            raise DataError(f"{self.origin}: scale {self.scale}: expected a positive number")
        return replace(
            self,
            score=self.score / self.scale,
            std=None if self.std is None else self.std / self.scale,
            scale=UNIT_SCALE,
            original_scale=self.scale,
        )


def conversions(outcomes: Sequence[Outcome]) -> list[str]:
    """One note per source file whose scores were converted onto [0, 1] on ingest."""
    seen = {(o.origin, o.original_scale) for o in outcomes if o.original_scale is not None}
    return [
        f"{origin}: scores on a 0-{scale:g} scale divided by {scale:g} onto the store's 0-1 scale"
        for origin, scale in sorted(seen)
    ]


@dataclass(frozen=True, slots=True)
class AddResult:
    added: int
    replaced: int
    total: int
    path: Path


def empty_table() -> pl.DataFrame:
    return pl.DataFrame(schema=SCHEMA)


def outcomes_frame(outcomes: Sequence[Outcome]) -> pl.DataFrame:
    rows = [
        (o.rm, o.source, o.subset, o.k, o.score, o.n, o.std, o.origin, o.scale, o.original_scale)
        for o in outcomes  # tuples keep the column order of SCHEMA
    ]
    return pl.DataFrame(rows, schema=SCHEMA, orient="row")


def store_path(store: Path) -> Path:
    return store / STORE_FILE


def read_store(store: Path) -> pl.DataFrame:
    """The downstream table in `store`; a DataError when there is none yet."""
    path = store_path(store)
    if not path.exists():
        raise DataError(f"{path}: no downstream table yet; add outcomes with 'prbj downstream add FILE'")
    frame = _read_table_file(path)
    unknown = frame.filter(pl.col("scale").is_null())
    if unknown.height:
        # Written before rows recorded their scale: official files were stored on 0-2, prbj runs on 0-1.
        raise DataError(
            f"{path}: {unknown.height} row(s) stored before rows recorded their scale (e.g. from "
            f"{unknown['origin'][0]}): add those files again so every row is on the 0-1 scale"
        )
    return frame


def add_outcomes(store: Path, outcomes: Sequence[Outcome]) -> AddResult:
    """Upsert rows by (rm, source, subset, k); the file is replaced atomically."""
    if not outcomes:
        raise DataError("nothing to add: the input holds no outcomes")
    off_scale = next((o for o in outcomes if o.scale != UNIT_SCALE), None)
    if off_scale is not None:
        raise DataError(
            f"{off_scale.origin}: scores on a 0-{off_scale.scale:g} scale must be converted onto 0-1 before "
            "they are stored (Outcome.on_unit_scale)"
        )
    new = outcomes_frame(outcomes)
    duplicated = new.filter(pl.struct(list(KEY)).is_duplicated())
    if duplicated.height:
        rm, source, subset, k = duplicated.row(0)[:4]
        raise DataError(
            f"{duplicated['origin'][0]}: rm {rm!r}, source {source!r}, subset {subset!r}, k {k} appears twice"
        )
    path = store_path(store)
    old = _read_table_file(path) if path.exists() else empty_table()
    incoming = set(new.select(KEY).iter_rows())
    kept = old.filter(
        pl.Series([key not in incoming for key in old.select(KEY).iter_rows()], dtype=pl.Boolean)
    )
    merged = pl.concat([kept, new]).sort(["source", "subset", "rm", "k"], nulls_last=True)
    store.mkdir(parents=True, exist_ok=True)
    write_parquet(path, merged)
    return AddResult(
        added=new.height - (old.height - kept.height),
        replaced=old.height - kept.height,
        total=merged.height,
        path=path,
    )


def read_outcomes(path: Path, *, rm: str | None = None, source: str | None = None) -> list[Outcome]:
    """Outcomes from one input, by its shape:

    - a folder holding `downstream.parquet` (a prbj BoN run, or another store) or `evaluation_summary.json`;
    - `*.parquet` with the downstream table's columns;
    - `evaluation_summary.json`-shaped JSON `{subset: {k: {k, num_examples, mean_score, std_score, ...}}}`,
      one RM per file, named with `rm` (source "bon" unless given);
    - CSV, JSON (a list of objects) or JSONL records with rm, subset, score and optionally source, k, n, std
      (source "ppo" unless given); `rm` fills in a missing rm column.
    """
    if path.is_dir():
        for name in (STORE_FILE, SUMMARY_FILE):
            if (path / name).exists():
                return read_outcomes(path / name, rm=rm, source=source)
        raise DataError(f"{path}: folder holds neither {STORE_FILE} nor {SUMMARY_FILE}")
    if not path.exists():
        raise DataError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        if rm is not None:
            raise ConfigError(f"{path}: --rm {rm!r} given but a downstream table names its RMs; drop --rm")
        return _from_table(path, source=source)
    if suffix == ".csv":
        return _from_records(_csv_records(path), path, rm=rm, source=source)
    if suffix == ".jsonl":
        return _from_records(_jsonl_records(path), path, rm=rm, source=source)
    if suffix == ".json":
        document = read_json(path)
        if isinstance(document, dict):
            return _from_evaluation_summary(document, path, rm=rm, source=source)
        if isinstance(document, list):
            records = (
                (Location(str(path), index, "record"), record) for index, record in enumerate(document, 1)
            )
            return _from_records(records, path, rm=rm, source=source)
        raise DataError(f"{path}: expected an object (evaluation_summary.json) or a list of records")
    raise DataError(
        f"{path}: unsupported file type {path.suffix or '(none)'}; use .json, .jsonl, .csv, .parquet"
    )


def _read_table_file(path: Path) -> pl.DataFrame:
    try:
        frame = pl.read_parquet(path)
    except Exception as err:  # polars raises several error types for unreadable files
        raise DataError(f"{path}: not a readable Parquet file ({type(err).__name__})") from err
    missing = [c for c in ("rm", "subset", "score") if c not in frame.columns]
    if missing:
        raise DataError(f"{path}: field '{missing[0]}': missing column")
    for column, dtype in SCHEMA.items():
        if column not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype=dtype).alias(column))
        else:
            try:
                frame = frame.with_columns(pl.col(column).cast(dtype, strict=True))
            except Exception as err:
                raise DataError(f"{path}: field '{column}': expected {dtype}") from err
    return frame.select(list(SCHEMA))


def _from_table(path: Path, *, source: str | None) -> list[Outcome]:
    frame = _read_table_file(path)
    outcomes = []
    for row_number, row in enumerate(frame.iter_rows(named=True), 1):
        record = {key: value for key, value in row.items() if value is not None}
        record.setdefault("origin", str(path))
        outcomes.append(
            _outcome(record, Location(str(path), row_number, "row"), rm=None, source=source, default="bon")
        )
    return outcomes


def _csv_records(path: Path) -> Iterable[tuple[Location, dict[str, Any]]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames:
            raise DataError(f"{path}:1: empty file; expected a header with rm, subset, score")
        for record in reader:
            # Empty cells are absent values, as in the nullable columns of the table.
            cleaned = {
                k.strip(): v.strip() for k, v in record.items() if k is not None and v not in (None, "")
            }
            yield Location(str(path), reader.line_num), cleaned


def _jsonl_records(path: Path) -> Iterable[tuple[Location, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield Location(str(path), line_number), json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(
                    f"{path}:{line_number}: invalid JSON: {json_problem(err, with_line=False)}"
                ) from err


def _from_records(
    records: Iterable[tuple[Location, Any]], path: Path, *, rm: str | None, source: str | None
) -> list[Outcome]:
    outcomes = []
    for location, record in records:
        if not isinstance(record, Mapping):
            raise DataError(f"{location}: expected an object with rm, subset, score")
        if rm is not None and "rm" in record:
            raise ConfigError(
                f"{location}: --rm {rm!r} given but the record has its own rm; drop one of them"
            )
        outcomes.append(
            _outcome({**record, "origin": str(path)}, location, rm=rm, source=source, default="ppo")
        )
    return outcomes


def _from_evaluation_summary(
    document: Mapping[str, Any], path: Path, *, rm: str | None, source: str | None
) -> list[Outcome]:
    if rm is None:
        raise ConfigError(
            f"{path}: an evaluation_summary.json holds one RM's results; name it with --rm NAME"
        )
    outcomes = []
    for subset, by_k in document.items():
        if not isinstance(by_k, Mapping):
            raise DataError(f"{path}: field '{subset}': expected an object keyed by k")
        for k_key, entry in by_k.items():
            where = f"{subset}.{k_key}"
            if not isinstance(entry, Mapping):
                raise DataError(f"{path}: field '{where}': expected an object with mean_score")
            k = _integer(k_key, where, path)
            if "k" in entry and _integer(entry["k"], f"{where}.k", path) != k:
                raise DataError(f"{path}: field '{where}.k': {entry['k']} disagrees with its key {k_key}")
            outcomes.append(
                Outcome(
                    rm=rm,
                    source=source or "bon",
                    subset=str(subset),
                    k=k,
                    score=_number(entry.get("mean_score"), f"{where}.mean_score", path),
                    n=_optional(entry, "num_examples", where, path, _integer),
                    std=_optional(entry, "std_score", where, path, _number),
                    origin=str(path),
                    scale=OFFICIAL_SCALE,
                ).on_unit_scale()
            )
    return outcomes


def _outcome(
    record: Mapping[str, Any], location: Location, *, rm: str | None, source: str | None, default: str
) -> Outcome:
    def text(field: str, fallback: str | None) -> str:
        value = record.get(field, fallback)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise DataError(f"{location}: field '{field}': missing")
        if not isinstance(value, str):
            raise DataError(f"{location}: field '{field}': expected a string, got {type(value).__name__}")
        return value.strip()

    where = str(location)
    return Outcome(
        rm=text("rm", rm),
        source=source or text("source", default),
        subset=text("subset", None),
        k=_integer(record["k"], "k", where) if record.get("k") is not None else None,
        score=_number(record.get("score"), "score", where),
        n=_integer(record["n"], "n", where) if record.get("n") is not None else None,
        std=_number(record["std"], "std", where) if record.get("std") is not None else None,
        origin=str(record.get("origin", location.source)),
        # A record without a scale is on [0, 1], like prbj's own rows.
        scale=_number(record["scale"], "scale", where) if record.get("scale") is not None else UNIT_SCALE,
    ).on_unit_scale()


def _optional(entry: Mapping[str, Any], key: str, where: str, path: Path | str, parse: Any) -> Any:
    return parse(entry[key], f"{where}.{key}", path) if entry.get(key) is not None else None


def _number(value: Any, field: str, where: Path | str) -> float:
    if isinstance(value, bool) or value is None:
        raise DataError(f"{where}: field '{field}': {'missing' if value is None else 'expected a number'}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DataError(f"{where}: field '{field}': expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise DataError(f"{where}: field '{field}': expected a finite number, got {value!r}")
    return number


def _integer(value: Any, field: str, where: Path | str) -> int:
    number = _number(value, field, where)
    if not number.is_integer() or number < 0:
        raise DataError(f"{where}: field '{field}': expected a non-negative integer, got {value!r}")
    return int(number)
