"""Tables that are never cut: drawn as a table when every cell fits whole, else stacked (one block per row).

Rich squeezes a table that is wider than the console: names wrap mid-word (`gemini-3-fla/sh`) and, past a
point, columns vanish. A researcher reading a CI log or an 80-column terminal must see every figure, so a
table that would not fit whole is printed as one block per row instead: the row's name, then `column: value`
lines."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

_ROOMY = 100_000


def _text(cell: RenderableType) -> Text:
    return Text.from_markup(cell) if isinstance(cell, str) else Text(str(cell))


def stacked(table: Table, *, key_columns: int = 1) -> Group:
    """The table as blocks: the first `key_columns` cells name the row, each other cell gets a line."""
    columns = table.columns
    cells = [list(column.cells) for column in columns]
    rows = len(cells[0]) if cells else 0
    width = max((len(_text(c.header).plain) for c in columns[key_columns:]), default=0)
    parts: list[RenderableType] = []
    if table.title:
        parts.append(
            Text.from_markup(f"[bold]{table.title}[/bold]") if isinstance(table.title, str) else table.title
        )
    for index in range(rows):
        name = Text("  ·  ").join(_text(cells[c][index]) for c in range(min(key_columns, len(columns))))
        name.stylize("bold")
        parts.append(name)
        for column, column_cells in zip(columns[key_columns:], cells[key_columns:], strict=True):
            line = Text(f"  {_text(column.header).plain:<{width}}  ", style="dim")
            line.append_text(_text(column_cells[index]))
            parts.append(line)
    if table.caption:
        parts.append(_text(table.caption) if isinstance(table.caption, str) else table.caption)
    return Group(*parts)


class FittingTable:
    """A Rich renderable: `table` when its natural width fits the space given, else `stacked(table)`."""

    def __init__(self, table: Table, *, key_columns: int = 1) -> None:
        self.table = table
        self.key_columns = key_columns

    def fits(self, console: Console, width: int) -> bool:
        # Measured with room to spare: Rich clamps a measurement to the width it is given.
        natural = Measurement.get(console, console.options.update_width(_ROOMY), self.table).maximum
        return natural <= width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.fits(console, options.max_width):
            yield self.table
        else:
            yield stacked(self.table, key_columns=self.key_columns)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.table).clamp(max_width=options.max_width)


def fitting(tables: Iterable[Table]) -> list[FittingTable]:
    return [FittingTable(table) for table in tables]
