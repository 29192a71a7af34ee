"""What a card's loader hands on: records in the per-user layout, how to read them, and notes for the reader."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prbj.data.per_user import ReadOptions
from prbj.data.validate import Location


@dataclass
class Mapped:
    """Records in the per-user layout, the options they are read with (the card's column names for errors, its
    split map, item rule), and notes on what the loader decided (files it ignored)."""

    records: list[tuple[Location, Any]]
    options: ReadOptions = field(default_factory=ReadOptions)
    notes: list[str] = field(default_factory=list)
