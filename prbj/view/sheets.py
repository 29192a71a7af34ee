"""Filling the blind annotation sheets of `prbj build annotate` in the browser: each item of a sheet as the
sheet shows it (its own A/B order; the key is never read), the 1-5 ratings of both answers, the preference and a
comment, saved back into the same CSV that `prbj build agreement` reads."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prbj.data.annotation import (
    DIMENSIONS,
    RATING_COLUMNS,
    SCORES,
    SHEET_COLUMNS,
    SHEET_PREFERENCES,
    read_sheet_rows,
    write_csv,
)
from prbj.errors import DataError
from prbj.view.catalog import BuildEntry
from prbj.view.links import Links

MAX_COMMENT = 10_000


def _sheet(build: BuildEntry, name: str) -> Path | None:
    return next((path for path in build.sheets if path.stem == name), None)


def _filled(row: Mapping[str, str]) -> bool:
    return all(row.get(c, "").strip() for c in (*RATING_COLUMNS, "preference"))


def build_page(build: BuildEntry, links: Links) -> dict[str, Any]:
    sheets = []
    for path in build.sheets:
        try:
            _, rows = read_sheet_rows(path)
        except DataError as err:
            sheets.append({"name": path.stem, "error": str(err), "rows": 0, "filled": 0, "link": None})
            continue
        first_open = next((i for i, row in enumerate(rows, start=1) if not _filled(row)), 1)
        sheets.append(
            {
                "name": path.stem,
                "error": None,
                "rows": len(rows),
                "filled": sum(_filled(row) for row in rows),
                "link": links.sheet(build.key, path.stem, first_open),
            }
        )
    return {"title": f"Annotation · {build.path.name}", "build": build, "sheets": sheets}


def item_page(build: BuildEntry, name: str, item: int, links: Links) -> dict[str, Any] | None:
    path = _sheet(build, name)
    if path is None:
        return None
    _, rows = read_sheet_rows(path)
    if not 1 <= item <= len(rows):
        return None
    row = rows[item - 1]
    return {
        "title": f"{name} · item {item}",
        "build": build,
        "sheet": name,
        "item": item,
        "count": len(rows),
        "row": row,
        "dimensions": DIMENSIONS,
        "scores": SCORES,
        "preferences": SHEET_PREFERENCES,
        "filled": [_filled(r) for r in rows],
        "action": links.sheet(build.key, name, item),
        "prev": links.sheet(build.key, name, item - 1) if item > 1 else None,
        "next": links.sheet(build.key, name, item + 1) if item < len(rows) else None,
        "items": [(i, links.sheet(build.key, name, i), _filled(r)) for i, r in enumerate(rows, start=1)],
    }


def save_item(build: BuildEntry, name: str, item: int, form: Mapping[str, str]) -> Path:
    """Write one item's ratings into its sheet (the whole file rewritten and renamed into place); every
    rating must be 1-5 and the preference A, B or tie, else a DataError naming the field."""
    path = _sheet(build, name)
    if path is None:
        raise DataError(f"no sheet {name!r} in {build.path}")
    header, rows = read_sheet_rows(path)
    if not 1 <= item <= len(rows):
        raise DataError(f"{path}: no item {item}")
    values: dict[str, str] = {}
    for column in RATING_COLUMNS:
        raw = (form.get(column) or "").strip()
        if raw not in {str(s) for s in SCORES}:
            raise DataError(f"{path}: item {item}: field '{column}': expected an integer from 1 to 5")
        values[column] = raw
    preference = (form.get("preference") or "").strip()
    if preference not in SHEET_PREFERENCES:
        raise DataError(f"{path}: item {item}: field 'preference': expected A, B or tie")
    values["preference"] = preference
    values["comment"] = (form.get("comment") or "").strip()[:MAX_COMMENT]
    rows[item - 1] = {**rows[item - 1], **values}
    columns = list(dict.fromkeys([*header, *SHEET_COLUMNS]))
    return write_csv(path, columns, rows)
