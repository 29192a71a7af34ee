"""A source record read through a card's [columns], [groups] and [facts] into the per-user layout, and a layout
field named back by the column it came from (so that an error names what the user's file calls it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from prbj.data.cards import MAPPABLE, Card
from prbj.data.column_paths import read_path

PAIR_FIELDS = ("chosen", "rejected")
K_WAY_FIELDS = ("responses", "preferred", "ranking", "scores")


def _fields(columns: Mapping[str, str]) -> tuple[str, ...]:
    """The layout fields a card reads: those it maps, and the others under their own names, except the other form
    of answers than the one it maps (a card mapping `chosen` does not read a `responses` column as well)."""
    if any(name in columns for name in PAIR_FIELDS):
        return tuple(name for name in MAPPABLE if name not in K_WAY_FIELDS or name in columns)
    if any(name in columns for name in K_WAY_FIELDS):
        return tuple(name for name in MAPPABLE if name not in PAIR_FIELDS or name in columns)
    return MAPPABLE


def layout(record: Any, card: Card) -> Any:
    """A source record in the per-user layout, read through the card's mappings."""
    if not isinstance(record, Mapping) or not (card.columns or card.groups or card.facts):
        return record
    out: dict[str, Any] = {}
    columns = card.columns
    for name in _fields(columns):
        value = read_path(record, columns.get(name, name))
        if value is not None:
            out[name] = value
    out["groups"] = (
        {k: read_path(record, c) for k, c in card.groups.items()} if card.groups else record.get("groups")
    )
    out["facts"] = (
        {k: read_path(record, c) for k, c in card.facts.items()} if card.facts else record.get("facts")
    )
    return out


def renamer(card: Card) -> Callable[[str], str]:
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
