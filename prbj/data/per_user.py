"""The per-user preference layout: one record is one preference of one user.

    user_id    string (or integer): who chose
    id         string (or integer), unique; absent: `<user_id>:<n>` for the user's n-th record without one
    prompt     the question, a string; or
    context    the conversation, a list of {role, content} turns (role user, assistant or system; `model` reads
               as assistant) ending with the user's turn the answers reply to
    chosen     the answer the user preferred: a string, or one {role, content} turn
    rejected   the other answer, the same way
    split      train | val | test (`validation` reads as val); absent: the split a hub file's name says
               (train-*.parquet, validation-*.parquet, test-*.parquet), else test
    subset     optional string: the benchmark subset the record belongs to (default `default`; `all` is taken:
               it names every subset together)
    persona    optional string: a description of the user
    groups     optional {name: value}: the record's groups for statistics (the user's age band or region, the
               item's tier, ...); give them on every test record
    facts      optional {name: value}: stated preferences and demographics a judge may be shown
    seen       optional true/false: whether the user appears in the benchmark's training data

Only test records are judged. A user's train and val records, in file order (oldest first), are that user's
history: the earlier choices a judge is shown in the `profile` context, never another user's and never a test
record. persona, facts and seen describe the user: records of one user may repeat them or leave them out, but may
not disagree.

A conversation becomes the judge's question as its turns, one paragraph each (`User: ...`, `Assistant: ...`,
`System: ...`), the user's last turn last; a single user turn is the question as it is. Scalar reward models
score the turns themselves (prbj.judges.scalar).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Any

from prbj.data.schema import Pair, Preference, Turn
from prbj.data.validate import Location, RecordError, _identifier, _mapping, _summarise, _type_name
from prbj.errors import DataError

DEFAULT_SUBSET = "default"
# The name figures give every subset together (prbj.analysis.stats.ALL_SUBSETS): no subset may take it.
RESERVED_SUBSET = "all"
SPLITS = {"train": "train", "val": "val", "validation": "val", "test": "test"}
ROLES = {"user": "user", "human": "user", "assistant": "assistant", "model": "assistant", "system": "system"}
LABELS = {"user": "User", "assistant": "Assistant", "system": "System"}


def is_per_user(record: Any) -> bool:
    """A record of this layout: it names its user."""
    return isinstance(record, Mapping) and "user_id" in record


def split_of_file(source: str) -> str:
    """The split a hub file's name says (`train-00000-of-00001.parquet`), else test."""
    name = PurePath(source).name.lower()
    for prefix in ("train", "validation", "val", "test"):
        if name.startswith(prefix):
            return SPLITS[prefix]
    return "test"


def render_conversation(turns: Iterable[Turn]) -> str:
    """The judge's question for a conversation: a single user turn as it is, else every turn labelled, the user's
    last turn last."""
    turns = list(turns)
    if len(turns) == 1 and turns[0][0] == "user":
        return turns[0][1]
    return "\n\n".join(f"{LABELS[role]}: {content}" for role, content in turns)


@dataclass(frozen=True, slots=True)
class UserRow:
    """One validated record, before users are put together."""

    location: Location
    user_id: str
    id: str | None
    turns: tuple[Turn, ...]
    chosen: str
    rejected: str
    split: str
    subset: str
    persona: str
    groups: tuple[tuple[str, str], ...]
    facts: tuple[tuple[str, str], ...]
    seen: bool | None


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise RecordError(field, f"expected a string, got {_type_name(value)}")
    if not value.strip():
        raise RecordError(field, "is empty")
    return value


def _turn(raw: Any, field: str) -> Turn:
    turn = _mapping(raw, field)
    role = turn.get("role")
    if not isinstance(role, str) or role.strip().lower() not in ROLES:
        raise RecordError(f"{field}.role", f"expected one of user, assistant, system, got {role!r}")
    return ROLES[role.strip().lower()], _text(turn.get("content"), f"{field}.content")


def _answer(record: Mapping[str, Any], field: str) -> str:
    value = record.get(field)
    if value is None:
        raise RecordError(field, "missing")
    if isinstance(value, Mapping):
        role, content = _turn(value, field)
        if role != "assistant":
            raise RecordError(
                f"{field}.role", f"an answer is the assistant's turn, got {value.get('role')!r}"
            )
        return content
    return _text(value, field)


def _turns(record: Mapping[str, Any]) -> tuple[Turn, ...]:
    prompt, context = record.get("prompt"), record.get("context")
    if prompt is not None and context is not None:
        raise RecordError("context", "give either 'prompt' or 'context', not both")
    if prompt is not None:
        return (("user", _text(prompt, "prompt")),)
    if context is None:
        raise RecordError("prompt", "missing (give 'prompt', a string, or 'context', a list of turns)")
    if not isinstance(context, list | tuple) or not context:
        raise RecordError("context", f"expected a non-empty list of turns, got {_type_name(context)}")
    turns = tuple(_turn(raw, f"context[{i}]") for i, raw in enumerate(context))
    if turns[-1][0] != "user":
        raise RecordError(
            f"context[{len(turns) - 1}].role", "the last turn must be the user's (the answers reply to it)"
        )
    return turns


def _labels(record: Mapping[str, Any], field: str) -> tuple[tuple[str, str], ...]:
    value = record.get(field)
    if value is None:
        return ()
    table = _mapping(value, field)
    pairs = []
    for key, raw in table.items():
        if not isinstance(key, str) or not key.strip():
            raise RecordError(field, f"names must be non-empty strings, got {key!r}")
        if raw is None:
            continue
        if isinstance(raw, bool):
            raw = "true" if raw else "false"
        if not isinstance(raw, str | int | float):
            raise RecordError(f"{field}.{key}", f"expected a string or a number, got {_type_name(raw)}")
        pairs.append((key, str(raw)))
    return tuple(pairs)


def _optional_string(record: Mapping[str, Any], field: str) -> str:
    value = record.get(field)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RecordError(field, f"expected a string, got {_type_name(value)}")
    return value.strip()


def parse_user_row(location: Location, record: Any, default_split: str = "test") -> UserRow:
    """One record of the layout; raises RecordError naming the field."""
    record = _mapping(record, "record")
    split = record.get("split")
    if split is None:
        split = default_split
    elif not isinstance(split, str) or split.strip().lower() not in SPLITS:
        raise RecordError("split", f"expected train, val or test, got {split!r}")
    subset = _optional_string(record, "subset") or DEFAULT_SUBSET
    if subset == RESERVED_SUBSET:
        raise RecordError("subset", "'all' names every subset together in the figures; choose another name")
    seen = record.get("seen")
    if seen is not None and not isinstance(seen, bool):
        raise RecordError("seen", f"expected true or false, got {_type_name(seen)}")
    row = UserRow(
        location=location,
        user_id=_identifier(record, "user_id"),
        id=_identifier(record, "id") if record.get("id") is not None else None,
        turns=_turns(record),
        chosen=_answer(record, "chosen"),
        rejected=_answer(record, "rejected"),
        split=SPLITS[split.strip().lower()],
        subset=subset,
        persona=_optional_string(record, "persona"),
        groups=tuple(sorted(_labels(record, "groups"))),
        facts=_labels(record, "facts"),
        seen=seen,
    )
    if row.chosen.strip() == row.rejected.strip():
        raise RecordError("rejected", "is identical to 'chosen'; a pair needs two different answers")
    return row


@dataclass
class _User:
    """What the records of one user say about them, with where each value was first given."""

    persona: tuple[str, Location] | None = None
    facts: tuple[tuple[tuple[str, str], ...], Location] | None = None
    seen: tuple[bool, Location] | None = None

    def merge(self, row: UserRow) -> None:
        for name, value, empty in (
            ("persona", row.persona, ""),
            ("facts", row.facts, ()),
            ("seen", row.seen, None),
        ):
            if value == empty:
                continue
            known = getattr(self, name)
            if known is None:
                setattr(self, name, (value, row.location))
            elif known[0] != value:
                raise RecordError(name, f"user {row.user_id!r} has another {name} at {known[1]}")

    def value(self, name: str, empty: Any) -> Any:
        known = getattr(self, name)
        return empty if known is None else known[0]


@dataclass(frozen=True)
class UserData:
    pairs: list[Pair]
    # Train and val records: the users' histories.
    history_rows: int
    users: int


def validate_user_records(
    records: Iterable[tuple[Location, Any]], rename: Callable[[str], str] | None = None
) -> UserData:
    """Every record parsed, users put together; one DataError whose first line names the first problem (a field
    by `rename(field)`: the column a card read it from)."""
    rows: list[UserRow] = []
    problems: list[str] = []
    users: dict[str, _User] = {}
    counts: dict[str, int] = {}
    seen_ids: dict[str, Location] = {}
    for location, record in records:
        try:
            row = parse_user_row(location, record, split_of_file(location.source))
            users.setdefault(row.user_id, _User()).merge(row)
        except RecordError as err:
            problems.append(
                f"{location}: field '{rename(err.field) if rename else err.field}': {err.problem}"
            )
            continue
        if row.id is None:
            counts[row.user_id] = counts.get(row.user_id, 0) + 1
        row_id = row.id if row.id is not None else f"{row.user_id}:{counts[row.user_id]}"
        if row_id in seen_ids:
            problems.append(
                f"{location}: field 'id': duplicate id {row_id!r} (first seen at {seen_ids[row_id]})"
            )
            continue
        seen_ids[row_id] = location
        rows.append(_with_id(row, row_id))
    if problems:
        raise DataError(_summarise(problems))
    histories: dict[str, list[Preference]] = {}
    for row in rows:
        if row.split != "test":
            prompt = render_conversation(row.turns)
            histories.setdefault(row.user_id, []).append(
                Preference(str(row.id), prompt, row.chosen, row.rejected)
            )
    # One tuple per user, shared by all of the user's pairs (a judge can tell a history it has seen by identity).
    shared = {user: tuple(history) for user, history in histories.items()}
    pairs = [
        _pair(row, users[row.user_id], shared.get(row.user_id, ())) for row in rows if row.split == "test"
    ]
    return UserData(
        pairs, sum(len(h) for h in histories.values()), len({r.user_id for r in rows if r.split == "test"})
    )


def _with_id(row: UserRow, row_id: str) -> UserRow:
    return replace(row, id=row_id)


def _pair(row: UserRow, user: _User, history: tuple[Preference, ...]) -> Pair:
    assert row.id is not None
    return Pair(
        id=row.id,
        category=row.subset,
        question=render_conversation(row.turns),
        profile=(),
        narrative="",
        rubric_aspects=(),
        chosen=row.chosen,
        rejected=row.rejected,
        user_id=row.user_id,
        groups=row.groups,
        seen=user.value("seen", None),
        turns=row.turns if len(row.turns) > 1 or row.turns[0][0] != "user" else (),
        history=history,
        persona=user.value("persona", ""),
        facts=user.value("facts", ()),
    )
