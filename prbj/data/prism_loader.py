"""PRISM (HannahRoseKirk/prism-alignment) through its card: the `survey`, `utterances` and (optional)
`conversations` files become per-user records.

Within one turn of one conversation every two rated responses make a pair, the higher-rated one chosen, unless
their scores are within the card's `tie_margin` of each other (a tie, as the PRISM authors count one when ranking
models: no pair, counted in a note); two responses of the same text (a later turn's two samples of one model, or
two empty replies the release writes as `EMPTY STRING`) make none either (prbj.data.user_items). A later turn's
question is the conversation up to it: the user's earlier prompts and the response the conversation went on
with (`if_chosen`) at each. Each user's last conversation is judged, their earlier ones are their history.
"Last" is by the conversations file's `generated_datetime` when every conversation of the user has one, else by
file order. The survey gives the persona, facts and groups the card names; every user also gets the group
`has_history` (whether any earlier choice is left once ties and identical answers are dropped). PRISM says
nothing of which users trained a model, so no user is marked seen or unseen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from prbj.data.cards import Card
from prbj.data.column_paths import read_path
from prbj.data.dataset import Blob, blob_records
from prbj.data.loader_output import Mapped
from prbj.data.per_user import DEFAULT_SUBSET, ReadOptions
from prbj.data.user_items import ItemRule
from prbj.data.validate import Location, RecordError, _mapping, _type_name, parsed
from prbj.errors import DataError


@dataclass(frozen=True, slots=True)
class _Rating:
    location: Location
    user_id: str
    conversation: str
    turn: int
    prompt: str
    response: str
    score: float
    chosen: bool
    kind: str


def named(blobs: Sequence[Blob], stem: str) -> list[Blob]:
    """The files whose name starts with `stem` (`utterances.jsonl`, `utterances-00000-of-00001.parquet`)."""
    return [b for b in blobs if PurePosixPath(b.name).stem.split("-")[0] == stem]


def required(record: Mapping[str, Any], name: str, types: tuple[type, ...], what: str) -> Any:
    value = record.get(name)
    if value is None:
        raise RecordError(name, "missing")
    if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
        raise RecordError(name, f"expected {what}, got {_type_name(value)}")
    if isinstance(value, str) and not value.strip():
        raise RecordError(name, "is empty")
    return value


def _rating(location: Location, record: Any) -> _Rating:
    record = _mapping(record, "record")
    turn = required(record, "turn", (int,), "a whole number")
    if turn < 0:
        raise RecordError("turn", f"expected a whole number ≥ 0, got {turn}")
    return _Rating(
        location=location,
        user_id=str(required(record, "user_id", (str, int), "a string")),
        conversation=str(required(record, "conversation_id", (str, int), "a string")),
        turn=turn,
        prompt=required(record, "user_prompt", (str,), "a string"),
        response=required(record, "model_response", (str,), "a string"),
        score=float(required(record, "score", (int, float), "a number")),
        chosen=required(record, "if_chosen", (bool,), "true or false"),
        kind=str(record.get("conversation_type") or DEFAULT_SUBSET),
    )


def read_prism(card: Card, blobs: Sequence[Blob]) -> Mapped:
    utterances, survey = named(blobs, "utterances"), named(blobs, "survey")
    started = _started(named(blobs, "conversations"))
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
    ratings = parsed((item for blob in utterances for item in blob_records(blob)), _rating)
    options = ReadOptions(rule=ItemRule("pairs", card.tie_margin), history_group=True)
    return Mapped(_records(ratings, profiles, card, started), options)


def _started(blobs: Sequence[Blob]) -> dict[str, str]:
    """When each conversation started: the conversations file's `generated_datetime` (`2023-11-22 15:55:46`, which
    sorts as text), by `conversation_id`."""
    records = (item for blob in blobs for item in blob_records(blob))
    return {conversation: at for conversation, at in parsed(records, _start) if at is not None}


def _start(location: Location, record: Any) -> tuple[str, str | None]:
    """A conversations file's record: its `conversation_id` and `generated_datetime` (None when it has none)."""
    record = _mapping(record, "record")
    conversation = str(required(record, "conversation_id", (str, int), "a string"))
    if record.get("generated_datetime") is None:
        return conversation, None
    return conversation, required(record, "generated_datetime", (str,), "a date and time")


def _in_time_order(owned: list[str], started: Mapping[str, str]) -> list[str]:
    """A user's conversations oldest first: by start time when every one has it, else as the file has them."""
    if owned and all(c in started for c in owned):
        return sorted(owned, key=lambda c: started[c])
    return owned


def _records(
    ratings: Sequence[_Rating],
    profiles: Mapping[str, Mapping[str, Any]],
    card: Card,
    started: Mapping[str, str],
) -> list[tuple[Location, Any]]:
    """One per-user record per rated turn: its responses with their scores (the pairs are made from them)."""
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
    persona = card.columns.get("persona")
    records: list[tuple[Location, Any]] = []
    for (conversation, turn), rated in sorted(
        turns.items(), key=lambda item: (position[item[0][0]], item[0][1])
    ):
        if len(rated) < 2:
            continue
        first = rated[0]
        survey = profiles.get(first.user_id, {})
        record = {
            "user_id": first.user_id,
            "id": f"{conversation}-{turn}",
            "context": _context(turns, conversation, turn),
            "responses": [r.response for r in rated],
            "scores": [r.score for r in rated],
            "split": "test" if conversations[first.user_id][-1] == conversation else "train",
            "subset": first.kind,
            "persona": read_path(survey, persona) if persona else None,
            "groups": {k: read_path(survey, c) for k, c in card.groups.items()},
            "facts": {k: read_path(survey, c) for k, c in card.facts.items()},
        }
        records.append((first.location, record))
    return records


def _context(
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
