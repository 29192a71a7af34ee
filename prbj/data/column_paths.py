"""Where a card reads a field in a source record: a column path.

    message                 the record's own column
    profile.summary         inside nested objects, one name per level
    responses[2].text       an item of a list by its index (from 0; `[-1]` is the last), then on inside it
    all_options[0]          indexes may follow one another (`grid[1][0]`)

A record that has a column spelled exactly like the whole path (`"profile.summary"` as one key) is read from
that column first. A path that leads nowhere (a missing key, an index past the end, a list where an object is
expected) reads as absent, which the layout then names as a missing field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

# One step of a path: a name (no dots or brackets), then any number of [index].
_STEP = re.compile(r"([^.\[\]]+)((?:\[-?\d{1,9}\])*)")
_INDEX = re.compile(r"\[(-?\d{1,9})\]")

Step = str | int


class PathError(ValueError):
    """A column path that cannot be read (the message says why)."""


@lru_cache(maxsize=4096)
def parse_path(text: str) -> tuple[Step, ...]:
    """The steps of a column path: names and list indexes, in order."""
    if not text or text != text.strip():
        raise PathError(f"expected a column path such as 'message' or 'responses[2].text', got {text!r}")
    steps: list[Step] = []
    for part in text.split("."):
        match = _STEP.fullmatch(part)
        if match is None:
            raise PathError(
                f"{text!r}: expected names joined by '.', each followed by any number of [index] "
                "(e.g. 'responses[2].text')"
            )
        steps.append(match.group(1))
        steps.extend(int(index) for index in _INDEX.findall(match.group(2)))
    return tuple(steps)


def read_path(record: Mapping[str, Any], text: str) -> Any:
    """The value at column path `text` of `record`, or None where the path leads nowhere."""
    if text in record:
        return record[text]
    value: Any = record
    for step in parse_path(text):
        if isinstance(step, int):
            if not isinstance(value, Sequence) or isinstance(value, str | bytes):
                return None
            if not -len(value) <= step < len(value):
                return None
            value = value[step]
        else:
            if not isinstance(value, Mapping) or step not in value:
                return None
            value = value[step]
    return value
