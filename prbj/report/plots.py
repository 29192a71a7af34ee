"""The report's charts as SVG, drawn from `ReportContent`.

Each function returns a `Figure` (or None when the run has no data for it); the HTML report inlines the SVG,
the Markdown report links the same drawing saved under plots/.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prbj.analysis.stats import ALL_SUBSETS, GroupStats
from prbj.report import fmt
from prbj.report.content import Correlation, Curve, ReportContent
from prbj.report.labels import ROW, dodge, draw_lines, label_width, legend, row_layout, wrap
from prbj.report.svg import GRID, INK, MUTED, Canvas, colour, text_width

WIDTH = 1120.0


@dataclass(frozen=True)
class Figure:
    name: str
    title: str
    caption: str
    canvas: Canvas

    def svg(self, *, standalone: bool = False) -> str:
        return self.canvas.render(standalone=standalone)


def _percent_axis(
    canvas: Canvas, x0: float, width: float, top: float, bottom: float, *, step: float, chance: float = 0.5
) -> None:
    """Vertical grid on a 0–100% scale, the chance line dashed (50% for pairs), tick labels below; the end labels
    sit inside the scale, so that the next panel's "0" never runs into this one's "100"."""
    ticks = round(1.0 / step)
    if all(abs(i * step - chance) > 1e-9 for i in range(ticks + 1)):
        # A chance level between ticks (best of 3: 33%) gets a dashed line of its own.
        canvas.line(x0 + chance * width, top, x0 + chance * width, bottom, stroke="#9a9a9a", dash="4 3")
    for i in range(ticks + 1):
        value = i * step
        x = x0 + value * width
        is_chance = abs(value - chance) < 1e-9
        canvas.line(
            x,
            top,
            x,
            bottom,
            stroke="#9a9a9a" if is_chance else GRID,
            dash="4 3" if is_chance else None,
        )
        anchor = "start" if i == 0 else "end" if i == ticks else "middle"
        canvas.text(x, bottom + 12, f"{round(100 * value)}", size=10, anchor=anchor, fill=MUTED)


def accuracy_figure(content: ReportContent) -> Figure | None:
    rows = content.leaderboard
    if not rows:
        return None
    contexts = list(dict.fromkeys(row.entry.context for row in rows))
    paint = {context: colour(i) for i, context in enumerate(contexts)}
    panels = [ALL_SUBSETS, *content.subsets]
    label_w = label_width([r.entry.label for r in rows])
    gap = 22.0
    panel_w = max((WIDTH - label_w - 16 - gap * (len(panels) - 1)) / len(panels), 120.0)
    width = label_w + len(panels) * panel_w + gap * (len(panels) - 1) + 16
    canvas = Canvas(width, 0, title="Accuracy per judge, context and subset, with 95% CI")
    chance, chance_text = _chance_line(content)
    legend_h = legend(canvas, [(f"context: {c}", paint[c]) for c in contexts], label_w, 14, width - 8)
    heading = 14 + legend_h + 8
    names = [fmt.short_subset(subset) for subset in panels]
    headings = [wrap(name, panel_w, 12) for name in names]
    top = heading + max(len(h) for h in headings) * 15 + 8
    layout = row_layout([r.entry.label for r in rows], label_w, top)
    layout.draw(canvas, width)
    bottom = layout.bottom
    canvas.height = bottom + 30
    for p, subset in enumerate(panels):
        x0 = label_w + p * (panel_w + gap)
        draw_lines(canvas, x0 + panel_w / 2, heading + 7.5 * len(headings[p]), headings[p], anchor="middle",
                   bold=True)  # fmt: skip
        _percent_axis(canvas, x0, panel_w, top, bottom, step=0.25, chance=chance)
        for i, row in enumerate(rows):
            stats = row.overall if subset == ALL_SUBSETS else row.by_subset.get(subset)
            _accuracy_mark(canvas, stats, row.entry.label, x0, panel_w, layout.middle(i), paint)
    return Figure(
        "accuracy",
        "Accuracy per judge × subset × context",
        f"Dot: accuracy; bar: its 95% interval (over users where users repeat); dashed line: {chance_text} "
        "(chance). Ties and failures "
        "never count as correct.",
        canvas,
    )


def _chance_line(content: ReportContent) -> tuple[float, str]:
    """Where the chance line goes: the runs' one chance level when every run holds best-of-k items of one level,
    else 50% (pairs; runs of several levels say theirs under the leaderboard)."""
    levels = {run.chance.level for run in content.runs if run.chance is not None}
    if len(levels) == 1 and all(run.chance is not None for run in content.runs):
        chance = next(run.chance for run in content.runs if run.chance is not None)
        return chance.level, chance.label
    return 0.5, "50%"


def _accuracy_mark(
    canvas: Canvas,
    stats: GroupStats | None,
    label: str,
    x0: float,
    width: float,
    y: float,
    paint: dict[str, str],
) -> None:
    if stats is None or stats.accuracy is None:
        canvas.text(x0 + 4, y, fmt.DASH, size=11, fill=MUTED)
        return
    ink = paint[stats.context]
    tooltip = (
        f"{label} — {fmt.short_subset(stats.subset)}: {fmt.percent(stats.accuracy)}% "
        f"(95% CI {fmt.percent(stats.ci_low)}–{fmt.percent(stats.ci_high)}), n={stats.n_ok}"
    )
    canvas.rect(x0, y - 5, stats.accuracy * width, 10, fill=ink, opacity=0.22, tooltip=tooltip)
    if stats.ci_low is not None and stats.ci_high is not None:
        low, high = x0 + stats.ci_low * width, x0 + stats.ci_high * width
        canvas.line(low, y, high, y, stroke=ink, width=2)
        canvas.line(low, y - 5, low, y + 5, stroke=ink, width=2)
        canvas.line(high, y - 5, high, y + 5, stroke=ink, width=2)
    canvas.circle(x0 + stats.accuracy * width, y, 4.5, fill=ink, stroke="#ffffff", tooltip=tooltip)


def _dumbbell(
    *,
    name: str,
    title: str,
    caption: str,
    labels: Sequence[str],
    series: Sequence[str],
    values: Sequence[Sequence[float | None]],
    tooltips: Sequence[str],
) -> Figure:
    """Rows of two or more markers on a 0–100% scale joined by a line: the gap is what to look at."""
    label_w = label_width(labels)
    plot_w = WIDTH - label_w - 40
    canvas = Canvas(WIDTH, 0, title=title)
    items = [(s, colour(i)) for i, s in enumerate(series)]
    top = 14 + legend(canvas, items, label_w, 14, WIDTH - 8, ring_first=True) + 12
    layout = row_layout(labels, label_w, top)
    layout.draw(canvas, WIDTH)
    bottom = layout.bottom
    canvas.height = bottom + 30
    _percent_axis(canvas, label_w, plot_w, top, bottom, step=0.1)
    for i, (row, tooltip) in enumerate(zip(values, tooltips, strict=True)):
        y = layout.middle(i)
        present = [v for v in row if v is not None]
        if len(present) >= 2:
            canvas.line(
                label_w + min(present) * plot_w, y, label_w + max(present) * plot_w, y, stroke=MUTED, width=2
            )
        for s, value in enumerate(row):
            if value is None:
                continue
            x = label_w + value * plot_w
            if s == 0:
                # The first series is a ring, so that a second marker on the same spot still shows both.
                canvas.circle(x, y, 7, fill="#ffffff", stroke=colour(s), width=2.5, tooltip=tooltip)
            else:
                canvas.circle(x, y, 4, fill=colour(s), tooltip=tooltip)
    return Figure(name, title, caption, canvas)


def position_figure(content: ReportContent) -> Figure | None:
    rows = content.position
    if not rows:
        return None
    return _dumbbell(
        name="position-bias",
        title="Position bias: accuracy with the chosen answer shown as A vs as B",
        caption="A judge without position bias has both dots together; a judge that favours the first "
        "answer has its A dot far to the right of its B dot.",
        labels=[r.entry.label for r in rows],
        series=["chosen shown as A", "chosen shown as B"],
        values=[[r.accuracy_a, r.accuracy_b] for r in rows],
        tooltips=[
            f"{r.entry.label}: A {fmt.percent(r.accuracy_a)}% (n={r.n_a}), "
            f"B {fmt.percent(r.accuracy_b)}% (n={r.n_b}), picked A {fmt.percent(r.picked_a)}%"
            for r in rows
        ],
    )


def length_figure(content: ReportContent) -> Figure | None:
    rows = [r for r in content.leaderboard if r.overall.accuracy is not None]
    if not rows:
        return None
    return _dumbbell(
        name="length-control",
        title="Raw vs length-controlled accuracy",
        caption="Length-controlled accuracy weighs pairs where the chosen answer is longer and pairs where it "
        "is shorter equally; a judge that wins by liking long answers drops towards 50%.",
        labels=[r.entry.label for r in rows],
        series=["raw accuracy", "length-controlled accuracy"],
        values=[[r.overall.accuracy, r.overall.length_controlled_accuracy] for r in rows],
        tooltips=[
            f"{r.entry.label}: raw {fmt.percent(r.overall.accuracy)}%, length-controlled "
            f"{fmt.percent(r.overall.length_controlled_accuracy)}%, picked the longer answer "
            f"{fmt.percent(r.overall.picked_longer)}%"
            for r in rows
        ],
    )


def cost_figure(content: ReportContent) -> Figure | None:
    rows = content.costs
    if not rows:
        return None
    largest = max((r.per_100_usd or 0.0 for r in rows), default=0.0)
    if largest <= 0:
        return None  # no judge cost anything: the section says so in a sentence
    labels = [r.entry.label for r in rows]
    label_w = label_width(labels)
    plot_w = WIDTH - label_w - 120
    canvas = Canvas(WIDTH, 0, title="Cost per 100 judgments (USD)")
    layout = row_layout(labels, label_w, 16.0)
    layout.draw(canvas, WIDTH)
    canvas.height = layout.bottom + 16
    silent = {u.entry for u in content.unanswered}
    for i, row in enumerate(rows):
        y = layout.middle(i)
        value = row.per_100_usd
        if row.entry in silent:
            canvas.text(label_w + 4, y, "no answered judgment", size=11, fill=MUTED, italic=True)
            continue
        if value is None:
            canvas.text(label_w + 4, y, "n/a (no cost recorded)", size=11, fill=MUTED, italic=True)
            continue
        if value == 0:
            canvas.text(
                label_w + 4, y, "free ($0: a local or offline judge)", size=11, fill=MUTED, italic=True
            )
            continue
        length = plot_w * value / largest
        tooltip = f"{row.entry.label}: {fmt.usd(value)} per 100 judgments, {fmt.usd(row.total_usd)} in total"
        canvas.rect(label_w, y - ROW / 2 + 6, length, ROW - 12, fill=colour(0), tooltip=tooltip)
        canvas.text(label_w + length + 6, y, fmt.usd(value), size=11)
    return Figure(
        "cost",
        "Cost per 100 judgments",
        "USD per 100 judgments from the cost recorded with each judgment (cached answers included at the "
        "cost recorded for them); n/a where the run recorded no cost.",
        canvas,
    )


def _nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    span = high - low
    if span <= 0:
        return [low]
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _padded_range(values: Sequence[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    pad = (high - low) * 0.08 if high > low else max(abs(high) * 0.05, 0.05)
    return low - pad, high + pad


def _y_axis(
    canvas: Canvas, x0: float, width: float, top: float, height: float, low: float, high: float
) -> Callable[[float], float]:
    def to_y(value: float) -> float:
        return top + height - (value - low) / (high - low) * height

    for tick in _nice_ticks(low, high):
        y = to_y(tick)
        canvas.line(x0, y, x0 + width, y)
        canvas.text(x0 - 6, y, f"{tick:g}", size=10, anchor="end", fill=MUTED)
    return to_y


def _entry_colours(content: ReportContent) -> dict[str, str]:
    """One colour per leaderboard entry, so that an RM has the same colour in every downstream chart."""
    return {row.entry.label: colour(i) for i, row in enumerate(content.leaderboard)}


def curve_figures(content: ReportContent) -> list[Figure]:
    figures = []
    sources = sorted({c.source for c in content.curves})
    for source in sources:
        curves = [c for c in content.curves if c.source == source]
        figures.append(_curve_figure(source, curves, _entry_colours(content)))
    return figures


def _curve_figure(source: str, curves: Sequence[Curve], paint: dict[str, str]) -> Figure:
    labels = [label for label in paint if any(c.label == label for c in curves)]
    subsets = sorted({c.subset for c in curves}, key=lambda s: (s != ALL_SUBSETS, s))
    columns = min(3, len(subsets))
    panel_w = (WIDTH - 20) / columns
    panel_h = 250.0
    lines = math.ceil(len(subsets) / columns)
    canvas = Canvas(WIDTH, 0, title=f"{source}: downstream score by k")
    legend_h = 14 + legend(canvas, [(label, paint[label]) for label in labels], 60, 14, WIDTH - 8)
    canvas.height = legend_h + lines * (panel_h + 40)
    for index, subset in enumerate(subsets):
        mine = [c for c in curves if c.subset == subset]
        left = (index % columns) * panel_w + 56
        top = legend_h + (index // columns) * (panel_h + 40) + 26
        plot_w, plot_h = panel_w - 80, panel_h - 50
        canvas.text(
            left + plot_w / 2, top - 12, fmt.short_subset(subset), size=12, anchor="middle", bold=True
        )
        ks = sorted({k for c in mine for k, _ in c.points})
        scores = [s for c in mine for _, s in c.points]
        to_y = _y_axis(canvas, left, plot_w, top, plot_h, *_padded_range(scores))
        canvas.text(left - 48, top - 12, "score", size=11, fill=MUTED)
        log_low, log_high = math.log2(ks[0]), math.log2(ks[-1])

        def to_x(
            k: int, left: float = left, plot_w: float = plot_w, lo: float = log_low, hi: float = log_high
        ):
            return left + plot_w / 2 if hi == lo else left + (math.log2(k) - lo) / (hi - lo) * plot_w

        for k in ks:
            canvas.text(to_x(k), top + plot_h + 14, str(k), size=10, anchor="middle", fill=MUTED)
        canvas.text(
            left + plot_w / 2, top + plot_h + 30, "k (log scale)", size=11, anchor="middle", fill=MUTED
        )
        for curve in mine:
            points = [(to_x(k), to_y(s)) for k, s in curve.points]
            if len(points) > 1:
                canvas.polyline(points, stroke=paint[curve.label])
            for (k, score), (x, y) in zip(curve.points, points, strict=True):
                canvas.circle(
                    x, y, 3.5, fill=paint[curve.label], tooltip=f"{curve.label}: k={k}, {score:.4g}"
                )
    return Figure(
        f"best-of-k-{_slug(source)}",
        f"Best-of-k curves ({source})",
        "Downstream score of the answer each reward model picks from the first k samples, by k.",
        canvas,
    )


def scatter_figures(content: ReportContent) -> list[Figure]:
    return [_scatter(c, _entry_colours(content)) for c in content.correlations if c.points]


def _scatter(correlation: Correlation, paint: dict[str, str]) -> Figure:
    points = correlation.points
    left, top, plot_w, plot_h = 70.0, 34.0, 640.0, 340.0
    label_room = max(text_width(p.label, 11) for p in points) + 20
    canvas = Canvas(left + plot_w + label_room, top + plot_h + 50, title="Benchmark accuracy vs downstream")
    x_low, x_high = _padded_range([p.benchmark for p in points])
    to_y = _y_axis(canvas, left, plot_w, top, plot_h, *_padded_range([p.downstream for p in points]))
    canvas.text(left - 60, top - 22, f"downstream score ({correlation.source})", size=11, fill=MUTED)

    def to_x(value: float) -> float:
        return left + (value - x_low) / (x_high - x_low) * plot_w

    for tick in _nice_ticks(x_low, x_high):
        canvas.line(to_x(tick), top, to_x(tick), top + plot_h)
        canvas.text(to_x(tick), top + plot_h + 14, f"{100 * tick:g}", size=10, anchor="middle", fill=MUTED)
    canvas.text(
        left + plot_w / 2, top + plot_h + 34, "benchmark accuracy (%)", size=11, anchor="middle", fill=MUTED
    )
    canvas.line(left, top + plot_h, left + plot_w, top + plot_h, stroke=INK)
    canvas.line(left, top, left, top + plot_h, stroke=INK)
    places = [(to_x(point.benchmark), to_y(point.downstream)) for point in points]
    label_at = dodge(places, [point.label for point in points], low=top + 6, high=top + plot_h - 6)
    for point, (x, y), label_y in zip(points, places, label_at, strict=True):
        tooltip = (
            f"{point.label}: accuracy {fmt.percent(point.benchmark)}%, downstream {point.downstream:.4g}"
        )
        canvas.circle(x, y, 6, fill=paint.get(point.label, INK), stroke="#ffffff", tooltip=tooltip)
        if abs(label_y - y) > 1:  # moved off its point: a thin leader shows whose label it is
            canvas.line(x + 5, y, x + 8, label_y, stroke=MUTED)
        canvas.text(x + 9, label_y, point.label, size=11)
    figures = (
        f"Spearman ρ {fmt.correlation(correlation.spearman)}, Kendall τ {fmt.correlation(correlation.kendall)}, "
        f"Pearson r {fmt.correlation(correlation.pearson)} over {correlation.n} reward models"
    )
    return Figure(
        f"benchmark-vs-{_slug(correlation.source)}",
        f"Benchmark accuracy vs downstream ({correlation.source})",
        f"{figures}. Downstream figure: subset 'all' (else the n-weighted mean over subsets, or the only "
        "subset) at the k most RMs report, as prbj correlate takes it; prbj correlate adds intervals, "
        "weighted τ, NDCG and RBO.",
        canvas,
    )


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-") or "downstream"
