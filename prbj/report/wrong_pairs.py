"""The HTML report's list of wrong pairs per judge row: the leaderboard links each judge to the pairs it got
wrong (and those that failed), so that a reader goes from a figure to the judgments behind it
(`prbj show RUN --pair ID` prints one in full)."""

from __future__ import annotations

import re
from html import escape

from prbj.report.content import Entry, ReportContent


def anchor(entry: Entry) -> str:
    """A stable id for the entry's list of wrong pairs."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{entry.run}--{entry.judge}--{entry.context}")
    return f"wrong-{slug}"


def wrong_pairs_section(content: ReportContent) -> str:
    """A <section> with one collapsible list per leaderboard row; empty when no row has judgments to list."""
    items = []
    for row in content.leaderboard:
        incorrect, failed = content.wrong_pairs.get(row.entry, ([], []))
        run = f" · run {row.entry.run}" if len(content.runs) > 1 else ""
        title = f"{row.entry.judge} · {row.entry.context}{run}: {len(incorrect)} wrong, {len(failed)} failed"
        body = "".join(
            f"<p><strong>{label}</strong>: {escape(', '.join(ids)) if ids else '—'}</p>"
            for label, ids in (("wrong", incorrect), ("failed", failed))
        )
        items.append(f'<details id="{anchor(row.entry)}"><summary>{escape(title)}</summary>{body}</details>')
    if not items:
        return ""
    return (
        '<section id="wrong-pairs"><h2>Wrong pairs</h2><p>Pair ids each judge got wrong or failed on; '
        "<code>prbj show RUN --pair ID</code> prints one with the judge's reply.</p>"
        + "".join(items)
        + "</section>"
    )
