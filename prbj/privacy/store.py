"""The private store: what a guarded run keeps of personal text, on this machine only, readable by its owner.

It holds each pseudonymizing run's pseudonym table (`pseudonyms/<key>.json`: per user, entity kind, original
text, placeholder) and each guarded run's texts (`runs/<run-id>/*.parquet`: the judges' replies and context
blocks, error messages, the planner's aspects), which the run directory then does not hold: a run directory
(reports/, a baseline committed to git, a bundle sent to a colleague) carries pair ids and figures, never
personal text. Guarded runs cache their answers in its `cache/` folder (unless a cache folder is named), since
a reply can quote anything its request held.

Where: --private-dir, else $PRBJ_PRIVATE_DIR, else $XDG_DATA_HOME/prbj/private (~/.local/share/prbj/private):
outside the project tree, the cache and reports/, so none of them can carry it along by accident. Folders are
created 0700 and files written 0600 whatever the umask, atomically. Files read back are untrusted input: JSON
of the expected shape or a refusal naming the file; never pickle.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prbj.errors import ConfigError
from prbj.privacy.entities import NAME_KINDS

if TYPE_CHECKING:
    import polars as pl

STORE_ENV = "PRBJ_PRIVATE_DIR"
# Of the pseudonym tables (2: an entry per spelling, several spellings of one entity sharing a placeholder).
FORMAT = 2
PSEUDONYMS = "pseudonyms"
RUNS = "runs"
CACHE = "cache"
_OWNER_ONLY_DIR = 0o700
_OWNER_ONLY_FILE = 0o600


def default_directory() -> Path:
    if os.environ.get(STORE_ENV):
        return Path(os.environ[STORE_ENV])
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "prbj" / "private"


@dataclass(frozen=True)
class Mapping:
    """One user's pseudonyms: (kind, spelling, placeholder) in the order they were named; an entity written
    several ways (prbj.privacy.entities) has an entry per spelling, all with its placeholder."""

    entries: tuple[tuple[str, str, str], ...]

    def reveal(self, text: str) -> str:
        """`text` with each placeholder back to the first spelling of what it stands for."""
        originals: dict[str, str] = {}
        for _, original, pseudonym in self.entries:
            originals.setdefault(pseudonym, original)
        return self._revealing.sub(lambda m: originals[m.group(0)], text) if originals and text else text

    def apply(self, text: str) -> str:
        """`text` (clear) with each spelling replaced by its placeholder, as the run sent it: the one rewrite a
        pseudonymizing run, a rerun from the stored table and the viewer all use."""
        if not self.entries or not text:
            return text
        exact, folded = self._placeholders
        return self._applying.sub(lambda m: exact.get(m.group(0)) or folded[m.group(0).casefold()], text)

    @cached_property
    def _placeholders(self) -> tuple[dict[str, str], dict[str, str]]:
        exact: dict[str, str] = {}
        folded: dict[str, str] = {}
        for kind, original, pseudonym in self.entries:
            exact.setdefault(original, pseudonym)
            if folds_case(kind, original):
                folded.setdefault(original.casefold(), pseudonym)
        return exact, folded

    @cached_property
    def _applying(self) -> re.Pattern[str]:
        return _whole_words({original: folds_case(kind, original) for kind, original, _ in self.entries})

    @cached_property
    def _revealing(self) -> re.Pattern[str]:
        return _whole_words({pseudonym: False for _, _, pseudonym in self.entries})


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
            "counts": table.counts,
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
                counts={str(k): int(v) for k, v in (body.get("counts") or {}).items()},
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

    # --- the cache of guarded runs -------------------------------------------------------------------
    def cache_directory(self) -> Path:
        """Where a guarded run's answers are cached (prbj.privacy.guard.PrivacyOptions.cache_for): the store's
        `cache/` folder, owner-only like the rest of it."""
        folder = self.directory / CACHE
        self._owner_only(folder)
        return folder

    # --- files --------------------------------------------------------------------------------------
    def _owner_only(self, folder: Path) -> None:
        """`folder` and the folders between it and the store made, 0700 whatever the umask."""
        folder.mkdir(parents=True, exist_ok=True, mode=_OWNER_ONLY_DIR)
        # mkdir's mode is cut by the umask, and the folders above are made with the default one.
        above = folder.relative_to(self.directory).parents
        for each in (folder, *(self.directory / part for part in above)):
            os.chmod(each, _OWNER_ONLY_DIR)

    def _write(self, path: Path, data: bytes) -> Path:
        """Written owner-only (0600 in a 0700 folder, whatever the umask) and atomically."""
        self._owner_only(path.parent)
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


def folds_case(kind: str, spelling: str) -> bool:
    """Whether `spelling` is replaced whatever its case: one word of a name kind (NAME_KINDS) is matched in its
    own case only ("Will", "May" and "Reading" are also words); the others (emails, URLs, identifiers, names of
    two words or more) in any case."""
    return kind not in NAME_KINDS or len(spelling.split()) > 1


def _whole_words(keys: dict[str, bool]) -> re.Pattern[str]:
    """A pattern for every key (True: in any case) where it stands whole, the longest key first, so that of
    two keys at one place the longer one is replaced ("https://x.example/ana-lima" before
    "https://x.example", which would leave "/ana-lima" in clear)."""
    ordered = sorted(keys, key=len, reverse=True)
    alternatives = "|".join(f"(?i:{re.escape(k)})" if keys[k] else re.escape(k) for k in ordered)
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)")
