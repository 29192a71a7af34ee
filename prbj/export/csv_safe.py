"""CSV that a spreadsheet opens as data: a text cell beginning with = + - @ (or a tab or carriage return, which
some spreadsheets skip before reading a formula) is a formula to Excel, LibreOffice and Google Sheets, so it is
written with a leading apostrophe, the usual neutraliser (OWASP's CSV injection advice). Number columns are
left as they are: a negative number is a number."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from prbj.data.files import write_atomic

FORMULA_START = r"^[=+\-@\t\r]"


def neutralised(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(
        pl.when(pl.col(name).str.contains(FORMULA_START))
        .then(pl.lit("'") + pl.col(name))
        .otherwise(pl.col(name))
        .alias(name)
        for name, dtype in frame.schema.items()
        if dtype == pl.String
    )


def write_safe_csv(path: Path, frame: pl.DataFrame) -> Path:
    return write_atomic(path, lambda tmp: neutralised(frame).write_csv(tmp))
