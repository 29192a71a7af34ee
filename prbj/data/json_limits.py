"""JSON from elsewhere parsed without a traceback: a record nested thousands of levels deep, or a number with
thousands of digits (Python refuses to convert more than 4,300), is one line naming the file, the line and the
field it is in.

Numbers too long to convert are kept as `LongNumber` (their digit count), which every field check refuses with its
usual one line ("expected a string, got a 5000-digit number"); a record too deep for the parser is scanned once
to name the top-level field the nesting starts in.
"""

from __future__ import annotations

import json
import sys
from typing import Any

# Python's own limit on converting digits to an int (sys.get_int_max_str_digits), or 4,300 where it is off.
MAX_DIGITS = sys.get_int_max_str_digits() or 4300


class LongNumber:
    """A JSON number with more digits than Python converts: never an id, a count or a score."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"a {self.digits}-digit number"


def _parse_int(text: str) -> int | LongNumber:
    if len(text) > MAX_DIGITS:
        return LongNumber(len(text.lstrip("-")))
    return int(text)


def _parse_float(text: str) -> float | LongNumber:
    if len(text) > MAX_DIGITS:
        return LongNumber(len(text))
    return float(text)


# One decoder for every call: json.loads with its own parse_int builds a decoder (and its C scanner) per call.
_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float)


def loads(text: str) -> Any:
    """json.loads, with numbers too long to convert kept as LongNumber; raises RecursionError when too deep."""
    return _DECODER.decode(text)


def deep_field(text: str, depth: int = 100) -> str:
    """The top-level field of a JSON object in which nesting first goes past `depth` levels ('record' when it is
    not inside one field of an object)."""
    level = 0
    key: str | None = None
    in_string = escaped = False
    start = -1
    last_string = ""
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                last_string = text[start + 1 : index]
            continue
        if char == '"':
            in_string, start = True, index
        elif char == ":" and level == 1:
            key = last_string
        elif char in "[{":
            level += 1
            if level > depth:
                return key if key is not None else "record"
        elif char in "]}":
            level -= 1
    return key if key is not None else "record"
