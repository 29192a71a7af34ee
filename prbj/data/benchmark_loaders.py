"""Reading a benchmark through its card: the card's loader turns the source's files into the per-user layout
(prbj.data.per_user), which makes the pairs and the users' histories.

- `per-user`: records already in the layout, or mapped onto it by the card's [columns], [groups] and [facts]
  (a dotted column reads inside nested objects).
- `prism`: PRISM's `survey`, `utterances` and (optional) `conversations` files (HannahRoseKirk/prism-alignment).
  Within one turn of one conversation every two rated responses make a pair, the higher-rated one chosen, unless
  their scores are within the card's `tie_margin` of each other (a tie, as the PRISM authors count one when
  ranking models: no pair, counted in a note). A later turn's question is the conversation up to it: the user's
  earlier prompts and the response the conversation went on with (`if_chosen`) at each. Each user's last
  conversation is judged, their earlier ones are their history; a user with earlier conversations is `seen`.
  "Last" is by the conversations file's `generated_datetime` when every conversation of the user has one, else
  by file order. The survey gives the persona, facts and groups the card names.
- `persona-feedback`: PersonaFeedback's files, `data/<track>/<tier>.jsonl` (rows with `user_id`, the question and
  the two answers, mapped by [columns]) and a persona file (`persona/*.jsonl`, one persona per line: line n is
  user n). The track is the subset, the tier (easy, medium, hard) a group, the persona the profile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.abc import Traversable
from pathlib import PurePosixPath
from typing import Any

from prbj.data.cards import Card
from prbj.data.dataset import Blob, Dataset, blob_records, blobs_hash
from prbj.data.per_user import DEFAULT_SUBSET, UserData, validate_user_records
from prbj.data.validate import Location, RecordError, _summarise, _type_name
from prbj.errors import DataError

Records = Iterator[tuple[Location, Any]]


@dataclass
class Mapped:
    """Records in the per-user layout, how to name a field by the column it came from, and notes."""

    records: list[tuple[Location, Any]]
    rename: Callable[[str], str] | None = None
    notes: list[str] = field(default_factory=list)


def sample_blobs(folder: Traversable, prefix: str) -> list[Blob]:
    """Every data file of a shipped sample folder, in path order, named `<prefix>/<relative path>`."""
    found: list[tuple[str, Traversable]] = []

    def walk(node: Traversable, relative: str) -> None:
        for child in node.iterdir():
            path = f"{relative}/{child.name}" if relative else child.name
            if child.is_dir():
                walk(child, path)
            elif PurePosixPath(child.name).suffix in {".jsonl", ".json", ".parquet"}:
                found.append((path, child))

    walk(folder, "")
    return [Blob(f"{prefix}/{path}", node.read_bytes()) for path, node in sorted(found, key=lambda f: f[0])]


def read_with_card(card: Card, source: str, blobs: Sequence[Blob]) -> Dataset:
    """The pairs of `blobs` read by `card`'s loader."""
    loader = {"per-user": _per_user, "prism": _prism, "persona-feedback": _persona_feedback}[card.loader]
    mapped = loader(card, blobs)
    data: UserData = validate_user_records(mapped.records, mapped.rename)
    return Dataset(
        source,
        tuple(data.pairs),
        blobs_hash(blobs, card.digest),
        benchmark=card.name,
        benchmark_version=card.version,
        card=str(card.path.resolve()) if card.path is not None else None,
        history_rows=data.history_rows,
        notes=tuple(mapped.notes),
    )


# --- per-user ------------------------------------------------------------------------------------------------


def column(record: Mapping[str, Any], name: str) -> Any:
    """`record[name]`, or (a dotted name not present as such) the value inside nested objects."""
    if name in record:
        return record[name]
    value: Any = record
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _layout(record: Any, card: Card) -> Any:
    """A source record in the per-user layout, read through the card's mappings."""
    if not isinstance(record, Mapping) or not (card.columns or card.groups or card.facts):
        return record
    out: dict[str, Any] = {}
    for name in (
        "user_id",
        "id",
        "prompt",
        "context",
        "chosen",
        "rejected",
        "split",
        "subset",
        "persona",
        "seen",
    ):
        value = column(record, card.columns.get(name, name))
        if value is not None:
            out[name] = value
    out["groups"] = (
        {k: column(record, c) for k, c in card.groups.items()} if card.groups else record.get("groups")
    )
    out["facts"] = (
        {k: column(record, c) for k, c in card.facts.items()} if card.facts else record.get("facts")
    )
    return out


def _renamer(card: Card) -> Callable[[str], str]:
    """A layout field as the card's source names it (`prompt` → `question`, `groups.age` → `age_band`)."""

    def rename(name: str) -> str:
        head, sep, rest = name.partition(".")
        if head in ("groups", "facts") and rest:
            source = (card.groups if head == "groups" else card.facts).get(rest.split(".")[0])
            return source or name
        base = head.split("[")[0]
        source = card.columns.get(base)
        return f"{source}{head[len(base) :]}{sep}{rest}" if source else name

    return rename


def _per_user(card: Card, blobs: Sequence[Blob]) -> Mapped:
    records = [(location, _layout(record, card)) for blob in blobs for location, record in blob_records(blob)]
    return Mapped(records, _renamer(card))


# --- PRISM ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Rating:
    location: Location
    user_id: str
    conversation: str
    turn: int
    utterance: str
    prompt: str
    response: str
    score: float
    chosen: bool
    kind: str


def _named(blobs: Sequence[Blob], stem: str) -> list[Blob]:
    return [b for b in blobs if PurePosixPath(b.name).stem.split("-")[0] == stem]


def _required(record: Mapping[str, Any], name: str, types: tuple[type, ...], what: str) -> Any:
    value = record.get(name)
    if value is None:
        raise RecordError(name, "missing")
    if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
        raise RecordError(name, f"expected {what}, got {_type_name(value)}")
    if isinstance(value, str) and not value.strip():
        raise RecordError(name, "is empty")
    return value


def _rating(location: Location, record: Any) -> _Rating:
    if not isinstance(record, Mapping):
        raise RecordError("record", f"expected an object, got {_type_name(record)}")
    turn = _required(record, "turn", (int,), "a whole number")
    if turn < 0:
        raise RecordError("turn", f"expected a whole number ≥ 0, got {turn}")
    return _Rating(
        location=location,
        user_id=str(_required(record, "user_id", (str, int), "a string")),
        conversation=str(_required(record, "conversation_id", (str, int), "a string")),
        turn=turn,
        utterance=str(
            record.get("utterance_id") or f"{record.get('conversation_id')}-{turn}-{location.index}"
        ),
        prompt=_required(record, "user_prompt", (str,), "a string"),
        response=_required(record, "model_response", (str,), "a string"),
        score=float(_required(record, "score", (int, float), "a number")),
        chosen=_required(record, "if_chosen", (bool,), "true or false"),
        kind=str(record.get("conversation_type") or DEFAULT_SUBSET),
    )


def _prism(card: Card, blobs: Sequence[Blob]) -> Mapped:
    utterances, survey = _named(blobs, "utterances"), _named(blobs, "survey")
    started = _prism_started(_named(blobs, "conversations"))
    if not utterances:
        names = ", ".join(b.name for b in blobs) or "none"
        raise DataError(f"prism: no utterances file (utterances.jsonl or utterances*.parquet) among: {names}")
    profiles: dict[str, Mapping[str, Any]] = {}
    for blob in survey:
        for location, record in blob_records(blob):
            if isinstance(record, Mapping) and record.get("user_id") is not None:
                profiles[str(record["user_id"])] = record
            else:
                raise DataError(f"{location}: field 'user_id': missing")
    ratings: list[_Rating] = []
    problems: list[str] = []
    for blob in utterances:
        for location, record in blob_records(blob):
            try:
                ratings.append(_rating(location, record))
            except RecordError as err:
                problems.append(f"{location}: {err}")
    if problems:
        raise DataError(_summarise(problems))
    records, ties = _prism_records(ratings, profiles, card, started)
    notes = [_ties_note(ties, card.tie_margin)] if ties else []
    return Mapped(records, notes=notes)


def _ties_note(ties: int, margin: float) -> str:
    within = f" (scores {margin:g} points apart or closer)" if margin else ""
    return f"{ties} tied rating{'s' if ties != 1 else ''}{within} made no pair (dropped)"


def _prism_started(blobs: Sequence[Blob]) -> dict[str, str]:
    """When each conversation started: the conversations file's `generated_datetime` (`2023-11-22 15:55:46`, which
    sorts as text), by `conversation_id`."""
    started: dict[str, str] = {}
    problems: list[str] = []
    for blob in blobs:
        for location, record in blob_records(blob):
            try:
                if not isinstance(record, Mapping):
                    raise RecordError("record", f"expected an object, got {_type_name(record)}")
                conversation = str(_required(record, "conversation_id", (str, int), "a string"))
                if record.get("generated_datetime") is not None:
                    started[conversation] = _required(record, "generated_datetime", (str,), "a date and time")
            except RecordError as err:
                problems.append(f"{location}: {err}")
    if problems:
        raise DataError(_summarise(problems))
    return started


def _in_time_order(owned: list[str], started: Mapping[str, str]) -> list[str]:
    """A user's conversations oldest first: by start time when every one has it, else as the file has them."""
    if owned and all(c in started for c in owned):
        return sorted(owned, key=lambda c: started[c])
    return owned


def _prism_records(
    ratings: Sequence[_Rating],
    profiles: Mapping[str, Mapping[str, Any]],
    card: Card,
    started: Mapping[str, str],
) -> tuple[list[tuple[Location, Any]], int]:
    turns: dict[tuple[str, int], list[_Rating]] = {}
    conversations: dict[str, list[str]] = {}
    for rating in ratings:
        turns.setdefault((rating.conversation, rating.turn), []).append(rating)
        owned = conversations.setdefault(rating.user_id, [])
        if rating.conversation not in owned:
            owned.append(rating.conversation)
    conversations = {user: _in_time_order(owned, started) for user, owned in conversations.items()}
    # Records go user by user (as the file first names them), each user's conversations oldest first, turns in
    # order: a user's history is then in time order, which `--profile-order newest` reads.
    position = {
        conversation: (number, rank)
        for number, owned in enumerate(conversations.values())
        for rank, conversation in enumerate(owned)
    }
    records: list[tuple[Location, Any]] = []
    ties = 0
    for (conversation, turn), rated in sorted(
        turns.items(), key=lambda item: (position[item[0][0]], item[0][1])
    ):
        first = rated[0]
        owned = conversations[first.user_id]
        last = owned[-1] == conversation
        context = _prism_context(turns, conversation, turn)
        survey = profiles.get(first.user_id, {})
        number = 0
        for i, a in enumerate(rated):
            for b in rated[i + 1 :]:
                if abs(a.score - b.score) <= card.tie_margin:
                    ties += 1
                    continue
                high, low = (a, b) if a.score > b.score else (b, a)
                number += 1
                record = {
                    "user_id": first.user_id,
                    "id": f"{conversation}-{turn}-{number}",
                    "context": context,
                    "chosen": high.response,
                    "rejected": low.response,
                    "split": "test" if last else "train",
                    "subset": first.kind,
                    "seen": len(owned) > 1,
                    "persona": column(survey, card.columns["persona"]) if "persona" in card.columns else None,
                    "groups": {k: column(survey, c) for k, c in card.groups.items()},
                    "facts": {k: column(survey, c) for k, c in card.facts.items()},
                }
                records.append((high.location, record))
    return records, ties


def _prism_context(
    turns: Mapping[tuple[str, int], list[_Rating]], conversation: str, turn: int
) -> list[dict[str, str]]:
    """The conversation up to `turn`: each earlier prompt and the response the conversation went on with there
    (`if_chosen`: the highest-rated one, a tie broken at random by PRISM)."""
    context: list[dict[str, str]] = []
    for earlier in range(turn):
        rated = turns.get((conversation, earlier))
        if not rated:
            continue
        context.append({"role": "user", "content": rated[0].prompt})
        kept = next((r for r in rated if r.chosen), None)
        if kept is not None:
            context.append({"role": "assistant", "content": kept.response})
    context.append({"role": "user", "content": turns[(conversation, turn)][0].prompt})
    return context


# --- PersonaFeedback -----------------------------------------------------------------------------------------

# The hub's folder of the specific-question track is spelled `spedific`.
_TRACKS = {"spedific": "specific"}


def persona_text(persona: Any) -> str:
    """A persona as one text: a string as it is, an object as `key: value` lines (nested objects inline)."""
    if isinstance(persona, str):
        return persona.strip()
    if not isinstance(persona, Mapping):
        return ""

    def inline(value: Any) -> str:
        if isinstance(value, Mapping):
            return "; ".join(f"{k}: {inline(v)}" for k, v in value.items() if v not in (None, "", [], {}))
        if isinstance(value, list):
            return ", ".join(inline(v) for v in value)
        return str(value).strip()

    return "\n".join(
        f"{key}: {inline(value)}" for key, value in persona.items() if value not in (None, "", [], {})
    )


def _persona_feedback(card: Card, blobs: Sequence[Blob]) -> Mapped:
    persona_blobs = [b for b in blobs if "persona" in PurePosixPath(b.name).parts[:-1]]
    data_blobs = [b for b in blobs if b not in persona_blobs]
    if not persona_blobs:
        raise DataError("persona-feedback: no persona file (persona/*.jsonl, one persona per line)")
    personas: dict[str, str] = {}
    for blob in persona_blobs:
        for location, record in blob_records(blob):
            personas[str(location.index)] = persona_text(record)
    records: list[tuple[Location, Any]] = []
    user_column = card.columns.get("user_id", "user_id")
    for blob in data_blobs:
        path = PurePosixPath(blob.name)
        track = path.parent.name
        tier = path.stem
        for location, record in blob_records(blob):
            mapped = _layout(record, card)
            if isinstance(mapped, dict):
                mapped.setdefault("id", f"{_TRACKS.get(track, track)}-{tier}-{location.index}")
                user = mapped.get("user_id")
                persona = personas.get(str(user)) if user is not None else None
                if user is not None and persona is None:
                    raise DataError(
                        f"{location}: field '{user_column}': no persona on line {user} of the persona file"
                    )
                mapped.setdefault("subset", _TRACKS.get(track, track))
                mapped["persona"] = persona
                mapped["groups"] = {"tier": tier, **(mapped.get("groups") or {})}
            records.append((location, mapped))
    return Mapped(records, _renamer(card))
