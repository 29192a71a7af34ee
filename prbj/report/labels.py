"""Where the charts' words go: labels wrapped to the room they have (never cut), rows as tall as their label,
legends that wrap onto more lines instead of running off the chart.

A judge's name can be anything from `length` to `litellm:openai/Qwen/Qwen3-8B-Instruct-2507-AWQ · profile`;
a chart gives its labels a column of bounded width and lets a long one take two or three lines, broken after
a space, `·`, `/`, `-`, `:` or `_` (inside a word only when the word alone is wider than the column).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from prbj.report.svg import INK, Canvas, text_width

ROW = 26.0
LABEL_SIZE = 12.0
# Line height as a multiple of the font size.
LINE_HEIGHT = 1.25
# A label column is as wide as its widest label, within these bounds (px); wider labels wrap.
LABEL_MIN, LABEL_MAX = 120.0, 360.0
LABEL_PAD = 8.0
_PIECE = re.compile(r"[^\s/·:_-]+[\s/·:_-]*|[\s/·:_-]+")


def label_width(labels: Sequence[str], size: float = LABEL_SIZE) -> float:
    widest = max((text_width(label, size) for label in labels), default=0.0)
    return min(max(widest + 2 * LABEL_PAD + 2, LABEL_MIN), LABEL_MAX)


def wrap(text: str, width: float, size: float = LABEL_SIZE) -> list[str]:
    """`text` in lines no wider than `width`, every character kept."""
    lines: list[str] = []
    line = ""
    for piece in _PIECE.findall(text):
        if text_width((line + piece).rstrip(), size) <= width:
            line += piece
            continue
        if line.strip():
            lines.append(line.rstrip())
        line = ""
        while text_width(piece.rstrip(), size) > width:  # a word wider than a line: split it by characters
            cut = max(1, max(n for n in range(1, len(piece) + 1) if text_width(piece[:n], size) <= width))
            lines.append(piece[:cut])
            piece = piece[cut:]
        line = piece
    if line.strip() or not lines:
        lines.append(line.rstrip())
    return lines


def draw_lines(
    canvas: Canvas,
    x: float,
    middle: float,
    lines: Sequence[str],
    *,
    size: float = LABEL_SIZE,
    anchor: str = "start",
    fill: str = INK,
    bold: bool = False,
) -> None:
    """`lines` stacked and centred on `middle`."""
    step = size * LINE_HEIGHT
    first = middle - step * (len(lines) - 1) / 2
    for index, line in enumerate(lines):
        canvas.text(x, first + index * step, line, size=size, anchor=anchor, fill=fill, bold=bold)


def lines_height(count: int, size: float = LABEL_SIZE) -> float:
    return count * size * LINE_HEIGHT


@dataclass(frozen=True)
class Rows:
    """Rows of a chart with a label column: each as tall as its wrapped label needs (ROW at least)."""

    lines: list[list[str]]
    tops: list[float]
    heights: list[float]

    def middle(self, index: int) -> float:
        return self.tops[index] + self.heights[index] / 2

    @property
    def bottom(self) -> float:
        return self.tops[-1] + self.heights[-1] if self.tops else 0.0

    def draw(self, canvas: Canvas, width: float, *, size: float = LABEL_SIZE, zebra: bool = True) -> None:
        """Alternate row shading across `width`, and each row's label at the left."""
        for index, lines in enumerate(self.lines):
            if zebra and index % 2 == 0:
                canvas.rect(0, self.tops[index], width, self.heights[index], fill="#f5f6f8")
            draw_lines(canvas, LABEL_PAD, self.middle(index), lines, size=size)


def row_layout(labels: Sequence[str], label_w: float, top: float, *, size: float = LABEL_SIZE) -> Rows:
    wrapped = [wrap(label, label_w - 2 * LABEL_PAD, size) for label in labels]
    heights = [max(ROW, lines_height(len(lines), size) + 6) for lines in wrapped]
    tops = []
    y = top
    for height in heights:
        tops.append(y)
        y += height
    return Rows(wrapped, tops, heights)


LEGEND_ROW = 18.0


def legend_rows(names: Sequence[str], left: float, right: float, *, size: float = 12.0) -> list[list[int]]:
    """Which legend items go on each line, so that no line runs past `right`."""
    lines: list[list[int]] = [[]]
    x = left
    for index, name in enumerate(names):
        item = 17 + text_width(name, size) + 22
        if lines[-1] and x + item - 22 > right:
            lines.append([])
            x = left
        lines[-1].append(index)
        x += item
    return lines


def legend(
    canvas: Canvas,
    items: Sequence[tuple[str, str]],
    left: float,
    y: float,
    right: float,
    *,
    ring_first: bool = False,
) -> float:
    """Swatches and names from `left` on the line at `y`, wrapping onto more lines before `right`; returns the
    height the legend took."""
    lines = legend_rows([name for name, _ in items], left, right)
    for row, members in enumerate(lines):
        line_y = y + row * LEGEND_ROW
        x = left
        for index in members:
            name, paint = items[index]
            if ring_first and index == 0:
                canvas.circle(x + 6, line_y, 5.5, fill="#ffffff", stroke=paint, width=2.5)
            elif ring_first:
                canvas.circle(x + 6, line_y, 4, fill=paint)
            else:
                canvas.rect(x, line_y - 6, 12, 12, fill=paint)
            canvas.text(x + 17, line_y, name, size=12)
            x += 17 + text_width(name, 12) + 22
    return len(lines) * LEGEND_ROW


# Vertical room a point's label needs in a scatter chart.
LABEL_GAP = 14.0


def dodge(
    places: Sequence[tuple[float, float]],
    texts: Sequence[str],
    *,
    low: float,
    high: float,
    size: float = 11.0,
) -> list[float]:
    """The height of each point's label (which starts 9 px right of its point): at the point when that is free,
    else the nearest free height, below then above, within [low, high] (the plot, never over its axes)."""
    order = sorted(range(len(places)), key=lambda i: (places[i][1], places[i][0]))
    placed: list[tuple[float, float, float]] = []  # (left, right, y)
    heights = [0.0] * len(places)
    for i in order:
        left = places[i][0] + 9
        right = left + text_width(texts[i], size)
        start = min(max(places[i][1], low), high)
        candidates = [start, *(start + side * k * LABEL_GAP for k in range(1, 200) for side in (1, -1))]
        free = (
            y
            for y in candidates
            if low <= y <= high
            and not any(
                abs(y - other) < LABEL_GAP and left < end and begin < right for begin, end, other in placed
            )
        )
        y = next(free, start)
        placed.append((left, right, y))
        heights[i] = y
    return heights
