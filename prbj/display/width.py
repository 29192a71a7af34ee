"""How wide prbj's output may be: the one the user gave or has. `COLUMNS` when set, else the terminal's, else
UNKNOWN_WIDTH (a CI log, a pipe with no terminal behind it)."""

from __future__ import annotations

import os
import textwrap
from typing import Any

from rich.console import Console
from rich.markup import escape

# When neither COLUMNS nor a terminal says how wide the output may be (CI logs, `> file` without a terminal).
UNKNOWN_WIDTH = 100
# Narrower than this, even a stacked block cannot hold a label and its value side by side.
NARROWEST = 40


def output_width() -> int:
    """COLUMNS when set to a number, else the width of a terminal on stdout, stderr or stdin (`prbj report |
    less` still fits the terminal the user is looking at), else UNKNOWN_WIDTH."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return max(int(columns), NARROWEST)
    for descriptor in (1, 2, 0):
        try:
            width = os.get_terminal_size(descriptor).columns
        except (OSError, ValueError):
            continue
        if width > 0:
            return max(width, NARROWEST)
    return UNKNOWN_WIDTH


def output_console(*, stderr: bool = False, **options: Any) -> Console:
    """The console every prbj command prints to: `output_width()` columns, terminal or not."""
    return Console(stderr=stderr, width=output_width(), **options)


def print_whole(console: Console, line: str, **options: Any) -> None:
    """A plain line that names files: wrapped at the console's width between words only, so a path is never
    cut in two (it could be neither copied nor grepped); a path wider than the console keeps a line of its
    own. Printed without markup: a folder's name may hold brackets."""
    folded = textwrap.wrap(line, console.width, break_long_words=False, break_on_hyphens=False) or [""]
    console.print("\n".join(folded), soft_wrap=True, markup=False, **options)


def print_error(console: Console, message: str) -> None:
    """One `error: …` line, never wrapped: a log is grepped for it (the terminal still folds it for the eye).
    The message is escaped: it names things like "[price]" that Rich would take for markup and drop."""
    console.print(f"[bold red]error:[/bold red] {escape(message)}", soft_wrap=True)
