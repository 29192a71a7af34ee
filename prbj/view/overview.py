"""The Runs page (one leaderboard per dataset, from each run's summary alone) and the Run and Compare pages
(the report's own sections, tables and figures, computed by prbj.report from the runs in memory)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from prbj.analysis.headline import headline_of
from prbj.analysis.run_data import RunData
from prbj.analysis.stats import ALL_SUBSETS
from prbj.report.content import build_content
from prbj.report.layout import demo_note
from prbj.report.writer import all_sections
from prbj.view.catalog import Catalog, RunEntry
from prbj.view.links import Links
from prbj.view.query import Query


@dataclass(frozen=True)
class TableView:
    title: str
    headers: list[str]
    rows: list[list[str]]
    numeric: list[bool]
    note: str = ""
    # Per row, where its first cell links to (a judge's judgments), or None.
    links: list[str | None] = field(default_factory=list)


@dataclass(frozen=True)
class FigureView:
    name: str
    title: str
    caption: str
    svg: str  # built by prbj.report.svg, which escapes every string it writes


@dataclass(frozen=True)
class SectionView:
    key: str
    title: str
    intro: str
    tables: list[TableView]
    figures: list[FigureView]


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def leaderboard_rows(entry: RunEntry, links: Links) -> list[dict[str, Any]]:
    """One row per judge × context of a run: its headline over all subsets (the figure its benchmark ranks by,
    prbj.analysis.headline) with its interval, failures, cost."""
    assert entry.header is not None
    headline = headline_of(entry.header.summary)
    rows = []
    for result in entry.header.results:
        if result.subset != ALL_SUBSETS:
            continue
        query = Query(judges=(result.judge,), contexts=(result.context,))
        value = headline.value(result)
        low, high = headline.interval(result)
        rows.append(
            {
                "run": entry,
                "judge": result.judge,
                "context": result.context,
                # Named as the run's leaderboard names it: user accuracy only where it is not pair accuracy.
                "figure": "users"
                if headline.is_users(result)
                else "acc"
                if headline.native
                else headline.short,
                "accuracy": value,
                "accuracy_text": _percent(value),
                "interval": f"{_percent(low)}–{_percent(high)}",
                "n": result.n,
                "failed": result.failed,
                "link": links.judgments(entry.key, query),
                "failed_link": links.judgments(entry.key, query, outcome="failed"),
            }
        )
    return rows


def runs_page(catalog: Catalog, links: Links) -> dict[str, Any]:
    groups = []
    for entries in catalog.groups():
        dataset = entries[0].header.dataset if entries[0].header is not None else {}
        rows = [row for entry in entries for row in leaderboard_rows(entry, links)]
        rows.sort(key=lambda r: (r["accuracy"] is None, -(r["accuracy"] or 0.0)))
        figures = list(dict.fromkeys(row["figure"] for row in rows))
        groups.append(
            {
                "figure": figures[0] if len(figures) == 1 else "headline",
                "fingerprint": entries[0].fingerprint,
                "source": dataset.get("source", "?"),
                "n_pairs": dataset.get("n_pairs", "?"),
                "runs": entries,
                "rows": rows,
            }
        )
    return {
        "title": "Runs",
        "groups": groups,
        "broken": catalog.broken,
        "builds": list(catalog.builds.values()),
    }


def _table_view(table: Any, links: list[str | None] | None = None) -> TableView:
    return TableView(table.title, table.headers, table.rows, table.numeric, table.note, links or [])


@dataclass(frozen=True)
class ReportView:
    sections: list[SectionView]
    demo_note: str | None


def report_view(runs: Sequence[RunData], links: Links, keys: Sequence[str]) -> ReportView:
    """The report's sections for `runs`, with each leaderboard row linked to its judge's judgments."""
    content = build_content(runs)
    sections = all_sections(runs, content)
    run_keys = dict(zip([run.run_id for run in content.runs], keys, strict=False))
    leader_links: list[str | None] = []
    for row in content.leaderboard:
        key = run_keys.get(row.entry.run, keys[0])
        query = Query(judges=(row.entry.judge,), contexts=(row.entry.context,))
        leader_links.append(links.judgments(key, query))
    views = []
    for section in sections:
        tables = [
            _table_view(t, leader_links if t.name == "leaderboard" else None)
            for t in section.tables
            if t.rows
        ]
        figures = [FigureView(f.name, f.title, f.caption, f.svg()) for f in section.figures]
        views.append(SectionView(section.key, section.title, section.intro, tables, figures))
    return ReportView(views, demo_note(content))


def report_page(entries: Sequence[RunEntry], report: ReportView) -> dict[str, Any]:
    """The Run page (one entry) or the Compare page (several)."""
    names = ", ".join(entry.run_id for entry in entries)
    return {
        "title": f"Run {names}" if len(entries) == 1 else f"Compared: {names}",
        "entries": list(entries),
        "sections": report.sections,
        "demo": report.demo_note,
        "query": Query(),
    }
