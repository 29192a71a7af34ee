"""CSV cells that a spreadsheet program will not run: every CSV prbj writes from dataset or run text goes through
`neutralise`, and every reader of prbj's own sheets through `restore`, which undoes it exactly.

A cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return is read as a formula by Excel, LibreOffice
and Google Sheets (`=HYPERLINK("http://evil.example", "x")` in a pair id becomes a live link). Following OWASP's
guidance on CSV injection, such a cell is written with a leading apostrophe, which those programs show as text.
A cell that already starts with apostrophes before such a character gets one more, so that `restore` (drop one
leading apostrophe before such a character) gives back every text exactly."""

from __future__ import annotations

import csv
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from prbj.data.files import write_atomic
from prbj.errors import DataError

FORMULA_STARTS = "=+-@\t\r"
ESCAPE = "'"
# The same class in a form both Python's re and Polars' (Rust) regex read.
_STARTS = r"[=+\-@\t\r]"
_NEEDS_ESCAPE = re.compile(f"^{ESCAPE}*{_STARTS}")
_ESCAPED = re.compile(f"^{ESCAPE}+{_STARTS}")
# A sheet may hold whole answers and profiles: the csv module's default field limit (128 KiB) is too small.
MAX_FIELD_CHARS = 1 << 30


def neutralise(value: Any) -> Any:
    """A text cell as written to CSV (other values unchanged)."""
    if isinstance(value, str) and _NEEDS_ESCAPE.match(value):
        return ESCAPE + value
    return value


def restore(text: str) -> str:
    """A cell as read back from a CSV prbj wrote: the text given to `neutralise`."""
    return text[1:] if _ESCAPED.match(text) else text


def neutralise_row(row: Mapping[str, Any]) -> dict[str, Any]:
    return {name: neutralise(value) for name, value in row.items()}


def neutralise_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """The text columns of a table as written to CSV (numbers stay numbers)."""
    pattern = _NEEDS_ESCAPE.pattern
    return frame.with_columns(
        pl.when(pl.col(name).str.contains(pattern))
        .then(pl.lit(ESCAPE) + pl.col(name))
        .otherwise(pl.col(name))
        .alias(name)
        for name, dtype in frame.schema.items()
        if dtype == pl.String
    )


def write_frame(path: Path, frame: pl.DataFrame) -> Path:
    """A table as a CSV file (written beside it and renamed into place), every text cell neutralised."""
    return write_atomic(path, lambda tmp: neutralise_frame(frame).write_csv(tmp))


def write_rows(handle: Any, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> None:
    """A header and rows into an open text file, every text cell neutralised."""
    writer = csv.DictWriter(handle, fieldnames=list(columns))
    writer.writeheader()
    writer.writerows(neutralise_row(row) for row in rows)


def read_rows(path: Path, encoding: str) -> tuple[list[str], list[dict[str, str]]]:
    """A CSV's header and rows as text, each cell restored; a file that cannot be read is a DataError naming it.
    Cells may be as long as a whole answer."""
    if csv.field_size_limit() < MAX_FIELD_CHARS:
        csv.field_size_limit(min(MAX_FIELD_CHARS, sys.maxsize))
    try:
        with path.open(encoding=encoding, newline="") as handle:
            reader = csv.DictReader(handle)
            rows = [{k: restore(v or "") for k, v in row.items() if isinstance(k, str)} for row in reader]
            header = list(reader.fieldnames or [])
    except OSError as err:
        raise DataError(f"{path}: cannot read it ({err.strerror})") from None
    except (csv.Error, UnicodeDecodeError) as err:
        raise DataError(f"{path}: not a readable CSV sheet ({err})") from None
    return header, rows
