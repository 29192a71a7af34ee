"""Whole-file writes and JSON reads shared by every package that keeps files: run directories, BoN runs, build
outputs, baselines, the downstream store.

Every write goes to a hidden sibling of its own (`.<name>.<pid>.<thread>.tmp`) and is then renamed over the
target, so an interrupted command never leaves half a file that a later command would trust; readers see the old
file or the new one, nothing between; and two writers of one file at once (two `prbj report` of one run) each
rename their own whole file, the last one winning.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import polars as pl

from prbj.errors import DataError


def json_problem(error: json.JSONDecodeError, *, with_line: bool = True) -> str:
    """What is wrong with a JSON text and where, as a whole phrase: json's own message ends mid-sentence for some
    errors ("Unterminated string starting at"), with the place in the exception's other fields."""
    where = f"line {error.lineno}, column {error.colno}" if with_line else f"column {error.colno}"
    return f"{error.msg} {where}" if error.msg.endswith(" at") else f"{error.msg} at {where}"


def write_atomic(path: Path, write: Callable[[Path], object]) -> Path:
    """Let `write` fill a temporary sibling of `path`, then rename it into place. The sibling is this writer's
    own: with one name for all, a second writer renamed the first one's half-written file away under it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        write(tmp)
        tmp.replace(path)
    finally:
        # Only left behind when `write` or the rename failed: never leave a stray half file.
        tmp.unlink(missing_ok=True)
    return path


def write_text(path: Path, text: str) -> Path:
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def json_text(document: Any) -> str:
    """The one JSON layout of prbj's files: indented (a changed value is a one-line diff), UTF-8 as is, no NaN
    (not JSON), one trailing newline."""
    return json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def write_json(path: Path, document: Any) -> Path:
    return write_text(path, json_text(document))


def write_jsonl(path: Path, records: Iterable[Any]) -> Path:
    return write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def write_parquet(path: Path, frame: pl.DataFrame) -> Path:
    return write_atomic(path, frame.write_parquet)


def read_json(path: Path) -> Any:
    """A JSON file's content; a missing or malformed file is a one-line DataError naming the file (and line)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: invalid JSON: {json_problem(err, with_line=False)}") from None
