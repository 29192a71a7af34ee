"""The private store: what a guarded run keeps of personal text, on this machine only, readable by its owner.

It holds each pseudonymizing run's pseudonym table (`pseudonyms/<key>.json`: per user, entity kind, original
text, placeholder) and each guarded run's texts (`runs/<run-id>/*.parquet`: the judges' replies and context
blocks, the planner's aspects), which the run directory then does not hold: a run directory (reports/, a
baseline committed to git, a bundle sent to a colleague) carries pair ids and figures, never personal text.

Where: --private-dir, else $PRBJ_PRIVATE_DIR, else $XDG_DATA_HOME/prbj/private (~/.local/share/prbj/private):
outside the project tree, the cache and reports/, so none of them can carry it along by accident. Folders are
created 0700 and files written 0600 whatever the umask, atomically. Files read back are untrusted input: JSON
of the expected shape or a refusal naming the file; never pickle.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prbj.errors import ConfigError

if TYPE_CHECKING:
    import polars as pl

STORE_ENV = "PRBJ_PRIVATE_DIR"
FORMAT = 1
PSEUDONYMS = "pseudonyms"
RUNS = "runs"
_OWNER_ONLY_DIR = 0o700
_OWNER_ONLY_FILE = 0o600


def default_directory() -> Path:
    if os.environ.get(STORE_ENV):
        return Path(os.environ[STORE_ENV])
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "prbj" / "private"


@dataclass(frozen=True)
class Mapping:
    """One user's pseudonyms: (kind, original, placeholder) in the order they were named."""

    entries: tuple[tuple[str, str, str], ...]

    def reveal(self, text: str) -> str:
        """`text` with each placeholder back to the original it stands for."""
        return _swap(text, {pseudonym: original for _, original, pseudonym in self.entries})

    def apply(self, text: str) -> str:
        """`text` (clear) with each original replaced by its placeholder, as the run sent it (whole words,
        longest first): what the viewer shows without Presidio installed."""
        return _swap(text, {original: pseudonym for _, original, pseudonym in self.entries})


@dataclass(frozen=True)
class Pseudonyms:
    """A pseudonymizing run's table: per user key, that user's mapping; and how it was made."""

    key: str
    users: dict[str, Mapping]
    entities: tuple[str, ...]
    ner: str | None
    answers: bool
    counts: dict[str, int] = field(default_factory=dict)

    def mapping(self, user: str) -> Mapping:
        return self.users.get(user, Mapping(()))

    def record(self) -> dict[str, Any]:
        """What run.json says of it: the table's name in the store and what it replaced, never its content."""
        return {
            "pseudonyms": self.key,
            "entities": list(self.entities),
            "ner": self.ner,
            "questions_and_answers": self.answers,
            "replaced": dict(sorted(self.counts.items())),
        }


def table_key(fingerprint: str, entities: tuple[str, ...], ner: str | None, answers: bool) -> str:
    """The table's name: the data and the settings that determine it (no text of it)."""
    blob = json.dumps([FORMAT, fingerprint, sorted(entities), ner, answers])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class PrivateStore:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_directory()

    # --- pseudonym tables ---------------------------------------------------------------------------
    def save_pseudonyms(self, table: Pseudonyms) -> Path:
        body = {
            "format": FORMAT,
            "key": table.key,
            "entities": list(table.entities),
            "ner": table.ner,
            "answers": table.answers,
            "users": {user: [list(entry) for entry in m.entries] for user, m in table.users.items()},
        }
        return self._write(self.directory / PSEUDONYMS / f"{table.key}.json", json.dumps(body).encode())

    def load_pseudonyms(self, key: str) -> Pseudonyms | None:
        """The table named `key`, None when this machine does not have it."""
        if not re.fullmatch(r"[0-9a-f]{16}", key):
            raise ConfigError(f"pseudonym table {key!r}: not a table name (16 hex digits)")
        path = self.directory / PSEUDONYMS / f"{key}.json"
        if not path.is_file():
            return None
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
            users = {
                str(user): Mapping(tuple((str(k), str(o), str(p)) for k, o, p in entries))
                for user, entries in body["users"].items()
            }
            return Pseudonyms(
                key=key,
                users=users,
                entities=tuple(str(e) for e in body["entities"]),
                ner=body["ner"] if isinstance(body["ner"], str) else None,
                answers=bool(body["answers"]),
            )
        except (
            OSError,
            UnicodeDecodeError,
            json.JSONDecodeError,
            KeyError,
            TypeError,
            ValueError,
            AttributeError,
        ) as err:
            raise ConfigError(
                f"{path}: not a pseudonym table prbj wrote ({type(err).__name__}: {err})"
            ) from None

    # --- a guarded run's texts ----------------------------------------------------------------------
    def save_texts(self, run_id: str, name: str, frame: pl.DataFrame) -> Path:
        """A guarded run's texts of one kind (`judgments`: replies and context blocks; `planner`: aspects)."""
        import io

        buffer = io.BytesIO()
        frame.write_parquet(buffer)
        return self._write(self._texts_path(run_id, name), buffer.getvalue())

    def load_texts(self, run_id: str, name: str) -> pl.DataFrame | None:
        import polars as pl

        path = self._texts_path(run_id, name)
        if not path.is_file():
            return None
        try:
            return pl.read_parquet(path)
        except Exception as err:  # polars raises several types for unreadable files
            raise ConfigError(f"{path}: not a readable Parquet file ({type(err).__name__})") from None

    def _texts_path(self, run_id: str, name: str) -> Path:
        if not re.fullmatch(r"[\w.-]+", run_id):
            raise ConfigError(f"run id {run_id!r}: not a run directory name")
        return self.directory / RUNS / run_id / f"{name}.parquet"

    # --- files --------------------------------------------------------------------------------------
    def _write(self, path: Path, data: bytes) -> Path:
        """Written owner-only (0600 in a 0700 folder, whatever the umask) and atomically."""
        path.parent.mkdir(parents=True, exist_ok=True, mode=_OWNER_ONLY_DIR)
        # mkdir's mode is cut by the umask, and the folders above the file's are made with the default one.
        above = path.parent.relative_to(self.directory).parents
        for folder in (path.parent, *(self.directory / part for part in above)):
            os.chmod(folder, _OWNER_ONLY_DIR)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _OWNER_ONLY_FILE)
        try:
            os.fchmod(descriptor, _OWNER_ONLY_FILE)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
            os.replace(temporary, path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        return path


def _swap(text: str, table: dict[str, str]) -> str:
    """Every whole-word occurrence of a key of `table` in `text` replaced by its value, longest keys first."""
    if not table or not text:
        return text
    alternatives = "|".join(re.escape(key) for key in sorted(table, key=len, reverse=True))
    return re.sub(rf"(?<!\w)(?:{alternatives})(?!\w)", lambda m: table[m.group(0)], text)
