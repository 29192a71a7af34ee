"""TOML files read with errors that name the file, the line and the field (`card.toml:12: field 'x.y': ...`):
`TomlFields` checks a parsed document's tables and values, `key_lines` finds the line of each key.

tomllib parses without positions. This scan follows the file's table headers (`[bon]`, `[[judges]]`) and its
`key = value` lines, counting the entries of arrays of tables, and remembers the line of every key it sees.
Values spread over several lines (arrays) are skipped by bracket depth. A field that is not found falls back
to the line of the nearest table that is.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prbj.data.names import did_you_mean
from prbj.errors import ConfigError

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(
    r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+))*)\s*="""
)
_STRING = re.compile(r""""(?:[^"\\]|\\.)*"|'[^']*'""")


def _parts(dotted: str) -> list[str]:
    return [part.strip().strip("\"'") for part in re.split(r"\.(?=(?:[^\"']|\"[^\"]*\"|'[^']*')*$)", dotted)]


def _depth_change(value: str) -> int:
    """How many brackets a value opens and does not close on its line (strings and comments ignored)."""
    text = _STRING.sub("", value).split("#", 1)[0]
    return text.count("[") + text.count("{") - text.count("]") - text.count("}")


@dataclass
class KeyLines:
    """Field path (`judges[2].order`, 1-based entries) → line number."""

    lines: dict[str, int] = field(default_factory=dict)

    def line(self, path: str) -> int | None:
        """The line of `path`, else of its nearest enclosing table or entry that has one."""
        while path:
            for candidate in (path, f"{path}[1]"):  # an array of tables is found by its first entry
                if candidate in self.lines:
                    return self.lines[candidate]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return None


def key_lines(text: str) -> KeyLines:
    found = KeyLines()
    prefix = ""
    counts: dict[str, int] = {}
    depth = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if depth > 0:
            depth += _depth_change(line)
            continue
        header = _HEADER.match(line)
        if header and not _KEY.match(line):
            name = ".".join(_parts(header.group(2)))
            if header.group(1) == "[[":
                counts[name] = counts.get(name, 0) + 1
                prefix = f"{name}[{counts[name]}]"
            else:
                prefix = name
            found.lines.setdefault(prefix, number)
            continue
        key = _KEY.match(line)
        if key:
            path = ".".join([*([prefix] if prefix else []), *_parts(key.group(1))])
            found.lines.setdefault(path, number)
            depth = max(0, _depth_change(line[key.end() :]))
    return found


def read_toml(path: Path) -> tuple[dict[str, Any], str]:
    """The parsed document and its text; an unreadable or invalid file is a one-line ConfigError."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot read: {getattr(err, 'strerror', None) or err}") from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: invalid TOML: {err}") from None


def kind(value: Any) -> str:
    """A value as an error names it."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return repr(value)


class TomlFields:
    """Validation of a parsed TOML document with errors that name file, line and field."""

    def __init__(self, path: Path, lines: KeyLines) -> None:
        self.path = path
        self.lines = lines

    def error(self, where: str, message: str) -> ConfigError:
        line = self.lines.line(where)
        at = f"{self.path}:{line}" if line else str(self.path)
        return ConfigError(f"{at}: field '{where}': {message}")

    def table(self, doc: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
        value = doc.get(key, {})
        if not isinstance(value, dict):
            raise self.error(where, f"expected a table, got {kind(value)}")
        return dict(value)

    def keys(self, table: Mapping[str, Any], where: str, allowed: Sequence[str]) -> None:
        for key in table:
            if key not in allowed:
                raise self.error(
                    f"{where}.{key}" if where else key,
                    f"unknown field;{did_you_mean(key, allowed)} expected one of {', '.join(allowed)}",
                )

    def string(self, table: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str | None:
        value = table.get(key)
        if value is None:
            if required:
                raise self.error(where, f"missing field '{key}'")
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"{where}.{key}", f"expected a non-empty string, got {kind(value)}")
        return value

    def strings(self, table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
        value = table.get(key, [])
        value = [value] if isinstance(value, str) else value
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise self.error(f"{where}.{key}", f"expected a list of strings, got {kind(value)}")
        return tuple(value)

    def integer(self, table: Mapping[str, Any], key: str, where: str, *, minimum: int) -> int | None:
        value = table.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(f"{where}.{key}", f"expected a whole number ≥ {minimum}, got {value!r}")
        return value

    def number(
        self, table: Mapping[str, Any], key: str, where: str, *, positive: bool = False
    ) -> float | None:
        value = table.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self.error(f"{where}.{key}", f"expected a finite number, got {value!r}")
        if value < 0 or (positive and value == 0):
            raise self.error(
                f"{where}.{key}", f"expected a {'positive' if positive else 'non-negative'} number"
            )
        return float(value)
