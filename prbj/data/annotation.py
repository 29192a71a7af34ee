"""The blind annotation sheet of `prbj build annotate`: its columns, and reading and writing one sheet as the CSV
a spreadsheet program (or `prbj view`) fills in and `prbj build agreement` reads back.

A sheet shows only what an annotator may see (the question, a few profile posts, the aspects, the two answers as
A and B); which answer is the chosen one lives in a separate key file that the sheet never names.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prbj.data.csv_cells import read_rows, write_rows
from prbj.data.files import write_atomic
from prbj.errors import DataError

# The four 1-5 rating dimensions; the check model of a build rates the same ones.
DIMENSIONS: tuple[str, ...] = ("factuality", "relevance", "helpfulness", "adherence")
SCORES = (1, 2, 3, 4, 5)
SHEET_PREFERENCES = ("A", "B", "tie")
SHOWN_COLUMNS = ("sheet", "item", "question", "profile", "aspects", "answer_a", "answer_b")
RATING_COLUMNS = tuple(f"{side}_{d}" for side in ("a", "b") for d in DIMENSIONS)
SHEET_COLUMNS = (*SHOWN_COLUMNS, *RATING_COLUMNS, "preference", "comment")
# How spreadsheet programs read accents and dashes correctly.
SHEET_ENCODING = "utf-8-sig"


def write_csv(path: Path, columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> Path:
    """A whole CSV written beside its target and renamed into place, no cell readable as a formula
    (csv_cells.neutralise; read_csv gives the texts back)."""

    def write(tmp: Path) -> None:
        with tmp.open("w", encoding=SHEET_ENCODING, newline="") as handle:
            write_rows(handle, columns, rows)

    return write_atomic(path, write)


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """A CSV that write_csv wrote (and a person may have filled in since): header and rows as text."""
    return read_rows(path, SHEET_ENCODING)


def read_sheet_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """A sheet's header and rows as text, whatever was filled in; a sheet without the shown columns is an
    error naming the file."""
    header, rows = read_csv(path)
    missing = [c for c in SHOWN_COLUMNS if c not in header]
    if missing:
        raise DataError(f"{path}: row 1: field '{missing[0]}': missing column")
    return header, rows
