"""The one way prbj prints a table: it fits the width it is given, never cuts a cell and never drops a column.

Rich squeezes a table that is wider than the console: names wrap mid-word (`gemini-3-fla/sh`), cells end in
"…" and, past a point, columns vanish. A researcher reading a CI log or an 80-column terminal must see every
figure, so a table is drawn, in this order of preference,

1. whole, when its natural width fits;
2. with a lighter frame and cells wrapped between words (never inside one), when every column still gets its
   longest word; a row's name (a key column) may also break after a "/", so that a path or a hub id
   (`hf:/models/Skywork-Reward-V2-Qwen3-0.6B`) wraps inside its cell instead of stacking the whole table;
3. stacked, one block per row: the row's name, then `column  value` lines.

Titles and captions are printed as paragraphs of their own, wrapped at the console's width, so a long title
never widens or squeezes the table under it.

The width comes from prbj.display.width.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

_ROOMY = 100_000


def _text(cell: RenderableType | None) -> Text:
    if cell is None:
        return Text("")
    if isinstance(cell, Text):
        return cell
    return Text.from_markup(cell) if isinstance(cell, str) else Text(str(cell))


def _columns_copy(table: Table) -> Table:
    """A copy of `table` whose columns can be changed without touching the original (it may be drawn again at
    another width), with no title or caption (printed apart)."""
    drawn = copy.copy(table)
    drawn.columns = [copy.copy(column) for column in table.columns]
    drawn.title = drawn.caption = None
    return drawn


@dataclass(frozen=True)
class _Room:
    """How much a column can give: its natural width, the width at which only its header wraps, and the
    narrowest it can be without breaking a word (content only, no padding)."""

    natural: int
    header_wrapped: int
    narrowest: int


# Where a row's name may break when it is longer than its column: after each "/" of a path or a model id.
_NAME_PIECE = re.compile(r"[^/]*/|[^/]+$")


def _name_pieces(word: str) -> list[str]:
    return _NAME_PIECE.findall(word) or [word]


def _narrowest_name(cell: RenderableType | None) -> int:
    """The narrowest a row's name can be when its long words break after a "/"."""
    return max(
        (cell_len(piece) for word in _text(cell).plain.split() for piece in _name_pieces(word)), default=0
    )


def _room(console: Console, column: Column, *, is_name: bool = False) -> _Room:
    options = console.options.update_width(_ROOMY)
    header = Measurement.get(console, options, column.header)
    cells = [Measurement.get(console, options, cell) for cell in column.cells]
    widest_cell = max((m.maximum for m in cells), default=0)
    if is_name:
        longest_word = max((_narrowest_name(cell) for cell in column.cells), default=0)
    else:
        longest_word = max((m.minimum for m in cells), default=0)
    return _Room(
        natural=max(header.maximum, widest_cell, 1),
        header_wrapped=max(header.minimum, widest_cell, 1),
        narrowest=max(header.minimum, longest_word, 1),
    )


def _broken_name(cell: RenderableType | None, width: int) -> Text:
    """A row's name with each word longer than `width` broken into lines after a "/" (styles kept)."""
    text = _text(cell).copy()
    cuts: list[int] = []
    for word in re.finditer(r"\S+", text.plain):
        if cell_len(word.group()) <= width:
            continue
        at, line = word.start(), 0
        for piece in _name_pieces(word.group()):
            if line and line + cell_len(piece) > width:
                cuts.append(at)
                line = 0
            line += cell_len(piece)
            at += len(piece)
    if not cuts:
        return text
    return Text("\n").join(text.divide(cuts))


def _compact(table: Table) -> Table:
    """The table with the least frame: a rule under the header, one space between columns, no outer edge."""
    drawn = _columns_copy(table)
    drawn.box = box.SIMPLE_HEAD
    drawn.show_edge = False
    drawn.pad_edge = False
    drawn.collapse_padding = True
    drawn.padding = (0, 0)
    return drawn


def _wrapped_widths(console: Console, compact: Table, width: int, key_columns: int) -> list[int] | None:
    """Content widths with which `compact` fits `width`: headers wrap first, then the widest cells, never
    inside a word (a row's name: never but after a "/"); None when even that is too wide."""
    probe = _columns_copy(compact)
    for column in probe.columns:
        column.width = 1
    frame = Measurement.get(console, console.options.update_width(_ROOMY), probe).maximum - len(probe.columns)
    rooms = [_room(console, column, is_name=i < key_columns) for i, column in enumerate(compact.columns)]
    widths = [room.natural for room in rooms]
    for floors in ([r.header_wrapped for r in rooms], [r.narrowest for r in rooms]):
        while sum(widths) + frame > width:
            shrinkable = [i for i, floor in enumerate(floors) if widths[i] > floor]
            if not shrinkable:
                break
            widths[max(shrinkable, key=lambda i: widths[i])] -= 1
    return widths if sum(widths) + frame <= width else None


def _wrapped(compact: Table, widths: list[int], key_columns: int) -> Table:
    for index, (column, width) in enumerate(zip(compact.columns, widths, strict=True)):
        column.width = width
        column.no_wrap = False
        column.overflow = "fold"
        if index < key_columns:
            column._cells = [_broken_name(cell, width) for cell in column.cells]
    return compact


def stacked(table: Table, *, key_columns: int = 1) -> Group:
    """The table as blocks: the first `key_columns` cells name the row, each other cell gets a line of its own
    whose value wraps under itself."""
    columns = table.columns
    keys = min(key_columns, len(columns))
    cells = [list(column.cells) for column in columns]
    rows = len(cells[0]) if cells else 0
    parts: list[RenderableType] = []
    legend = Text("  ·  ").join(_text(column.header) for column in columns[:keys])
    if legend.plain.strip(" ·"):
        # What names each block, as the key columns' headers said in the table.
        legend.stylize("dim")
        parts.append(legend)
    for index in range(rows):
        name = Text("  ·  ").join(_text(cells[c][index]) for c in range(keys))
        name.stylize("bold")
        parts.append(name)
        block = Table.grid(padding=(0, 2), pad_edge=False)
        block.add_column(style="dim", no_wrap=True)
        block.add_column(overflow="fold")
        for column, column_cells in zip(columns[keys:], cells[keys:], strict=True):
            block.add_row(Text("  " + _text(column.header).plain), _text(column_cells[index]))
        parts.append(block)
    return Group(*parts)


class FittingTable:
    """A Rich renderable that draws `table` whole, wrapped or stacked, whichever is the first to fit (see the
    module's docstring). `key_columns` leading cells name a row in the stacked form."""

    def __init__(self, table: Table, *, key_columns: int = 1) -> None:
        self.table = table
        self.key_columns = key_columns

    def fits(self, console: Console, width: int) -> bool:
        """Whether the table fits `width` whole, as Rich would draw it."""
        # Measured with room to spare: Rich clamps a measurement to the width it is given.
        drawn = _columns_copy(self.table)
        natural = Measurement.get(console, console.options.update_width(_ROOMY), drawn).maximum
        return natural <= width

    def _body(self, console: Console, width: int) -> RenderableType:
        if not self.table.columns:
            return Text("")
        if self.fits(console, width):
            return _columns_copy(self.table)
        compact = _compact(self.table)
        widths = _wrapped_widths(console, compact, width, self.key_columns)
        if widths is not None:
            return _wrapped(compact, widths, self.key_columns)
        return stacked(self.table, key_columns=self.key_columns)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.table.title:
            yield _paragraph(self.table.title, "bold")
        yield self._body(console, options.max_width)
        if self.table.caption:
            yield _paragraph(self.table.caption, "dim")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.table).clamp(max_width=options.max_width)


def _paragraph(text: RenderableType, style: str) -> RenderableType:
    if isinstance(text, str):
        paragraph = Text.from_markup(text)
        paragraph.stylize(style)
        return paragraph
    return text
