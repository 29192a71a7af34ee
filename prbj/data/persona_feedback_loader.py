"""PersonaFeedback (PersonalAILab/PersonaFeedback) through its card, read by its published paths:

    data/general/{easy,medium,hard}.jsonl     questions from ShareGPT
    data/spedific/{easy,medium,hard}.jsonl    questions written for the persona (the hub spells the folder
                                              `spedific`; `specific` is read too)
    persona/all_personas.jsonl                one persona per line: line n is user n (a persona that carries
                                              its own `user_id` is that user's)

Rows carry `user_id`, the question and the two answers (mapped by the card's [columns]). The track is the subset,
the tier a group, the persona the profile. The hub holds about 200 other files: every file but these is ignored
(a note names how many), so no second persona file can swap users' personas and no other data file is read as
pairs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from prbj.data.card_columns import layout, renamer
from prbj.data.cards import Card
from prbj.data.dataset import Blob, blob_records
from prbj.data.loader_output import Mapped
from prbj.data.per_user import ReadOptions
from prbj.data.validate import Location
from prbj.errors import DataError

TRACKS = {"general": "general", "spedific": "specific", "specific": "specific"}
TIERS = ("easy", "medium", "hard")
PERSONA_FILE = ("persona", "all_personas.jsonl")


def _tail(name: str, n: int) -> tuple[str, ...]:
    return PurePosixPath(name.replace("\\", "/")).parts[-n:]


def _data_file(name: str) -> tuple[str, str] | None:
    """(track, tier) of a published data file's path, else None."""
    parts = _tail(name, 3)
    if len(parts) == 3 and parts[0] == "data" and parts[1] in TRACKS:
        tier = parts[2].removesuffix(".jsonl")
        if parts[2].endswith(".jsonl") and tier in TIERS:
            return TRACKS[parts[1]], tier
    return None


def wanted(name: str) -> bool:
    """Whether `name` is one of the published files the loader reads."""
    return _data_file(name) is not None or _tail(name, 2) == PERSONA_FILE


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
        f"{key}: {inline(value)}"
        for key, value in persona.items()
        if key != "user_id" and value not in (None, "", [], {})
    )


def _personas(blobs: Sequence[Blob]) -> dict[str, str]:
    personas: dict[str, str] = {}
    for blob in blobs:
        for location, record in blob_records(blob):
            own = record.get("user_id") if isinstance(record, Mapping) else None
            key = (
                str(own) if isinstance(own, str | int) and not isinstance(own, bool) else str(location.index)
            )
            personas[key] = persona_text(record)
    return personas


def read_persona_feedback(card: Card, blobs: Sequence[Blob]) -> Mapped:
    persona_blobs = [b for b in blobs if _tail(b.name, 2) == PERSONA_FILE]
    data_blobs = [(b, _data_file(b.name)) for b in blobs]
    if not persona_blobs:
        raise DataError(
            "persona-feedback: no persona file (persona/all_personas.jsonl, one persona per line)"
        )
    if not any(found for _, found in data_blobs):
        raise DataError(
            "persona-feedback: no data file (data/<general|spedific>/<easy|medium|hard>.jsonl) among: "
            + ", ".join(b.name for b in blobs)
        )
    personas = _personas(persona_blobs)
    records: list[tuple[Location, Any]] = []
    user_column = card.columns.get("user_id", "user_id")
    for blob, found in data_blobs:
        if found is None:
            continue
        track, tier = found
        for location, record in blob_records(blob):
            mapped = layout(record, card)
            if isinstance(mapped, dict):
                mapped.setdefault("id", f"{track}-{tier}-{location.index}")
                user = mapped.get("user_id")
                persona = personas.get(str(user)) if user is not None else None
                if user is not None and persona is None:
                    raise DataError(
                        f"{location}: field '{user_column}': no persona for user {user} in persona/all_personas.jsonl"
                    )
                mapped.setdefault("subset", track)
                mapped["persona"] = persona
                mapped["groups"] = {"tier": tier, **(mapped.get("groups") or {})}
            records.append((location, mapped))
    return Mapped(records, ReadOptions(rename=renamer(card), split_map=card.split_map))
