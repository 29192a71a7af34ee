"""PERSONA (SynthLabsAI/PERSONA, Castricato et al. 2024, arXiv 2407.17387) through its card.

Each row is one synthetic persona's feedback on one prompt: `persona` (the persona as `key: value` lines),
`instruction` (the prompt), `original` (a model's answer) and `data` (that answer revised for the persona: the
one the persona prefers). The hub holds one split (`train`) and no persona id. prbj numbers the personas in the
order they first appear (`persona-1`, ...: the persona text is a profile, not an id), shows the persona text as
the profile, and judges the second half of each persona's rows in file order, the first half being the
persona's history (the paper holds out half of its 317,200 pairs; which half is not published: prbj's choice).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prbj.data.cards import Card
from prbj.data.column_paths import read_path
from prbj.data.dataset import Blob, blob_records
from prbj.data.loader_output import Mapped
from prbj.data.per_user import ReadOptions
from prbj.data.validate import Location, RecordError, _mapping, _type_name, parsed

# The source's columns (third-party loaders of SynthLabsAI/PERSONA read these names), mappable by the card.
COLUMNS = {"persona": "persona", "prompt": "instruction", "chosen": "data", "rejected": "original"}


def read_persona(card: Card, blobs: Sequence[Blob]) -> Mapped:
    names = {field: card.columns.get(field, source) for field, source in COLUMNS.items()}

    def read_row(location: Location, raw: Any) -> tuple[str, tuple[Location, Mapping[str, Any]]]:
        record = _mapping(raw, "record")
        persona = read_path(record, names["persona"])
        if not isinstance(persona, str) or not persona.strip():
            raise RecordError(names["persona"], f"expected the persona's text, got {_type_name(persona)}")
        return persona.strip(), (location, record)

    rows: dict[str, list[tuple[Location, Mapping[str, Any]]]] = {}
    for persona, row in parsed((item for blob in blobs for item in blob_records(blob)), read_row):
        rows.setdefault(persona, []).append(row)
    records: list[tuple[Location, Any]] = []
    for number, (persona, own) in enumerate(rows.items(), start=1):
        held_out = len(own) - len(own) // 2
        for index, (location, record) in enumerate(own):
            records.append(
                (
                    location,
                    {
                        "user_id": f"persona-{number}",
                        "prompt": read_path(record, names["prompt"]),
                        "chosen": read_path(record, names["chosen"]),
                        "rejected": read_path(record, names["rejected"]),
                        "persona": persona,
                        "split": "test" if index >= len(own) - held_out else "train",
                    },
                )
            )
    return Mapped(records, ReadOptions(rename=lambda name: names.get(name, name)))
