"""The report's sections on how sure the judges are: calibration (with a reliability diagram per judge and the
accuracy–coverage curves), selective judging, cascades, and position fairness with both orders. Figures come
from summary.json when the run holds them (the same numbers), else from its judgments with prbj.analysis; a
section appears only when its run has its figures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prbj.analysis.compare import entry_label
from prbj.analysis.confidence import CONFIDENCE
from prbj.analysis.position import position_fairness
from prbj.analysis.run_data import RunData
from prbj.report import fmt
from prbj.report.labels import LINE_HEIGHT, draw_lines, label_width, row_layout, wrap
from prbj.report.layout import Section
from prbj.report.plots import Figure
from prbj.report.svg import GRID, INK, MUTED, Canvas, colour
from prbj.report.tables import TextTable

CALIBRATION_INTRO = (
    "p_chosen is the judge's probability that the chosen answer is the better one; confidence its probability "
    "for the verdict it gave. ECE: 10 equal-width bins of confidence, edges 0, 0.1, …, 1 (each bin (low, "
    "high]), Σ |bin|/n · |accuracy − mean confidence|; Brier: mean (p_chosen − 1)²; AUROC: how well confidence "
    "separates right verdicts from wrong ones (0.5: not at all); AURC: mean error among the surest verdicts "
    "kept, over all coverages. A tie or an inconsistent pair (no side taken, confidence 0.5) counts as half "
    "right. The plug-in ECE overstates a small true ECE by the noise in each bin; the debiased ECE corrects it, "
    "and its interval holds the true ECE in 95% of runs. Brier and AUROC intervals: 95% bootstrap over "
    "judgments."
)


def _calibration_rows(run: RunData) -> list[dict[str, Any]]:
    stored = run.summary.get("calibration")
    if isinstance(stored, list):
        return [row for row in stored if isinstance(row, dict)]
    if CONFIDENCE not in run.judgments.columns:
        return []
    # Imported only for a run that holds probabilities: most do not, and every report would build its classes.
    from prbj.analysis.calibration import calibration

    seed = int(run.summary.get("seed", 42) or 42)
    return [row.as_dict() for row in calibration(run.judgments, seed=seed)]


def _fairness_rows(run: RunData) -> list[dict[str, Any]]:
    stored = run.summary.get("position_fairness")
    if isinstance(stored, list):
        return [row for row in stored if isinstance(row, dict)]
    return [row.as_dict() for row in position_fairness(run.judgments)]


def _listed(run: RunData, key: str) -> list[dict[str, Any]]:
    stored = run.summary.get(key)
    return [row for row in stored if isinstance(row, dict)] if isinstance(stored, list) else []


def confidence_sections(runs: Sequence[RunData], labels: Sequence[str]) -> list[Section]:
    sections: list[Section] = []
    several = len(runs) > 1
    for run, label in zip(runs, labels, strict=True):
        suffix = f" · {label}" if several else ""
        key = f"-{len(sections)}" if several else ""
        rows = _calibration_rows(run)
        if rows:
            sections.append(
                Section(
                    f"calibration{key}",
                    f"How sure is the judge?{suffix}",
                    intro=CALIBRATION_INTRO,
                    tables=[calibration_table(rows)],
                    figures=[coverage_figure(rows, key), reliability_figure(rows, key)],
                )
            )
        if selective := _listed(run, "selective"):
            sections.append(
                Section(f"selective{key}", f"Selective judging{suffix}", tables=[selective_table(selective)])
            )
        if cascades := _listed(run, "cascades"):
            sections.append(Section(f"cascades{key}", f"Cascades{suffix}", tables=[cascade_table(cascades)]))
        if fairness := _fairness_rows(run):
            sections.append(
                Section(
                    f"position-fairness{key}",
                    f"Position consistency and preference fairness{suffix}",
                    intro="Judged in both orders (Shi et al., arXiv 2406.07791). Consistent: the same answer "
                    "picked in both orders. Primacy: said A in both orders; recency: said B in both. Preference "
                    "fairness = (recency − primacy) / pairs: 0 fair, −1 always the first answer, +1 always the "
                    "second.",
                    tables=[fairness_table(fairness)],
                )
            )
    return sections


def _interval(row: dict[str, Any], name: str, *, percent: bool = False, shown: str | None = None) -> str:
    """`shown` (the figure itself by default) with the interval of `name`."""
    value = row.get(shown or name)
    low, high = row.get(f"{name}_ci_low"), row.get(f"{name}_ci_high")
    show = fmt.percent if percent else _decimal
    if value is None:
        # No figure (AUROC with one kind of verdict; a run written before the debiased ECE, whose interval was
        # of another figure).
        return fmt.DASH
    if low is None or high is None:
        return show(value)
    return f"{show(value)} ({show(low)}–{show(high)})"


def _decimal(value: Any) -> str:
    return fmt.DASH if value is None else f"{float(value):.3f}"


def calibration_table(rows: Sequence[dict[str, Any]]) -> TextTable:
    return TextTable(
        "calibration",
        "Calibration",
        [
            "judge",
            "context",
            "judgments",
            "source",
            "accuracy %",
            "mean confidence %",
            "ECE",
            "ECE debiased (95% CI)",
            "Brier (95% CI)",
            "AUROC (95% CI)",
            "AURC",
        ],
        [
            [
                str(r.get("judge")),
                str(r.get("context")),
                f"{r.get('n')}/{r.get('answered')}",
                ", ".join(f"{k} {v}" for k, v in (r.get("sources") or {}).items()),
                fmt.percent(r.get("accuracy")),
                fmt.percent(r.get("mean_confidence")),
                _decimal(r.get("ece")),
                _interval(r, "ece", shown="ece_debiased"),
                _interval(r, "brier"),
                _interval(r, "auroc"),
                _decimal(r.get("aurc")),
            ]
            for r in rows
        ],
        [False, False, True, False, True, True, True, True, True, True, True],
        "judgments: answered judgments with a probability / answered judgments. source: where p_chosen came "
        "from (logprobs, orders, samples, scores), with counts.",
    )


def held_out_error(check: dict[str, Any]) -> str:
    """A held-out check's error with its Clopper–Pearson interval (analysis.selective.Applied)."""
    return _interval(check, "error", percent=True)


def consistent_cell(check: dict[str, Any]) -> str:
    """Whether a held-out check's errors are within what chance allows a true error at the target: "yes"
    (within the target), "yes (p = …)" (above it, by no more than chance), "NO (p = …)" (beyond chance)."""
    if check.get("held") is None:
        return fmt.DASH
    if "consistent" not in check:  # written before the test: only the observed error against the target
        return "yes" if check["held"] else "above target"
    if check["held"]:
        return "yes"
    p_value = float(check.get("p_value") or 0.0)
    return f"yes (p = {p_value:.2f})" if check["consistent"] else f"NO (p = {p_value:.3g})"


def selective_table(rows: Sequence[dict[str, Any]]) -> TextTable:
    def held(row: dict[str, Any]) -> list[str]:
        check = row.get("held_out")
        if not isinstance(check, dict):
            return ["0", fmt.DASH, "unchecked (no held-out pairs)"]
        return [str(check.get("n")), held_out_error(check), consistent_cell(check)]

    return TextTable(
        "selective",
        "Selective judging",
        [
            "judge",
            "context",
            "threshold",
            "target error %",
            "coverage %",
            "kept accuracy %",
            "held-out pairs",
            "held-out error % (95% CI)",
            "consistent with target",
        ],
        [
            [
                str(r.get("judge")),
                str(r.get("context")),
                _decimal(r.get("threshold")),
                fmt.percent(r.get("target_error")),
                fmt.percent(r.get("coverage")),
                fmt.percent(r.get("accuracy")),
                *held(r),
            ]
            for r in rows
        ],
        [False, False, True, True, True, True, True, True, False],
        "Verdicts below the threshold are 'abstained': counted apart, never a verdict. Held-out pairs: those "
        "judged here that did not calibrate the threshold; the target is checked on them only: their error with "
        "its Clopper–Pearson interval, and NO only when a true error at the target would show so many errors "
        "with probability p ≤ 5% (a finite sample exceeds the target by chance even when the guarantee holds).",
    )


def cascade_table(rows: Sequence[dict[str, Any]]) -> TextTable:
    return TextTable(
        "cascades",
        "Cascades beside the strong judge alone",
        [
            "cascade",
            "context",
            "escalate below",
            "pairs",
            "escalated %",
            "decided by first %",
            "decided by second %",
            "accuracy %",
            "USD / 100",
            "second alone USD / 100",
            "second alone accuracy %",
        ],
        [
            [
                str(r.get("name")),
                str(r.get("context")),
                _decimal(r.get("escalate_below")) if r.get("escalate_below") is not None else "selective",
                str(r.get("n")),
                fmt.percent(r.get("share_escalated")),
                fmt.percent(r.get("coverage_first")),
                fmt.percent(r.get("coverage_second")),
                fmt.percent(r.get("accuracy")),
                fmt.usd(r.get("cost_per_100")),
                fmt.usd(r.get("second_alone_cost_per_100"))
                + (" (est.)" if r.get("second_alone_cost_estimated") else ""),
                fmt.percent(r.get("second_alone_accuracy")),
            ]
            for r in rows
        ],
        [False, False, True, True, True, True, True, True, True, True, True],
        "USD / 100: list price per 100 judgments (answers at the price first paid). The second judge alone: "
        "measured when it also judged every pair, else estimated from its mean cost on the escalated pairs "
        "(est.; its accuracy then unknown).",
    )


def fairness_table(rows: Sequence[dict[str, Any]]) -> TextTable:
    return TextTable(
        "position-fairness",
        "Position consistency and preference fairness",
        ["judge", "context", "pairs", "consistent", "primacy", "recency", "consistency %", "fairness"],
        [
            [
                str(r.get("judge")),
                str(r.get("context")),
                str(r.get("pairs")),
                str(r.get("consistent")),
                str(r.get("primacy")),
                str(r.get("recency")),
                fmt.percent(r.get("position_consistency")),
                fmt.DASH if r.get("preference_fairness") is None else f"{r['preference_fairness']:+.3f}",
            ]
            for r in rows
        ],
        [False, False, True, True, True, True, True, True],
    )


def _percent_grid(canvas: Canvas, left: float, top: float, width: float, height: float) -> None:
    """Both axes 0–100% in quarters, with tick labels below and to the left."""
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x, y = left + tick * width, top + height - tick * height
        canvas.line(x, top, x, top + height)
        canvas.line(left, y, left + width, y)
        canvas.text(x, top + height + 12, f"{round(100 * tick)}", size=10, anchor="middle", fill=MUTED)
        canvas.text(left - 6, y, f"{round(100 * tick)}", size=10, anchor="end", fill=MUTED)


# Reliability diagrams: one square panel per judge, this many to a row.
PANELS_PER_ROW = 3
PANEL = 240.0


def reliability_figure(rows: Sequence[dict[str, Any]], key: str = "") -> Figure:
    """One panel per judge: accuracy per confidence bin against the bin's mean confidence (a calibrated judge
    sits on the diagonal), grey bars for how many judgments each bin holds."""
    columns = min(PANELS_PER_ROW, len(rows))
    titles = [wrap(entry_label(str(r.get("judge")), str(r.get("context"))), PANEL + 40, 12.0) for r in rows]
    # Room above each panel for its title's lines (a long judge name wraps, never cut).
    head = max(len(title) for title in titles) * 12.0 * LINE_HEIGHT
    cell_w, cell_h = PANEL + 90.0, PANEL + 86.0 + head
    lines = (len(rows) + columns - 1) // columns
    canvas = Canvas(columns * cell_w + 10, lines * cell_h, title="Reliability diagrams")
    for index, (row, title) in enumerate(zip(rows, titles, strict=True)):
        left = (index % columns) * cell_w + 56.0
        top = (index // columns) * cell_h + 30.0 + head
        _reliability_panel(canvas, row, title, left, top)
    return Figure(
        f"reliability{key}",
        "Reliability diagrams",
        "Per judge: dot, accuracy of the judgments in a confidence bin against their mean confidence; dashed, "
        "perfect calibration; grey bars, how many judgments each bin holds.",
        canvas,
    )


def _reliability_panel(
    canvas: Canvas, row: dict[str, Any], title: list[str], left: float, top: float
) -> None:
    size = PANEL
    label = entry_label(str(row.get("judge")), str(row.get("context")))
    step = 12.0 * LINE_HEIGHT
    draw_lines(canvas, left - 48, top - 30 - step * (len(title) - 1) / 2, title, size=12.0, bold=True)
    canvas.text(left - 48, top - 12, "accuracy %", size=10, fill=MUTED)
    _percent_grid(canvas, left, top, size, size)
    canvas.line(left, top + size, left + size, top, stroke="#9a9a9a", dash="4 3")
    bins = [b for b in row.get("bins") or [] if isinstance(b, dict)]
    most = max((int(b.get("n") or 0) for b in bins), default=0)
    for b in bins:
        count = int(b.get("n") or 0)
        if not count:
            continue
        low, high = float(b["low"]), float(b["high"])
        height = 0.25 * size * count / most
        canvas.rect(left + low * size + 1, top + size - height, (high - low) * size - 2, height, fill=GRID)
        accuracy, confidence = b.get("accuracy"), b.get("confidence")
        if accuracy is None or confidence is None:
            continue
        tip = (
            f"{label}, confidence {fmt.percent(low, 0)}–{fmt.percent(high, 0)}%: {count} judgments, accuracy "
            f"{fmt.percent(accuracy)}%, mean confidence {fmt.percent(confidence)}%"
        )
        x, y = left + confidence * size, top + size - accuracy * size
        canvas.circle(x, y, 4.5, fill=colour(0), stroke="#ffffff", tooltip=tip)
    canvas.text(
        left + size / 2, top + size + 28, "confidence % (bin mean)", size=10, anchor="middle", fill=MUTED
    )
    summary = f"ECE {_decimal(row.get('ece'))} · {row.get('n')} judgments"
    canvas.text(left + size / 2, top + size + 46, summary, size=11, anchor="middle", fill=INK)


def coverage_figure(rows: Sequence[dict[str, Any]], key: str = "") -> Figure:
    """Accuracy of the surest verdicts kept, against the share kept, one line per judge."""
    labels = [entry_label(str(r.get("judge")), str(r.get("context"))) for r in rows]
    left, top, width, height = 60.0, 30.0, 560.0, 300.0
    names = [f"{label} (AURC {_decimal(row.get('aurc'))})" for row, label in zip(rows, labels, strict=True)]
    legend_w = label_width(names)
    keys = row_layout(names, legend_w, top)
    canvas = Canvas(
        left + width + legend_w + 40,
        max(top + height + 50, keys.bottom + 10),
        title="Accuracy against coverage",
    )
    _percent_grid(canvas, left, top, width, height)
    canvas.text(
        left + width / 2,
        top + height + 32,
        "coverage % (surest verdicts kept)",
        size=11,
        anchor="middle",
        fill=MUTED,
    )
    canvas.text(left - 52, top - 14, "accuracy % of those kept", size=11, fill=MUTED)
    for i, row in enumerate(rows):
        points = [
            (left + float(p["coverage"]) * width, top + height - float(p["accuracy"]) * height)
            for p in row.get("curve") or []
            if isinstance(p, dict)
        ]
        if len(points) > 1:
            canvas.polyline(points, stroke=colour(i))
        for x, y in points:
            canvas.circle(x, y, 2.5, fill=colour(i))
        y = keys.middle(i)
        canvas.rect(left + width + 20, y - 6, 12, 12, fill=colour(i))
        draw_lines(canvas, left + width + 37, y, keys.lines[i], size=12.0)
    return Figure(
        f"coverage{key}",
        "Accuracy against coverage",
        "Each line keeps the judge's surest verdicts first: its right end is the judge's accuracy on all its "
        "judgments with a probability; a judge whose confidence means something rises to the left.",
        canvas,
    )
