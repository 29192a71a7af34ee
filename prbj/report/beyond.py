"""The report's sections beyond accuracy: profile reliance, judges compared (the "significantly better than"
matrix and the minimum detectable difference), juries beside their members, self-consistency, and accuracy by
slice. Figures are computed from the runs in memory with prbj.analysis, the same functions that fill
summary.json; a section appears only when its run has its figures (comparisons whenever a run holds two
judges)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from prbj.analysis.compare import Comparison, better_than, compare_judges, entry_label
from prbj.analysis.consistency import ConsistencyRow, self_consistency
from prbj.analysis.reliance import RelianceRow, profile_reliance
from prbj.analysis.run_data import RunData
from prbj.analysis.slices import SliceRow, slice_accuracy
from prbj.analysis.stats import ALL_SUBSETS
from prbj.report import fmt
from prbj.report.labels import LABEL_PAD, draw_lines, label_width, row_layout, wrap
from prbj.report.layout import Section
from prbj.report.plots import Figure, _percent_axis
from prbj.report.svg import MUTED, Canvas, colour
from prbj.report.tables import TextTable

BETTER = "#009E73"
WORSE = "#D55E00"
EVEN = "#eeeeee"


@dataclass(frozen=True)
class RunFigures:
    label: str
    reliance: list[RelianceRow]
    comparisons: list[Comparison]
    consistency: list[ConsistencyRow]
    juries: list[dict[str, Any]]
    slices: list[SliceRow]
    accuracy: dict[str, float | None]


def run_figures(run: RunData, label: str, *, slices: Sequence[str] = ()) -> RunFigures:
    seed = int(run.summary.get("seed", 42) or 42)
    frame = run.judgments
    asked = list(dict.fromkeys([*slices, *(row.get("slice") for row in run.summary.get("slices") or [])]))
    accuracy = {entry_label(r.judge, r.context): r.accuracy for r in run.results if r.subset == ALL_SUBSETS}
    return RunFigures(
        label=label,
        reliance=profile_reliance(frame, seed=seed),
        comparisons=compare_judges(frame, seed=seed) if _entries(frame) >= 2 else [],
        consistency=self_consistency(frame),
        juries=list(run.summary.get("juries") or []),
        slices=slice_accuracy(frame, [s for s in asked if isinstance(s, str)], seed=seed),
        accuracy=accuracy,
    )


def _entries(frame: pl.DataFrame) -> int:
    return frame.select("judge", "context").unique().height if frame.height else 0


def beyond_sections(
    runs: Sequence[RunData], labels: Sequence[str], *, slices: Sequence[str] = ()
) -> list[Section]:
    """Sections for every run (titles carry the run's label when there are several)."""
    sections: list[Section] = []
    several = len(runs) > 1
    for run, label in zip(runs, labels, strict=True):
        figures = run_figures(run, label, slices=slices)
        suffix = f" · {label}" if several else ""
        key = f"-{len(sections)}" if several else ""
        if figures.reliance:
            sections.append(
                Section(
                    f"reliance{key}",
                    f"Profile reliance{suffix}",
                    intro="Each judge also saw another user's profile (context swapped-profile). Reliance = "
                    "accuracy with the real profile − accuracy with the swapped one, on the same pairs, with a "
                    "paired 95% bootstrap interval: about 0 means the judge ignores the profile.",
                    tables=[reliance_table(figures.reliance)],
                )
            )
        if figures.comparisons:
            sections.append(
                Section(
                    f"comparisons{key}",
                    f"Judges compared{suffix}",
                    intro="Every two judges on the pairs both answered: the accuracy difference with a paired "
                    "95% interval (a bootstrap over pairs; over users where users repeat), McNemar's p (over users "
                    "where users repeat) and Holm's correction across all comparisons. MDE: the "
                    "smallest difference these pairs detect at α = 0.05 with 80% power (prbj power).",
                    tables=[comparison_table(figures.comparisons), better_table(figures.comparisons)],
                    figures=[matrix_figure(figures.comparisons, key)],
                )
            )
        if figures.juries:
            sections.append(Section(f"juries{key}", f"Juries{suffix}", tables=[jury_table(figures)]))
        if figures.consistency:
            sections.append(
                Section(
                    f"consistency{key}",
                    f"Self-consistency{suffix}",
                    intro="Each LLM judgment was asked K times. Agreement: share of pairs on which all K samples "
                    "gave the same verdict. Majority accuracy: accuracy of the majority verdict.",
                    tables=[consistency_table(figures.consistency)],
                )
            )
        if figures.slices:
            kinds = list(dict.fromkeys(row.slice for row in figures.slices))
            sections.append(
                Section(
                    f"slices{key}",
                    f"Accuracy by slice{suffix}",
                    tables=[slice_table(figures.slices)],
                    figures=[slice_figure(figures.slices, kind, key) for kind in kinds],
                )
            )
    return sections


def _ci(low: float | None, high: float | None, *, signed: bool = False) -> str:
    if low is None or high is None:
        return fmt.DASH
    show = fmt.points if signed else fmt.percent
    return f"{show(low)}…{show(high)}"


def reliance_table(rows: Sequence[RelianceRow]) -> TextTable:
    return TextTable(
        "reliance",
        "Profile reliance",
        ["judge", "pairs", "real profile %", "swapped %", "none %", "reliance (pp)", "95% CI (pp)"],
        [
            [
                r.judge,
                str(r.n),
                fmt.percent(r.accuracy_profile),
                fmt.percent(r.accuracy_swapped),
                fmt.percent(r.accuracy_none),
                fmt.points(r.reliance),
                _ci(r.ci_low, r.ci_high, signed=True),
            ]
            for r in rows
        ],
        [False, True, True, True, True, True, True],
        "pp: percentage points. none: the same judge without any profile, on the same pairs (— when it did "
        "not run there).",
    )


def comparison_table(rows: Sequence[Comparison]) -> TextTable:
    clustered = any(c.users is not None for c in rows)
    return TextTable(
        "comparisons",
        "Judges compared",
        [
            "first",
            "second",
            "pairs",
            *(["users"] if clustered else []),
            "difference (pp)",
            "95% CI (pp)",
            "McNemar p",
            "Holm p",
            "MDE (pp)",
        ],
        [
            [
                c.first,
                c.second,
                str(c.n),
                *([fmt.DASH if c.users is None else str(c.users)] if clustered else []),
                fmt.points(c.difference),
                _ci(c.ci_low, c.ci_high, signed=True),
                fmt.p_value(c.p_value),
                fmt.p_value(c.p_holm),
                fmt.percent(c.min_detectable_difference),
            ]
            for c in rows
        ],
        [False, False, True, *([True] if clustered else []), True, True, True, True, True],
        "difference: accuracy of first − second. MDE: minimum detectable difference at α = 0.05, 80% power, "
        "from the observed discordance (— when no difference is detectable with this many pairs)."
        + (
            " Users have several pairs here: the interval is over users (resampling them with all their pairs;"
            " under 50 users, t over users, approximate), the test is over users (the exact sign-flip test under"
            " 50 users, Obuchowski's clustered McNemar from 50) and decides significance, and the MDE counts "
            "pairs at their effective number (pairs ÷ the design effect of the clustering)."
            if clustered
            else ""
        ),
    )


def better_table(rows: Sequence[Comparison]) -> TextTable:
    wins = better_than(list(rows))
    return TextTable(
        "better-than",
        "Significantly better than",
        ["judge", "significantly better than (Holm-corrected p < 0.05)"],
        [[entry, ", ".join(losers) or fmt.DASH] for entry, losers in wins.items()],
        [False, False],
    )


def jury_table(figures: RunFigures) -> TextTable:
    rows = []
    for jury in figures.juries:
        members = [str(m) for m in jury.get("members") or []]
        context = str(jury.get("context"))
        label = entry_label(str(jury.get("name")), context)
        member_acc = []
        for member in members:
            found = [v for k, v in figures.accuracy.items() if k.startswith(f"{member} · ")]
            member_acc.append(f"{member} {fmt.percent(found[0]) if found else fmt.DASH}")
        rows.append(
            [
                label,
                fmt.percent(figures.accuracy.get(label)),
                "; ".join(member_acc),
                str(jury.get("ties")),
                str(jury.get("member_failures")),
                str(jury.get("no_member_answered")),
            ]
        )
    return TextTable(
        "juries",
        "Juries beside their members",
        ["jury", "accuracy %", "members (accuracy %)", "ties", "member failures", "no member answered"],
        rows,
        [False, True, False, True, True, True],
        "A jury's verdict is its members' majority; an even split is a tie (never correct); a failed member "
        "abstains.",
    )


def consistency_table(rows: Sequence[ConsistencyRow]) -> TextTable:
    return TextTable(
        "consistency",
        "Self-consistency",
        ["judge", "context", "K", "pairs", "agreement %", "majority acc %", "first sample acc %"],
        [
            [
                r.judge,
                r.context,
                str(r.samples),
                str(r.n),
                fmt.percent(r.agreement),
                fmt.percent(r.majority_accuracy),
                fmt.percent(r.first_sample_accuracy),
            ]
            for r in rows
        ],
        [False, False, True, True, True, True, True],
    )


def slice_table(rows: Sequence[SliceRow]) -> TextTable:
    return TextTable(
        "slices",
        "Accuracy by slice",
        ["judge", "context", "slice", "bin", "pairs", "accuracy %", "95% CI"],
        [
            [
                r.judge,
                r.context,
                r.slice,
                r.bin,
                str(r.n_ok),
                fmt.percent(r.accuracy),
                _ci(r.ci_low, r.ci_high),
            ]
            for r in rows
        ],
        [False, False, False, False, True, True, True],
        "Bins of profile-posts, profile-tokens and length-diff (chosen minus rejected words) are quantile bins "
        "over the pairs; aspects is the pair's rubric-aspect count.",
    )


def slice_figure(rows: Sequence[SliceRow], kind: str, key: str = "") -> Figure:
    mine = [r for r in rows if r.slice == kind]
    entries = list(dict.fromkeys(entry_label(r.judge, r.context) for r in mine))
    paint = {e: colour(i) for i, e in enumerate(entries)}
    labels = [f"{entry_label(r.judge, r.context)} — {r.bin}" for r in mine]
    label_w = label_width(labels)
    plot_w = 520.0
    top = 40.0
    width = label_w + plot_w + 40
    layout = row_layout(labels, label_w, top)
    bottom = layout.bottom
    canvas = Canvas(width, bottom + 30, title=f"Accuracy by {kind}, with 95% CI")
    canvas.text(label_w, 16, f"accuracy % by {kind}", size=12, bold=True)
    layout.draw(canvas, width)
    _percent_axis(canvas, label_w, plot_w, top, bottom, step=0.25)
    for i, (row, label) in enumerate(zip(mine, labels, strict=True)):
        y = layout.middle(i)
        if row.accuracy is None:
            canvas.text(label_w + 4, y, "no answered pairs", size=11, fill=MUTED)
            continue
        tip = f"{label}: {fmt.percent(row.accuracy)}% ({_ci(row.ci_low, row.ci_high)}), {row.n_ok} pairs"
        if row.ci_low is not None and row.ci_high is not None:
            canvas.line(
                label_w + row.ci_low * plot_w,
                y,
                label_w + row.ci_high * plot_w,
                y,
                stroke=paint[entry_label(row.judge, row.context)],
                width=2.0,
            )
        canvas.circle(
            label_w + row.accuracy * plot_w,
            y,
            4.5,
            fill=paint[entry_label(row.judge, row.context)],
            tooltip=tip,
        )
    return Figure(
        f"slice-{kind}{key}",
        f"Accuracy by {kind}",
        "Dot: accuracy in the bin; bar: its 95% interval (over users where users repeat); dashed line: 50% "
        "(chance).",
        canvas,
    )


def matrix_figure(rows: Sequence[Comparison], key: str = "") -> Figure:
    """Row judge vs column judge: green when the row is significantly better, orange when worse; the cell
    shows the difference in points."""
    entries = list(dict.fromkeys([e for c in rows for e in (c.first, c.second)]))
    cell = 64.0
    # Columns are headed by the rows' numbers: a judge's name is written once, in full, beside its row.
    names = [f"{i + 1}: {entry}" for i, entry in enumerate(entries)]
    label_w = label_width(names)
    lines = [wrap(name, label_w - 2 * LABEL_PAD, 12.0) for name in names]
    top = 30.0
    width = label_w + cell * len(entries) + 20
    canvas = Canvas(width, top + cell * len(entries) + 20, title="Significantly better than (Holm-corrected)")
    by_pair = {(c.first, c.second): c for c in rows}
    for j in range(len(entries)):
        canvas.text(label_w + j * cell + cell / 2, 16, str(j + 1), size=11, anchor="middle", fill=MUTED)
    for i, row_entry in enumerate(entries):
        y = top + i * cell
        draw_lines(
            canvas, LABEL_PAD, y + cell / 2, lines[i], size=12.0
        )  # four lines fit a cell: 180 characters
        for j, col_entry in enumerate(entries):
            x = label_w + j * cell
            if i == j:
                canvas.rect(x + 1, y + 1, cell - 2, cell - 2, fill="#ffffff")
                continue
            comparison = by_pair.get((row_entry, col_entry))
            sign = 1.0
            if comparison is None:
                comparison = by_pair.get((col_entry, row_entry))
                sign = -1.0
            if comparison is None or comparison.difference is None:
                canvas.rect(x + 1, y + 1, cell - 2, cell - 2, fill=EVEN)
                continue
            diff = sign * comparison.difference
            fill = EVEN if not comparison.significant else BETTER if diff > 0 else WORSE
            tip = (
                f"{row_entry} vs {col_entry}: {fmt.points(diff)} pp, Holm p {fmt.p_value(comparison.p_holm)}"
            )
            canvas.rect(x + 1, y + 1, cell - 2, cell - 2, fill=fill, opacity=0.85, tooltip=tip)
            canvas.text(x + cell / 2, y + cell / 2, fmt.points(diff), size=11, anchor="middle")
    return Figure(
        f"comparison-matrix{key}",
        "Significantly better than",
        "Cell: accuracy of the row judge minus the column judge, in points; green: row significantly better, "
        "orange: significantly worse (McNemar, Holm-corrected, α = 0.05); grey: no significant difference.",
        canvas,
    )
