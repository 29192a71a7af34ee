"""Turn raw records (dicts) into `Pair`s, with errors that name where the problem is and which field."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from prbj.data.json_limits import LongNumber
from prbj.data.schema import Pair, ProfilePost, RubricAspect
from prbj.errors import DataError

# Records whose problems are listed in full before the rest are only counted: enough to fix a batch, short
# enough to read.
MAX_LISTED_ERRORS = 1

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Location:
    """Where a record came from: `file:line` for text files, `file row N` for tables."""

    source: str
    index: int
    unit: str = "line"

    def __str__(self) -> str:
        if self.unit == "line":
            return f"{self.source}:{self.index}"
        return f"{self.source} {self.unit} {self.index}"


class RecordError(Exception):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"field '{field}': {problem}")
        self.field = field
        self.problem = problem


class RecordErrors(RecordError):
    """Every problem of one record, so that one look at the message fixes the whole row."""

    def __init__(self, errors: list[RecordError]) -> None:
        super().__init__(errors[0].field, errors[0].problem)
        self.errors = errors
        self.args = ("; ".join(str(error) for error in errors),)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return repr(value) if isinstance(value, LongNumber) else type(value).__name__


def _string(record: Mapping[str, Any], field: str, *, required: bool = True, nonempty: bool = False) -> str:
    if field not in record or record[field] is None:
        if required:
            raise RecordError(field, "missing")
        return ""
    value = record[field]
    if not isinstance(value, str):
        raise RecordError(field, f"expected a string, got {_type_name(value)}")
    if nonempty and not value.strip():
        raise RecordError(field, "is empty")
    return value


def _identifier(record: Mapping[str, Any], field: str) -> str:
    value = record.get(field)
    # Some exports store ids as integers; they are identifiers all the same.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _string(record, field, nonempty=True)


def _list(record: Mapping[str, Any], field: str) -> list[Any]:
    if field not in record or record[field] is None:
        raise RecordError(field, "missing")
    value = record[field]
    if not isinstance(value, list | tuple):
        raise RecordError(field, f"expected a list, got {_type_name(value)}")
    return list(value)


def _mapping(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RecordError(field, f"expected an object, got {_type_name(value)}")
    return value


def _profile(record: Mapping[str, Any]) -> tuple[ProfilePost, ...]:
    posts = []
    for i, raw in enumerate(_list(record, "profile")):
        # The common case first, checked in one go (a full-size dataset holds ~100,000 posts); anything else
        # goes the field-by-field way below, which names what is wrong.
        if type(raw) is dict:
            post_id, category, text = raw.get("id"), raw.get("category"), raw.get("text")
            if (
                type(post_id) is str
                and type(category) is str
                and type(text) is str
                and post_id.strip()
                and text.strip()
            ):
                # Positional: a frozen dataclass built from keywords costs twice as much, ~100,000 times.
                posts.append(ProfilePost(post_id, category, text))
                continue
        where = f"profile[{i}]"
        post = _mapping(raw, where)
        try:
            posts.append(
                ProfilePost(
                    id=_identifier(post, "id"),
                    category=_string(post, "category", required=False),
                    text=_string(post, "text", nonempty=True),
                )
            )
        except RecordError as err:
            raise RecordError(where, str(err)) from None
    return tuple(posts)


def _rubric(record: Mapping[str, Any], *, required: bool = True) -> tuple[RubricAspect, ...]:
    """The rubric aspects; optional in a pair (only the oracle context shows them, and it refuses pairs without
    any), required where they are the input (LaMP-QA records that pairs are built from)."""
    if not required and record.get("rubric_aspects") is None:
        return ()
    aspects = []
    for i, raw in enumerate(_list(record, "rubric_aspects")):
        where = f"rubric_aspects[{i}]"
        item = _mapping(raw, where)
        try:
            aspects.append(
                RubricAspect(
                    aspect=_string(item, "aspect", nonempty=True),
                    evidence=_string(item, "evidence", required=False),
                    reason=_string(item, "reason", required=False),
                )
            )
        except RecordError as err:
            raise RecordError(where, str(err)) from None
    return tuple(aspects)


def benchmark_pair(
    pair_id: str,
    category: str,
    question: str,
    profile: tuple[ProfilePost, ...],
    narrative: str,
    rubric_aspects: tuple[RubricAspect, ...],
    chosen: str,
    rejected: str,
) -> Pair:
    """A Personalized RewardBench pair, however its record was read (here, or prbj.data.typed_records)."""
    return Pair(
        id=pair_id,
        category=category,
        question=question,
        profile=profile,
        narrative=narrative,
        rubric_aspects=rubric_aspects,
        chosen=chosen,
        rejected=rejected,
        # The benchmark has one pair per user: each pair is its own user.
        user_id=pair_id,
    )


def parse_pair(record: Any) -> Pair:
    """One record to a Pair; raises RecordError naming the field (RecordErrors naming each of several).
    `narrative` and `rubric_aspects`, the scoring standard, are optional: only the oracle context uses them."""
    record = _mapping(record, "record")
    problems: list[RecordError] = []

    def read(parse: Callable[[], T], default: T) -> T:
        try:
            return parse()
        except RecordError as err:
            problems.append(err)
            return default

    pair = benchmark_pair(
        read(lambda: _identifier(record, "id"), ""),
        read(lambda: _string(record, "category", nonempty=True), ""),
        read(lambda: _string(record, "question", nonempty=True), ""),
        read(lambda: _profile(record), ()),
        read(lambda: _string(record, "narrative", required=False), ""),
        read(lambda: _rubric(record, required=False), ()),
        read(lambda: _string(record, "chosen", nonempty=True), ""),
        read(lambda: _string(record, "rejected", nonempty=True), ""),
    )
    if pair.chosen.strip() and pair.chosen.strip() == pair.rejected.strip():
        problems.append(
            RecordError("rejected", "is identical to 'chosen'; a pair needs two different answers")
        )
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise RecordErrors(problems)
    return pair


def validate_records(records: Iterable[tuple[Location, Any]]) -> list[Pair]:
    """Parse every record; collect problems and raise one DataError whose first line names the first one."""
    seen: dict[str, Location] = {}

    def parse(location: Location, record: Any) -> Pair:
        pair = parse_pair(record)
        if pair.id in seen:
            raise RecordError("id", f"duplicate id {pair.id!r} (first seen at {seen[pair.id]})")
        seen[pair.id] = location
        return pair

    return parsed(records, parse)


def parsed(records: Iterable[tuple[Location, R]], parse: Callable[[Location, R], T]) -> list[T]:
    """`parse` of every record, in order. A record it refuses (RecordError) is named as `file:line: field '…': …`;
    once all are read, the problems are raised as one DataError naming the first and counting the rest."""
    results: list[T] = []
    problems: list[str] = []
    for location, record in records:
        try:
            results.append(parse(location, record))
        except RecordError as err:
            problems.append(f"{location}: {err}")
    if problems:
        raise DataError(_summarise(problems))
    return results


def _summarise(problems: list[str]) -> str:
    """The first bad record's problems, every one named; the records after it counted."""
    shown = "; ".join(problems[:MAX_LISTED_ERRORS])
    rest = len(problems) - MAX_LISTED_ERRORS
    return shown if rest <= 0 else f"{shown} (and {rest} more record{'s' if rest > 1 else ''} with problems)"
