"""Whole-file writes and JSON reads shared by every package that keeps files: run directories, BoN runs, build
outputs, baselines, the downstream store.

Every write goes to a hidden sibling of its own (`.<name>.<pid>.<thread>.tmp`) and is then renamed over the
target, so an interrupted command never leaves half a file that a later command would trust; readers see the old
file or the new one, nothing between; and two writers of one file at once (two `prbj report` of one run) each
rename their own whole file, the last one winning. The rename replaces whatever sits at the target, a symbolic
link included, and never writes through it.

Names made from text that arrives from elsewhere (a run id from run.json, an EEE file's evaluation_id, a judge or
context from a judgments table) go through `safe_name`, and a path built under an output folder through `inside`,
which refuses one that resolves outside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
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


# A file name is at most 255 bytes on every common file system; names made here stay well below, leaving room
# for a suffix and the temporary sibling's prefix and tail.
SAFE_NAME_BYTES = 120
_NOT_IN_NAMES = re.compile(r"[^\w.-]+")
_LONE_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def safe_name(text: str, *, max_bytes: int = SAFE_NAME_BYTES) -> str:
    """One plain path component made from untrusted text: letters, digits, `_`, `.` and `-` kept, every other
    run of characters (separators, NUL, control characters, spaces, lone surrogates) one `-`; never hidden, `.`
    or `..` (leading and trailing dots and dashes are cut); an empty result is `x`. A name longer than `max_bytes`
    (UTF-8) is cut and ends in a hash of the whole text, so two long ids that share a beginning stay apart."""
    cleaned = _NOT_IN_NAMES.sub("-", text.encode("utf-8", "replace").decode("utf-8")).strip(".-") or "x"
    if len(cleaned.encode()) <= max_bytes:
        return cleaned
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    head = cleaned.encode()[: max_bytes - len(digest) - 1].decode("utf-8", "ignore").rstrip(".-")
    return f"{head}-{digest}"


def inside(root: Path, *parts: str) -> Path:
    """`root / parts`, resolved, refused (DataError) unless it stays inside `root`: no `..`, no absolute part, no
    symbolic link on the way that leads out. The last part is not resolved: a write renames over it (replacing a
    link there rather than following it)."""
    base = root.resolve()
    target = base.joinpath(*parts)
    where = target.parent.resolve() / target.name
    if target.name in ("", ".", "..") or not where.parent.is_relative_to(base):
        raise DataError(f"{root}: {'/'.join(parts)!r} would be written outside it; refused")
    return where


def _claim(tmp: Path) -> None:
    """Create `tmp` as a new regular file of this writer's, removing whatever sat there (a stale temporary, or a
    link planted under its name): the write that follows fills this file, never a link's target."""
    for _ in range(2):
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666))
            return
        except FileExistsError:
            tmp.unlink()
    raise DataError(f"{tmp}: cannot create a temporary file there (something keeps taking its name)")


def write_atomic(path: Path, write: Callable[[Path], object]) -> Path:
    """Let `write` fill a temporary sibling of `path`, then rename it into place. The sibling is this writer's
    own: with one name for all, a second writer renamed the first one's half-written file away under it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        _claim(tmp)
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
        text = path.read_text(encoding="utf-8")
        document = json.loads(text)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except json.JSONDecodeError as err:
        raise DataError(f"{path}:{err.lineno}: invalid JSON: {json_problem(err, with_line=False)}") from None
    refuse_lone_surrogates(path, text, document)
    return document


def refuse_lone_surrogates(path: Path, text: str, document: Any) -> None:
    """JSON may spell half of a UTF-16 pair alone (`"\\udc80"`); Python reads it as a string no file, log or
    UTF-8 text can hold, which would fail wherever it is written next. One line naming the file instead. The text
    is searched first, so only a file that spells such escapes is walked again."""
    if not _LONE_SURROGATE_ESCAPE.search(text):
        return
    try:
        json.dumps(document, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise DataError(
            f"{path}: invalid JSON: a lone UTF-16 surrogate escape (\\udXXX) is not text"
        ) from None
