"""Cost against accuracy: one point per judge × context (cascades included, they are judges of their own),
accuracy with its 95% interval against the list-price cost per 100 judgments, the Pareto front marked (no
other entry is both cheaper and at least as accurate, or as cheap and more accurate)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from prbj.report import fmt
from prbj.report.content import CostRow, LeaderRow, ReportContent
from prbj.report.labels import dodge
from prbj.report.plots import Figure, _nice_ticks
from prbj.report.svg import GRID, INK, MUTED, Canvas, colour, text_width


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indexes of the points (cost, accuracy) that no other point dominates: cheaper or as cheap, and at least
    as accurate, better in one of the two."""
    front = []
    for i, (cost, accuracy) in enumerate(points):
        dominated = any(
            (c <= cost and a >= accuracy) and (c < cost or a > accuracy)
            for j, (c, a) in enumerate(points)
            if j != i
        )
        if not dominated:
            front.append(i)
    return front


def cost_accuracy_figure(content: ReportContent) -> Figure | None:
    """None unless some entry has a cost above zero (a chart of free judges says nothing)."""
    costs = {row.entry: row for row in content.costs}
    entries: list[tuple[LeaderRow, CostRow]] = [
        (row, costs[row.entry])
        for row in content.leaderboard
        if row.overall.accuracy is not None
        and row.entry in costs
        and costs[row.entry].per_100_usd is not None
    ]
    if not any((cost.per_100_usd or 0.0) > 0 for _, cost in entries):
        return None
    points = [(float(cost.per_100_usd or 0.0), float(row.overall.accuracy or 0.0)) for row, cost in entries]
    front = set(pareto_front(points))
    left, top, width, height = 70.0, 34.0, 620.0, 340.0
    label_room = max(text_width(row.entry.label, 11) for row, _ in entries) + 24
    canvas = Canvas(
        left + width + label_room, top + height + 56, title="Accuracy against cost per 100 judgments"
    )
    largest = max(cost for cost, _ in points)
    x_high = largest * 1.08 if largest > 0 else 1.0
    lows = [row.overall.ci_low for row, _ in entries if row.overall.ci_low is not None]
    highs = [row.overall.ci_high for row, _ in entries if row.overall.ci_high is not None]
    y_low = max(0.0, math.floor(10 * min([*lows, *(a for _, a in points)])) / 10 - 0.05)
    y_high = min(1.0, math.ceil(10 * max([*highs, *(a for _, a in points)])) / 10 + 0.05)

    def to_x(value: float) -> float:
        return left + value / x_high * width

    def to_y(value: float) -> float:
        return top + height - (value - y_low) / (y_high - y_low) * height

    for tick in _nice_ticks(0.0, x_high):
        canvas.line(to_x(tick), top, to_x(tick), top + height, stroke=GRID)
        canvas.text(to_x(tick), top + height + 14, fmt.usd(tick), size=10, anchor="middle", fill=MUTED)
    for tick in _nice_ticks(y_low, y_high):
        canvas.line(left, to_y(tick), left + width, to_y(tick), stroke=GRID)
        canvas.text(left - 6, to_y(tick), f"{100 * tick:g}", size=10, anchor="end", fill=MUTED)
    canvas.text(
        left + width / 2,
        top + height + 34,
        "USD per 100 judgments (list price)",
        size=11,
        anchor="middle",
        fill=MUTED,
    )
    canvas.text(left - 60, top - 20, "accuracy % (95% CI)", size=11, fill=MUTED)
    ordered = sorted(front, key=lambda i: points[i][0])
    if len(ordered) > 1:
        canvas.polyline(
            [(to_x(points[i][0]), to_y(points[i][1])) for i in ordered], stroke="#9a9a9a", width=1.5
        )
    texts = [row.entry.label + (" ★" if i in front else "") for i, (row, _) in enumerate(entries)]
    label_at = dodge([(to_x(c), to_y(a)) for c, a in points], texts, low=top + 6, high=top + height - 6)
    for i, ((row, cost), (x_value, y_value)) in enumerate(zip(entries, points, strict=True)):
        x, y = to_x(x_value), to_y(y_value)
        stats = row.overall
        if stats.ci_low is not None and stats.ci_high is not None:
            canvas.line(x, to_y(stats.ci_low), x, to_y(stats.ci_high), stroke=colour(i), width=2)
        on_front = i in front
        tip = (
            f"{row.entry.label}: accuracy {fmt.percent(stats.accuracy)}% ({fmt.interval(stats)}), "
            f"{fmt.usd(cost.per_100_usd)} per 100 judgments" + (", on the Pareto front" if on_front else "")
        )
        canvas.circle(
            x,
            y,
            6 if on_front else 4.5,
            fill=colour(i),
            stroke=INK if on_front else "#ffffff",
            width=2.0,
            tooltip=tip,
        )
        if abs(label_at[i] - y) > 1:  # moved off its point: a thin leader shows whose label it is
            canvas.line(x + 5, y, x + 8, label_at[i], stroke=MUTED)
        canvas.text(x + 9, label_at[i], texts[i], size=11)
    return Figure(
        "cost-accuracy",
        "Accuracy against cost",
        "One point per judge × context (cascades included), accuracy with its 95% interval against USD per 100 "
        "judgments at the price each answer was first bought for; ★ and the grey line: the Pareto front (no "
        "other judge is cheaper and at least as accurate).",
        canvas,
    )
