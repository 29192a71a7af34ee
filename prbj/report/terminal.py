"""The Rich leaderboard printed at the end of `prbj judge`."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table

from prbj.stats import ALL_SUBSETS, GroupStats

# The official names are long; a table column needs a short header.
SHORT_SUBSET = {
    "Art_and_Entertainment": "A&E",
    "Lifestyle_and_Personal_Development": "L&PD",
    "Society_and_Culture": "S&C",
}


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def _interval(row: GroupStats) -> str:
    if row.ci_low is None or row.ci_high is None:
        return "—"
    return f"{_percent(row.ci_low)}–{_percent(row.ci_high)}"


def leaderboard(summary: Sequence[GroupStats], *, title: str = "Personalized RewardBench accuracy") -> Table:
    subsets = sorted({r.subset for r in summary if r.subset != ALL_SUBSETS})
    overall = sorted((r for r in summary if r.subset == ALL_SUBSETS), key=lambda r: -(r.accuracy or 0.0))
    by_key = {(r.judge, r.context, r.subset): r for r in summary}
    table = Table(
        title=title,
        caption="accuracy %; ties and failures never count as correct; LC = length-controlled",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
        show_edge=False,
    )
    table.add_column("judge", style="bold", no_wrap=True)
    table.add_column("context", no_wrap=True)
    table.add_column("acc", justify="right", style="bold", no_wrap=True)
    table.add_column("95% CI", justify="right", style="dim", no_wrap=True)
    for subset in subsets:
        table.add_column(SHORT_SUBSET.get(subset, subset), justify="right", no_wrap=True)
    table.add_column("ties", justify="right", no_wrap=True)
    table.add_column("LC", justify="right", no_wrap=True)
    table.add_column("failed", justify="right", no_wrap=True)
    for row in overall:
        failed = row.parse_errors + row.api_errors + row.skipped_budget
        cells = [row.judge, row.context, _percent(row.accuracy), _interval(row)]
        for subset in subsets:
            part = by_key.get((row.judge, row.context, subset))
            cells.append(_percent(part.accuracy) if part else "—")
        cells += [_percent(row.tie_rate), _percent(row.length_controlled_accuracy), f"{failed}/{row.n}"]
        table.add_row(*cells)
    return table


def print_leaderboard(summary: Sequence[GroupStats], console: Console) -> None:
    console.print(leaderboard(summary))
