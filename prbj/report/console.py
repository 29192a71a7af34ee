"""The report on the terminal: the same tables as report.md, drawn with Rich."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from prbj.report.content import ReportContent
from prbj.report.layout import DEMO_WARNING, Section
from prbj.report.tables import TextTable

# The terminal report leaves out what only makes sense next to a chart or is already in the run header.
_SKIP_ON_TERMINAL = {"runs"}


def rich_table(table: TextTable) -> Table:
    rendered = Table(title=table.title, caption=table.note or None, title_justify="left")
    for header, numeric in zip(table.headers, table.numeric, strict=True):
        rendered.add_column(header, justify="right" if numeric else "left", overflow="fold")
    for row in table.rows:
        rendered.add_row(*row)
    return rendered


def print_report(content: ReportContent, sections: Sequence[Section], console: Console) -> None:
    console.rule(content.title)
    for run in content.runs:
        console.print(
            f"[bold]{run.run_id}[/bold]  dataset {run.dataset_source} ({run.n_pairs} pairs, "
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
                console.print(rich_table(table))
    if any(run.is_demo_sample for run in content.runs):
        console.print(f"[dim]{DEMO_WARNING}[/dim]")
