"""Write report.md, report.html and plots/*.svg for one or more run directories."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from rich.console import Console

from prbj.report.console import print_report
from prbj.report.content import ReportContent, build_content
from prbj.report.html import render_html
from prbj.report.layout import report_sections
from prbj.runs.rundir import load_run, read_downstream
from prbj.report.markdown import PLOTS_DIR, render_markdown

MARKDOWN_FILE = "report.md"
HTML_FILE = "report.html"


@dataclass(frozen=True)
class ReportFiles:
    markdown: Path
    html: Path
    plots: list[Path]
    content: ReportContent


def write_reports(
    run_dirs: Sequence[Path],
    out_dir: Path | None = None,
    *,
    console: Console | None = None,
    title: str | None = None,
    downstream: Sequence[Path] = (),
) -> ReportFiles:
    """Render the runs into `out_dir` (the run directory itself when there is one run and no out_dir);
    print the terminal report to `console` when given."""
    runs = [load_run(Path(d)) for d in run_dirs]
    if not runs:
        raise ValueError("write_reports needs at least one run directory")
    target = Path(out_dir) if out_dir is not None else runs[0].run_dir
    extra = [read_downstream(Path(path)) for path in downstream]
    content = build_content(runs, title=title, extra_downstream=pl.concat(extra) if extra else None)
    sections = report_sections(content)
    plots_dir = target / PLOTS_DIR
    plots_dir.mkdir(parents=True, exist_ok=True)
    plot_files = []
    for section in sections:
        for figure in section.figures:
            path = plots_dir / f"{figure.name}.svg"
            _write_text(path, figure.svg(standalone=True) + "\n")
            plot_files.append(path)
    markdown = target / MARKDOWN_FILE
    html = target / HTML_FILE
    _write_text(markdown, render_markdown(content, sections))
    _write_text(html, render_html(content, sections))
    if console is not None:
        print_report(content, console)
    return ReportFiles(markdown, html, plot_files, content)


def _write_text(path: Path, text: str) -> None:
    # Write then rename, so a reader never sees half a report.
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
