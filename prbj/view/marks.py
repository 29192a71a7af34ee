"""A judge's reply cut into marked pieces for the pair page: the reasoning before `</think>`, the passages it
quoted from the answers (which the verdict parser cuts out before reading), and the verdict it read. The marks
follow prbj.judges.verdict's rules on the reply as written; they explain a verdict, they never decide one."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from prbj.judges.verdict import bare_verdict, final_part, verdict_spans

# Lines this long or longer (or block quotes) may be quotes of an answer, as the parser counts them.
_QUOTE_LINE = 12
_LINE = re.compile(r"[^\n]*")


@dataclass(frozen=True)
class Piece:
    text: str
    marks: tuple[str, ...]  # any of "reasoning", "quote", "verdict"


def _answer_copies(reply: str, shown: Sequence[str]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for original in sorted({s.strip() for s in shown if s.strip()}, key=len, reverse=True):
        start = reply.find(original)
        while start >= 0:
            end = start + len(original)
            if not any(a < end and start < b for a, b in spans):
                spans.append((start, end))
            start = reply.find(original, end)
    return spans


def _quoted_lines(reply: str, shown: Sequence[str]) -> list[tuple[int, int]]:
    shown_lines = {row.strip() for original in shown for row in original.splitlines() if row.strip()}
    spans = []
    for match in _LINE.finditer(reply):
        line = match.group(0)
        blockquote = line.lstrip().startswith(">")
        bare = line.strip().lstrip(">").strip().strip("\"'“”")
        if bare and (blockquote or len(bare) >= _QUOTE_LINE) and any(bare in row for row in shown_lines):
            spans.append((match.start(), match.end()))
    return spans


def quoted_spans(reply: str, shown: Sequence[str]) -> list[tuple[int, int]]:
    """Where the reply copies an answer it was shown: whole copies, and lines quoted from one."""
    return sorted(_answer_copies(reply, shown) + _quoted_lines(reply, shown))


def verdict_span(reply: str, shown: Sequence[str]) -> tuple[int, int, str] | None:
    """Where the verdict the parser reads stands in the reply: (start, end, letter), or None."""
    quotes = quoted_spans(reply, shown)
    masked = list(reply)
    for start, end in quotes:
        masked[start:end] = " " * (end - start)
    text = "".join(masked)
    offset = len(text) - len(final_part(text))
    found = verdict_spans(text[offset:])
    if found:
        start, end, letter = max(found, key=lambda span: (span[0], span[2]))
        return offset + start, offset + end, letter
    lines = [m for m in _LINE.finditer(text, offset) if m.group(0).strip()]
    bare = bare_verdict(lines[-1].group(0)) if lines else None
    if bare is not None:
        return lines[-1].start(), lines[-1].end(), bare
    return None


def mark_reply(reply: str, shown: Sequence[str]) -> list[Piece]:
    """The reply as consecutive pieces, each with the marks that cover it."""
    if not reply:
        return []
    bounds = {0, len(reply)}
    ranges: list[tuple[int, int, str]] = [(a, b, "quote") for a, b in quoted_spans(reply, shown)]
    reasoning_end = len(reply) - len(final_part(reply))
    if reasoning_end:
        ranges.append((0, reasoning_end, "reasoning"))
    verdict = verdict_span(reply, shown)
    if verdict is not None:
        ranges.append((verdict[0], verdict[1], "verdict"))
    for start, end, _ in ranges:
        bounds.update((start, end))
    cuts = sorted(bounds)
    pieces: list[Piece] = []
    for start, end in itertools.pairwise(cuts):
        marks = tuple(sorted({kind for a, b, kind in ranges if a <= start and end <= b}))
        if pieces and pieces[-1].marks == marks:
            pieces[-1] = Piece(pieces[-1].text + reply[start:end], marks)
        else:
            pieces.append(Piece(reply[start:end], marks))
    return pieces
