"""The per-user preference layout: one record is one preference of one user.

    user_id    string (or integer): who chose
    id         string (or integer), unique; absent: `<user_id>:<n>` for the user's n-th record without one
    prompt     the question, a string; or
    context    the conversation, a list of {role, content} turns (role user, assistant or system; `model` reads
               as assistant) ending with the user's turn the answers reply to
    chosen     the answer the user preferred: a string, or one {role, content} turn
    rejected   the other answer, the same way; or, for k candidates:
    responses  a list of k ≥ 2 answers (strings or turns), with one of
      preferred  the index (from 0) of the answer the user preferred,
      ranking    the indexes best first (a full ranking, or its top only),
      scores     one number per answer, higher is better
    split      train | val | test (`validation` reads as val); absent: the split a hub file's name says
               (train-*.parquet, validation-*.parquet, test-*.parquet), else test; a card maps other values
               (`split_map`)
    subset     optional string: the benchmark subset the record belongs to (default `default`; `all` is taken:
               it names every subset together)
    persona    optional string: a description of the user
    posts      optional list of what the user wrote or was told before this record (strings, or {text, id,
               category} objects): ranked by relevance to the question and shown like Personalized RewardBench's
               past posts (PersonaMem's conversation up to the question)
    groups     optional {name: value}: the record's groups for statistics (the user's age band or region, the
               item's tier, ...); give them on every test record
    facts      optional {name: value}: stated preferences and demographics a judge may be shown
    seen       optional true/false: whether the user's preferences trained the model being evaluated (PAL's seen
               and unseen users); only data that says so sets it

Only test records are judged. A user's train and val records, in file order (oldest first), are that user's
history: the earlier choices a judge is shown in the `profile` context, never another user's and never a test
record. persona, facts and seen describe the user: records of one user may repeat them or leave them out, but may
not disagree. How a record of several answers becomes what is judged (one best-of-k item or pairs) is
prbj.data.user_items'.

A conversation becomes the judge's question as its turns, one paragraph each (`User: ...`, `Assistant: ...`,
`System: ...`), the user's last turn last; a single user turn is the question as it is. Scalar reward models
score the turns themselves (prbj.judges.scalar).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from prbj.data.schema import Pair, Preference, ProfilePost, Turn
from prbj.data.user_items import ItemCounts, ItemRule, RankedAnswers, history_of, items_of
from prbj.data.validate import Location, RecordError, _identifier, _mapping, _summarise, _type_name
from prbj.errors import DataError

DEFAULT_SUBSET = "default"
# The name figures give every subset together (prbj.analysis.stats.ALL_SUBSETS): no subset may take it.
RESERVED_SUBSET = "all"
SPLITS = {"train": "train", "val": "val", "validation": "val", "test": "test"}
# What a card's split_map may map a value to: a split, or `drop` (the row is left out, counted in a note).
DROP = "drop"
SPLIT_TARGETS = ("train", "val", "test", DROP)
ROLES = {"user": "user", "human": "user", "assistant": "assistant", "model": "assistant", "system": "system"}
LABELS = {"user": "User", "assistant": "Assistant", "system": "System"}
# The group a loader may add for whether a user has any earlier choice (prbj.data.prism_loader).
HAS_HISTORY = "has_history"


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


@dataclass(frozen=True)
class ReadOptions:
    """How a card reads the layout: a field named by the column it came from (`rename`), the split values it
    maps (`split_map`), how rows of several answers are judged, and whether users get a `has_history` group."""

    rename: Callable[[str], str] | None = None
    split_map: Mapping[str, str] = field(default_factory=dict)
    rule: ItemRule = field(default_factory=ItemRule)
    history_group: bool = False

    def name(self, field_name: str) -> str:
        return self.rename(field_name) if self.rename else field_name


@dataclass(frozen=True, slots=True)
class UserRow:
    """One validated record, before users are put together."""

    location: Location
    user_id: str
    id: str | None
    turns: tuple[Turn, ...]
    answers: RankedAnswers
    split: str
    subset: str
    persona: str
    groups: tuple[tuple[str, str], ...]
    facts: tuple[tuple[str, str], ...]
    seen: bool | None
    posts: tuple[ProfilePost, ...] = ()


class UnknownSplit(RecordError):
    """A split value neither prbj nor the card's split_map knows (collected over the whole file)."""

    def __init__(self, value: str) -> None:
        super().__init__("split", f"unknown value {value!r}")
        self.value = value


def _text(value: Any, field_name: str) -> str:
    if type(value) is str and value and not value.isspace():
        return value
    if not isinstance(value, str):
        raise RecordError(field_name, f"expected a string, got {_type_name(value)}")
    if not value.strip():
        raise RecordError(field_name, "is empty")
    return value


def _turn(raw: Any, field_name: str) -> Turn:
    turn = _mapping(raw, field_name)
    role = turn.get("role")
    known = ROLES.get(role) if type(role) is str else None
    if known is None:
        if not isinstance(role, str) or role.strip().lower() not in ROLES:
            raise RecordError(f"{field_name}.role", f"expected one of user, assistant, system, got {role!r}")
        known = ROLES[role.strip().lower()]
    return known, _text(turn.get("content"), f"{field_name}.content")


def _answer(value: Any, field_name: str) -> str:
    if value is None:
        raise RecordError(field_name, "missing")
    if isinstance(value, Mapping):
        role, content = _turn(value, field_name)
        if role != "assistant":
            raise RecordError(
                f"{field_name}.role", f"an answer is the assistant's turn, got {value.get('role')!r}"
            )
        return content
    return _text(value, field_name)


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


def _index(value: Any, field_name: str, k: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(
            field_name, f"expected an index into 'responses' (0 to {k - 1}), got {_type_name(value)}"
        )
    if not 0 <= value < k:
        raise RecordError(field_name, f"expected an index into 'responses' (0 to {k - 1}), got {value}")
    return value


def _ranked(record: Mapping[str, Any]) -> RankedAnswers:
    """The answers and how the user ranked them: chosen over rejected, or k responses with the preferred one, a
    ranking or a score each."""
    responses = record.get("responses")
    if responses is None:
        if record.get("chosen") is None and record.get("rejected") is None and "preferred" in record:
            raise RecordError("responses", "missing (a 'preferred' index needs the list it points into)")
        chosen, rejected = (
            _answer(record.get("chosen"), "chosen"),
            _answer(record.get("rejected"), "rejected"),
        )
        return RankedAnswers((chosen, rejected), (0, 1))
    if record.get("chosen") is not None or record.get("rejected") is not None:
        raise RecordError("responses", "give either 'chosen' and 'rejected', or 'responses', not both")
    if not isinstance(responses, list | tuple) or len(responses) < 2:
        raise RecordError("responses", f"expected a list of at least 2 answers, got {_describe(responses)}")
    answers = tuple(_answer(raw, f"responses[{i}]") for i, raw in enumerate(responses))
    k = len(answers)
    given = [name for name in ("preferred", "ranking", "scores") if record.get(name) is not None]
    if len(given) != 1:
        raise RecordError(
            "preferred",
            "missing (give one of 'preferred', 'ranking' or 'scores' with 'responses')"
            if not given
            else f"give one of 'preferred', 'ranking' or 'scores', not {' and '.join(given)}",
        )
    if given[0] == "preferred":
        return RankedAnswers(answers, (_index(record["preferred"], "preferred", k),))
    if given[0] == "ranking":
        ranking = record["ranking"]
        if not isinstance(ranking, list | tuple) or not ranking:
            raise RecordError("ranking", f"expected a list of indexes, best first, got {_describe(ranking)}")
        order = tuple(_index(v, f"ranking[{i}]", k) for i, v in enumerate(ranking))
        if len(set(order)) != len(order):
            raise RecordError("ranking", "names an answer twice")
        return RankedAnswers(answers, order)
    scores = record["scores"]
    if not isinstance(scores, list | tuple) or len(scores) != k:
        raise RecordError("scores", f"expected {k} numbers, one per response, got {_describe(scores)}")
    values = []
    for i, value in enumerate(scores):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise RecordError(f"scores[{i}]", f"expected a finite number, got {_type_name(value)}")
        values.append(float(value))
    return RankedAnswers(answers, (), tuple(values))


def _describe(value: Any) -> str:
    return (
        f"{len(value)} item{'s' if len(value) != 1 else ''}"
        if isinstance(value, list | tuple)
        else _type_name(value)
    )


def _labels(record: Mapping[str, Any], field_name: str) -> tuple[tuple[str, str], ...]:
    value = record.get(field_name)
    if value is None:
        return ()
    table = _mapping(value, field_name)
    pairs = []
    for key, raw in table.items():
        if not isinstance(key, str) or not key.strip():
            raise RecordError(field_name, f"names must be non-empty strings, got {key!r}")
        if raw is None:
            continue
        if isinstance(raw, bool):
            raw = "true" if raw else "false"
        if not isinstance(raw, str | int | float):
            raise RecordError(f"{field_name}.{key}", f"expected a string or a number, got {_type_name(raw)}")
        pairs.append((key, str(raw)))
    return tuple(pairs)


def _posts(record: Mapping[str, Any]) -> tuple[ProfilePost, ...]:
    value = record.get("posts")
    if value is None:
        return ()
    if isinstance(value, tuple) and all(type(p) is ProfilePost for p in value):
        return value  # made by a loader (prbj.data.personamem_loader): shared between records, not copied
    if not isinstance(value, list | tuple):
        raise RecordError("posts", f"expected a list of texts, got {_type_name(value)}")
    posts = []
    for i, raw in enumerate(value):
        if isinstance(raw, str):
            posts.append(ProfilePost(f"post-{i + 1}", "", _text(raw, f"posts[{i}]")))
            continue
        post = _mapping(raw, f"posts[{i}]")
        text = _text(post.get("text"), f"posts[{i}].text")
        ident = _identifier(post, "id") if post.get("id") is not None else f"post-{i + 1}"
        posts.append(ProfilePost(ident, _optional_string(post, "category"), text))
    return tuple(posts)


def _optional_string(record: Mapping[str, Any], field_name: str) -> str:
    value = record.get(field_name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RecordError(field_name, f"expected a string, got {_type_name(value)}")
    return value.strip()


def _split(record: Mapping[str, Any], default: str, split_map: Mapping[str, str]) -> str:
    value = record.get("split")
    if value is None:
        return default
    if isinstance(value, str):
        known = SPLITS.get(value) or SPLITS.get(value.strip().lower())
        if value in split_map:
            return split_map[value]
        if known is not None:
            return known
        raise UnknownSplit(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError("split", f"expected a string, got {_type_name(value)}")
    mapped = split_map.get(str(value))
    if mapped is None:
        raise UnknownSplit(str(value))
    return mapped


def parse_user_row(
    location: Location, record: Any, default_split: str = "test", split_map: Mapping[str, str] | None = None
) -> UserRow:
    """One record of the layout; raises RecordError naming the field (UnknownSplit for a split value no one
    knows)."""
    record = _mapping(record, "record")
    subset = _optional_string(record, "subset") or DEFAULT_SUBSET
    if subset == RESERVED_SUBSET:
        raise RecordError("subset", "'all' names every subset together in the figures; choose another name")
    seen = record.get("seen")
    if seen is not None and not isinstance(seen, bool):
        raise RecordError("seen", f"expected true or false, got {_type_name(seen)}")
    return UserRow(
        location=location,
        # One string per user, shared by all their records' items (a big file repeats each id many times).
        user_id=sys.intern(_identifier(record, "user_id")),
        id=_identifier(record, "id") if record.get("id") is not None else None,
        turns=_turns(record),
        answers=_ranked(record),
        split=_split(record, default_split, split_map or {}),
        subset=subset,
        persona=_optional_string(record, "persona"),
        groups=tuple(sorted(_labels(record, "groups"))),
        facts=_labels(record, "facts"),
        seen=seen,
        posts=_posts(record),
    )


@dataclass(slots=True)
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
    # Earlier choices the users' train and val records made: the users' histories.
    history_rows: int
    users: int
    # What reading decided that a reader should know (identical answers dropped, rows a split_map dropped).
    notes: tuple[str, ...] = ()


class _Splits:
    """Split values no one knows, with how many rows hold each and where the first was."""

    def __init__(self) -> None:
        self.found: dict[str, list[Any]] = {}

    def add(self, value: str, location: Location) -> None:
        self.found.setdefault(value, [0, location])[0] += 1

    def error(self, column: str) -> str:
        (first, (_, where)), *_ = self.found.items()
        listed = ", ".join(
            f"{value!r} ({n} row{'s' if n != 1 else ''})" for value, (n, _) in self.found.items()
        )
        return (
            f"{where}: field '{column}': unknown value {first!r}; values found that are not train, val or test: "
            f"{listed}; map each to train, val, test or drop in the card's [data] split_map "
            f'(e.g. split_map = {{ {first} = "test" }})'
        )


def validate_user_records(
    records: Iterable[tuple[Location, Any]], options: ReadOptions | None = None
) -> UserData:
    """Every record parsed, users put together; one DataError whose first line names the first problem (a field
    by the column a card read it from). A history record becomes the user's earlier choices as it is read (its
    conversation rendered once, its turns let go); test records are kept until every history is complete."""
    options = options or ReadOptions()
    tests: list[UserRow | None] = []
    problems: list[str] = []
    splits = _Splits()
    # What records say about their users, for the users they say anything about.
    users: dict[str, _User] = {}
    counts: dict[str, int] = {}
    # Ids the records give (an id prbj makes, `<user_id>:<n>`, is unique by construction unless one of these
    # takes it: those are not stored, so a file without ids holds no table of them).
    given: dict[str, Location] = {}
    file_splits: dict[str, str] = {}
    items = ItemCounts(margin=options.rule.tie_margin)
    histories: dict[str, list[Preference]] = {}
    dropped = 0
    for location, record in records:
        default = file_splits.get(location.source)
        if default is None:
            default = file_splits[location.source] = split_of_file(location.source)
        try:
            row = parse_user_row(location, record, default, options.split_map)
            if row.persona or row.facts or row.seen is not None:
                users.setdefault(row.user_id, _User()).merge(row)
        except UnknownSplit as err:
            splits.add(err.value, location)
            continue
        except RecordError as err:
            problems.append(f"{location}: field '{options.name(err.field)}': {err.problem}")
            continue
        taken = _taken_id(row, counts, given)
        if isinstance(taken, str):
            problems.append(f"{location}: field '{options.name('id')}': {taken}")
            continue
        row_id = taken[0]
        if row.split == DROP:
            dropped += 1
        elif row.split != "test":
            if problems or splits.found:
                continue  # the read ends in an error: no need to render what would be thrown away
            prompt = render_conversation(row.turns)
            earlier = history_of(row_id, prompt, row.answers, options.rule, items)
            if earlier:
                histories.setdefault(row.user_id, []).extend(earlier)
        else:
            tests.append(row if row.id is not None else _with_id(row, row_id))
    if splits.found:
        raise DataError(splits.error(options.name("split")))
    if problems:
        raise DataError(_summarise(problems))
    del counts
    earlier_choices = sum(len(h) for h in histories.values())
    pairs, judged = _judged(tests, users, _frozen(histories), options, items, given)
    notes = items.notes()
    if dropped:
        notes.append(
            f"{dropped} row{'s' if dropped != 1 else ''} of a split the card's split_map drops left out"
        )
    return UserData(pairs, earlier_choices, judged, tuple(notes))


def _taken_id(row: UserRow, counts: dict[str, int], given: dict[str, Location]) -> tuple[str] | str:
    """The record's id (its own, or `<user_id>:<n>` for a user's n-th record without one), or why it cannot
    have it (a duplicate)."""
    if row.id is None:
        counts[row.user_id] = counts.get(row.user_id, 0) + 1
        made = f"{row.user_id}:{counts[row.user_id]}"
        if made in given:
            return f"duplicate id {made!r} (first seen at {given[made]})"
        return (made,)
    if row.id in given:
        return f"duplicate id {row.id!r} (first seen at {given[row.id]})"
    user, _, number = row.id.rpartition(":")
    if number.isdigit() and number[0] != "0" and int(number) <= counts.get(user, 0):
        return f"duplicate id {row.id!r} (the id of user {user!r}'s record number {number} without an id)"
    given[row.id] = row.location
    return (row.id,)


def _frozen(histories: dict[str, list[Preference]]) -> dict[str, tuple[Preference, ...]]:
    """Each user's history as the one tuple all their items share (each list let go as it is turned)."""
    frozen: dict[str, tuple[Preference, ...]] = {}
    while histories:
        user, history = histories.popitem()
        frozen[user] = tuple(history)
    return frozen


def _with_id(row: UserRow, row_id: str) -> UserRow:
    return UserRow(
        row.location,
        row.user_id,
        row_id,
        row.turns,
        row.answers,
        row.split,
        row.subset,
        row.persona,
        row.groups,
        row.facts,
        row.seen,
        row.posts,
    )


def _judged(
    tests: list[UserRow | None],
    users: Mapping[str, _User],
    histories: Mapping[str, tuple[Preference, ...]],
    options: ReadOptions,
    counts: ItemCounts,
    rows: Mapping[str, Location],
) -> tuple[list[Pair], int]:
    """The test rows' items, each with its user's whole history; each row is let go once its items are made.
    `rows`: every record's id, which the pairs a record makes (`<id>-<n>`) may not take."""
    pairs: list[Pair] = []
    judged: set[str] = set()
    ids: dict[str, Location] = {}
    nobody = _User()
    for index, row in enumerate(tests):
        assert row is not None
        tests[index] = None
        made = items_of(str(row.id), row.answers, options.rule, counts)
        if not made:
            continue
        user = users.get(row.user_id, nobody)
        history = histories.get(row.user_id, ())
        groups = row.groups
        if options.history_group:
            groups = tuple(sorted((*groups, (HAS_HISTORY, "yes" if history else "no"))))
        question = render_conversation(row.turns)
        turns = row.turns if len(row.turns) > 1 or row.turns[0][0] != "user" else ()
        for item_id, chosen, rejected, others in made:
            if item_id != row.id:
                taken = ids.get(item_id) or rows.get(item_id)
                if taken is not None:
                    raise DataError(
                        f"{row.location}: field '{options.name('id')}': the pairs of this record take the id "
                        f"{item_id!r} of the record at {taken}"
                    )
                ids[item_id] = row.location
            pairs.append(
                Pair(
                    id=item_id,
                    category=row.subset,
                    question=question,
                    profile=row.posts,
                    narrative="",
                    rubric_aspects=(),
                    chosen=chosen,
                    rejected=rejected,
                    user_id=row.user_id,
                    groups=groups,
                    seen=user.value("seen", None),
                    turns=turns,
                    history=history,
                    persona=user.value("persona", ""),
                    facts=user.value("facts", ()),
                    others=others,
                )
            )
        judged.add(row.user_id)
    return pairs, len(judged)
