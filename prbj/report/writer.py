"""Render runs already in memory as report.md, report.html and the SVG charts, as text. Which files the texts
go to, and where, is runs.rundir's business: nothing here reads or writes a run directory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from prbj.analysis.run_data import RunData
from prbj.report.across import across_sections
from prbj.report.beyond import beyond_sections
from prbj.report.confidence import confidence_sections
from prbj.report.content import ReportContent, build_content
from prbj.report.html import render_html
from prbj.report.layout import Section, report_sections
from prbj.report.markdown import render_markdown
from prbj.report.privacy import privacy_sections
from prbj.report.users import user_sections


@dataclass(frozen=True)
class RenderedReport:
    markdown: str
    html: str
    # Chart name -> standalone SVG document, in the order the report shows them.
    plots: dict[str, str]
    content: ReportContent
    # The sections beyond the standard report (slices, reliance, judges compared, calibration, ...) that the
    # runs or the caller asked for: the terminal report prints them after its own.
    analyses: tuple[Section, ...] = ()


def all_sections(
    runs: Sequence[RunData], content: ReportContent, *, slices: Sequence[str] = ()
) -> list[Section]:
    """Every section of the report of `runs`, in order: what report.md and report.html render, and what the
    viewer's Run page shows."""
    return report_sections(content) + analysis_sections(runs, content, slices=slices)


def analysis_sections(
    runs: Sequence[RunData], content: ReportContent, *, slices: Sequence[str] = ()
) -> list[Section]:
    """The sections after the standard ones: figures beyond accuracy, then how sure the judges are."""
    labels = [run.run_id for run in content.runs]
    return (
        across_sections(runs)
        + user_sections(runs, labels)
        + beyond_sections(runs, labels, slices=slices)
        + confidence_sections(runs, labels)
        + privacy_sections(runs)
    )


def render_report(
    runs: Sequence[RunData],
    *,
    plots_dir: str,
    title: str | None = None,
    extra_downstream: Sequence[pl.DataFrame] = (),
    slices: Sequence[str] = (),
    leading: Sequence[Section] = (),
) -> RenderedReport:
    """The report of `runs` (one leaderboard when several); `plots_dir` is the folder, relative to report.md,
    its chart links point into; `extra_downstream` are outcome tables beyond those the runs hold; `slices` the
    slices (prbj.analysis.slices) to show besides those the runs' summaries hold; `leading` are sections a
    caller puts first (an experiment's claims and figures)."""
    if not runs:
        raise ValueError("a report needs at least one run")
    extra = pl.concat(extra_downstream) if extra_downstream else None
    content = build_content(runs, title=title, extra_downstream=extra)
    analyses = analysis_sections(runs, content, slices=slices)
    sections = [*leading, *report_sections(content), *analyses]
    plots = {
        figure.name: figure.svg(standalone=True) + "\n" for section in sections for figure in section.figures
    }
    return RenderedReport(
        markdown=render_markdown(content, sections, plots_dir=plots_dir),
        html=render_html(content, sections),
        plots=plots,
        content=content,
        analyses=tuple(analyses),
    )
