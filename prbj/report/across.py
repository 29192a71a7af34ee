"""The table of judges across benchmarks (prbj.analysis.across) as text: one TextTable that the terminal,
benchmarks.md and benchmarks.html lay out, so the three show the same figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from prbj.analysis.across import AcrossTable, across_benchmarks, columns_of
from prbj.analysis.run_data import RunData
from prbj.report import fmt
from prbj.report.html import html_table, page
from prbj.report.layout import Section
from prbj.report.markdown import markdown_table
from prbj.report.tables import UPPER_BOUND_MARK, TextTable

TITLE = "Judges across benchmarks"
# The last row where some benchmark's items hold more than two answers: each column's chance level.
CHANCE_ROW = "chance (random pick)"
NOTE = (
    "Each cell: the benchmark's headline % with its 95% interval, the figure its own leaderboard ranks by (its "
    "card's [protocol] unit; under the header when it is not user accuracy); without a card protocol, user "
    "accuracy (each user's accuracy over their decided pairs, averaged over users, with a Korn–Graubard interval over "
    "users), which is pair accuracy where every user has one pair (PRB). Mean rank: the "
    "judge's rank within each benchmark (1 = best; ties share the mean place), averaged over the benchmarks it "
    "ran on (ranked on). A benchmark on different pairs (another subset or --limit) is its own column. "
    f"{UPPER_BOUND_MARK}: the oracle context showed the judge the scoring standard; an upper bound, never ranked."
)


def across_text_table(table: AcrossTable) -> TextTable:
    headers = [
        "#",
        "judge",
        "context",
        *(f"{c.label}{_figure(table, c.key)} %" for c in table.columns),
        "mean rank",
        "ranked on",
    ]
    rows = []
    place = 0
    for row in table.rows:
        if not row.is_upper_bound and row.mean_rank is not None:
            place += 1
        mark = (
            UPPER_BOUND_MARK if row.is_upper_bound else str(place) if row.mean_rank is not None else fmt.DASH
        )
        cells = []
        for column in table.columns:
            cell = row.cells.get(column.key)
            cells.append(
                fmt.DASH if cell is None else fmt.with_span(cell.accuracy, cell.ci_low, cell.ci_high)
            )
        mean = row.mean_rank
        rows.append(
            [
                mark,
                row.judge,
                row.context,
                *cells,
                fmt.DASH if mean is None else f"{mean:.2f}",
                f"{row.ranked_on}/{len(table.columns)}",
            ]
        )
    if any(column.chance is not None for column in table.columns):
        # Best-of-k columns are read against what a judge picking at random reaches (pairs: 50%).
        chance = [fmt.percent(0.5 if c.chance is None else c.chance) for c in table.columns]
        rows.append([fmt.DASH, CHANCE_ROW, fmt.DASH, *chance, fmt.DASH, fmt.DASH])
    numeric = [True, False, False, *[True] * len(table.columns), True, True]
    return TextTable("benchmarks", TITLE, headers, rows, numeric, NOTE)


def _figure(table: AcrossTable, key: str) -> str:
    """` (judgments)` after a column whose headline is not user accuracy, so the cells say what they are."""
    names = {row.cells[key].headline for row in table.rows if key in row.cells}
    return f" ({', '.join(sorted(names))})" if names and names != {"users"} else ""


@dataclass(frozen=True)
class RenderedAcross:
    markdown: str
    html: str


def render_across(table: AcrossTable) -> RenderedAcross:
    text = across_text_table(table)
    markdown = f"# {TITLE}\n\n{markdown_table(text)}\n\n_{text.note}_\n"
    body = f'<h1>{escape(TITLE)}</h1>\n{html_table(text)}\n<p class="note">{escape(text.note)}</p>'
    return RenderedAcross(markdown, page(TITLE, body))


def across_sections(runs: Sequence[RunData]) -> list[Section]:
    """The table as a report section, when the runs of one report span several benchmarks (an experiment over
    benchmarks, `prbj report --mix-datasets`)."""
    if len(columns_of(runs)) < 2:
        return []
    return [Section("benchmarks", TITLE, tables=[across_text_table(across_benchmarks(runs))])]
