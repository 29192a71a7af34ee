"""Line numbers of the keys of a TOML file, so that an error can name the line of the field it is about.

tomllib parses without positions. This scan follows the file's table headers (`[bon]`, `[[judges]]`) and its
`key = value` lines, counting the entries of arrays of tables, and remembers the line of every key it sees.
Values spread over several lines (arrays) are skipped by bracket depth. A field that is not found falls back
to the line of the nearest table that is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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
