"""The report on the terminal: the same tables as report.md, drawn with Rich."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from prbj.display.fit import FittingTable
from prbj.report.content import ReportContent
from prbj.report.layout import Section, demo_note, report_sections
from prbj.report.tables import TextTable

# The terminal report leaves out what only makes sense next to a chart or is already in the run header.
_SKIP_ON_TERMINAL = {"runs"}


def rich_table(table: TextTable) -> Table:
    rendered = Table(title=table.title, caption=table.note or None, title_justify="left")
    for index, (header, numeric) in enumerate(zip(table.headers, table.numeric, strict=True)):
        # Names (judge, context, run) stay whole; numbers and free text give way first.
        label = not numeric and index < len(table.headers) - 1
        rendered.add_column(
            header,
            justify="right" if numeric else "left",
            overflow="fold",
            no_wrap=label,
            style="bold" if index == table.emphasis else None,
        )
    for row in table.rows:
        rendered.add_row(*row)
    return rendered


def _key_columns(table: TextTable) -> int:
    """How many leading columns name a row (a rank, then the judge, context and run labels)."""
    count = 0
    for header, numeric in zip(table.headers, table.numeric, strict=True):
        if numeric and header != "#":
            break
        count += 1
    return max(1, min(count, len(table.headers) - 1))


def print_report(content: ReportContent, console: Console, analyses: Sequence[Section] = ()) -> None:
    """The report's tables; `analyses` (the figures beyond accuracy a run or `--slice` asked for, calibration)
    follow the standard sections, as in report.md."""
    console.rule(content.title)
    sections: Sequence[Section] = [*report_sections(content, terse=True), *analyses]
    for run in content.runs:
        console.print(
            f"[bold]{run.run_id}[/bold]  dataset {run.dataset_label} ({run.n_pairs} pairs, "
            f"fingerprint {run.fingerprint}), seed {run.seed}",
            highlight=False,
        )
    for section in sections:
        if section.key in _SKIP_ON_TERMINAL:
            continue
        if section.intro:
            console.print(f"[bold]{section.title}[/bold]: [dim]{section.intro}[/dim]", highlight=False)
        if section.key == "cost" and not content.has_cost:
            continue
        for table in section.tables:
            if table.rows:
                # Stacked when it would not fit whole: nothing cut or dropped at 80 columns or in a log.
                console.print(FittingTable(rich_table(table), key_columns=_key_columns(table)))
    if (demo := demo_note(content)) is not None:
        console.print(f"[dim]{demo}[/dim]")
