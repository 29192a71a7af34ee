"""The report stage: the experiment's figures and claims, as summary.json and as the first sections of its
report.md / report.html (the leaderboard, best-of-k curves and downstream scatter follow, as `prbj report`
draws them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from prbj import __version__
from prbj.analysis.correlate_run import finite_json
from prbj.analysis.run_data import RunData
from prbj.analysis.stats import ALL_SUBSETS
from prbj.data.files import read_json, write_json
from prbj.experiments.claims import Claim, check_claims
from prbj.experiments.figures import (
    ContextEffect,
    Outcomes,
    SizeFigure,
    SizePoint,
    context_effects,
    entry_outcomes,
    size_figure,
)
from prbj.experiments.manifest import Manifest
from prbj.experiments.params import params_billions
from prbj.experiments.schema import Experiment
from prbj.experiments.stages import (
    BON_SAMPLE_STAGE,
    CORRELATE_STAGE,
    DOWNSTREAM,
    judge_stage_name,
    stage_suffix,
)
from prbj.report import fmt
from prbj.report.layout import Section
from prbj.report.plots import Figure
from prbj.report.svg import INK, MUTED, Canvas, colour
from prbj.report.tables import TextTable
from prbj.runs import rundir
from prbj.runs.report_command import write_loaded_reports

SUMMARY_FILE = "summary.json"


def _first_context(run: RunData) -> str | None:
    for row in run.results:
        if row.subset == ALL_SUBSETS:
            return row.context
    return None


def size_points(experiment: Experiment, runs: dict[str, RunData]) -> list[SizePoint]:
    """One point per judge entry with a known size (params_b, or counted from an hf: checkpoint)."""
    points = []
    for judge in experiment.judges:
        run = runs.get(judge.name)
        if run is None:
            continue
        size = judge.params_b
        if size is None and judge.provider.startswith("hf:"):
            size = params_billions(judge.provider.removeprefix("hf:"))
        context = _first_context(run)
        accuracy = next(
            (r.accuracy for r in run.results if r.subset == ALL_SUBSETS and r.context == context), None
        )
        if size is not None and accuracy is not None and context is not None:
            points.append(SizePoint(judge.name, context, size, float(accuracy)))
    return points


def _comparisons(manifest: Manifest) -> list[dict[str, Any]]:
    record = manifest.stages.get(CORRELATE_STAGE)
    if record is None or record.state != "done":
        return []
    path = manifest.folders(CORRELATE_STAGE)[0] / "correlation.json"
    return list(read_json(path).get("comparisons", [])) if path.exists() else []


def _bon_results(manifest: Manifest) -> list[dict[str, Any]]:
    record = manifest.stages.get(BON_SAMPLE_STAGE)
    if record is None or not record.run_dirs:
        return []
    path = manifest.folders(BON_SAMPLE_STAGE)[0] / "summary.json"
    return list(read_json(path).get("results", [])) if path.exists() else []


def write_experiment_report(
    experiment: Experiment, manifest: Manifest, target: Path, console: Console
) -> Path:
    # The paper's figures and claims are about the main benchmark; the report ranks the judges on every one.
    runs: dict[str, RunData] = {}
    others: list[RunData] = []
    for entry in experiment.studied:
        for judge in experiment.judges:
            name = judge_stage_name(judge, stage_suffix(experiment, entry))
            record = manifest.stages.get(name)
            if record is None or not record.run_dirs:
                continue
            run = rundir.load_run(manifest.folders(name)[0])
            if entry == experiment.main:
                runs[judge.name] = run
            else:
                others.append(run)
    outcomes: list[Outcomes] = [o for name, run in runs.items() for o in entry_outcomes(name, run.judgments)]
    size = size_figure(size_points(experiment, runs), seed=experiment.seed)
    effects = context_effects(outcomes, seed=experiment.seed)
    comparisons = _comparisons(manifest)
    claims = check_claims(outcomes, size, comparisons, experiment.claims, seed=experiment.seed)
    document = {
        "prbj_version": __version__,
        "experiment": {
            "name": experiment.name,
            "digest": experiment.digest,
            "dataset": experiment.dataset,
            **(
                {"benchmarks": [{"name": b.label, "dataset": b.dataset} for b in experiment.studied]}
                if experiment.benchmarks
                else {}
            ),
            "seed": experiment.seed,
        },
        "accuracy": [{"entry": name, **row.as_dict()} for name, run in runs.items() for row in run.results],
        "parameters": size.as_dict(),
        "context_effects": [e.as_dict() for e in effects],
        "bon": _bon_results(manifest),
        "correlation": comparisons,
        "claims": [c.as_dict() for c in claims],
    }
    target.mkdir(parents=True, exist_ok=True)
    write_json(target / SUMMARY_FILE, finite_json(document))
    store = manifest.stages.get(DOWNSTREAM)
    write_loaded_reports(
        [*runs.values(), *others],
        target,
        title=experiment.report_title or f"Experiment {experiment.name}",
        downstream=manifest.folders(DOWNSTREAM)[:1] if store is not None else [],
        slices=experiment.report_slices,
        leading=experiment_sections(claims, size, effects, comparisons),
    )
    console.print(claims_text(claims))
    console.print(
        f"report: {target / rundir.MARKDOWN_FILE} and {target / rundir.HTML_FILE}; {target / SUMMARY_FILE}"
    )
    return target / SUMMARY_FILE


def _interval(low: float | None, high: float | None, *, points: bool = True) -> str:
    if low is None or high is None:
        return fmt.DASH
    if points:
        return f"{100 * low:+.1f} to {100 * high:+.1f}"
    return f"{low:+.2f} to {high:+.2f}"


def _value(value: float | None, *, points: bool) -> str:
    if value is None:
        return fmt.DASH
    return f"{100 * value:+.1f}" if points else f"{value:+.2f}"


# The claims by a few words, for table rows; their full statements are in the note under the table.
SHORT_CLAIMS = {
    "a": "best judge far below the oracle",
    "b": "no growth with parameter count",
    "c": "raw profile does not help",
    "d": "planner aspects help",
    "e": "closer to downstream than others",
}


def claims_table(claims: Sequence[Claim]) -> TextTable:
    rows = []
    for claim in claims:
        points = claim.key not in ("b", "e")
        tested = claim.verdict != "not tested"
        why = f"{claim.figure}: {claim.detail}" if tested else f"missing: {claim.missing}"
        if claim.pairs_needed is not None:
            why += f"; ~{claim.pairs_needed:,} pairs would settle it (prbj power)"
        rows.append(
            [
                f"({claim.key}) {SHORT_CLAIMS.get(claim.key, claim.statement)}",
                claim.verdict,
                _value(claim.value, points=points),
                _interval(claim.ci_low, claim.ci_high, points=points),
                why,
            ]
        )
    statements = " ".join(f"({c.key}) {c.statement}" for c in claims)
    return TextTable(
        "claims",
        "The paper's claims on this experiment",
        ["claim", "verdict", "value", "95% CI", "figure and why"],
        rows,
        [False, False, True, True, False],
        note=f"{statements} Values in accuracy points, except (b) and (e): rank correlations.",
    )


def claims_text(claims: Sequence[Claim]) -> str:
    return "\n".join(f"claim ({c.key}) {c.verdict}: {c.statement}" for c in claims)


def effects_table(effects: Sequence[ContextEffect]) -> TextTable:
    rows = [
        [
            e.entry,
            e.context,
            str(e.effect.n),
            _value(e.effect.difference, points=True),
            _interval(e.effect.ci_low, e.effect.ci_high),
        ]
        for e in effects
    ]
    return TextTable(
        "context-effects",
        "Effect of each context against none",
        ["judge", "context", "pairs", "difference (pp)", "95% CI"],
        rows,
        [False, False, True, True, True],
        note="accuracy(context) − accuracy(none) on the pairs both answered; paired bootstrap over pairs.",
    )


def correlation_table(comparisons: Sequence[dict[str, Any]]) -> TextTable:
    """This benchmark and each other benchmark side by side: one row per downstream table and metric."""
    benchmarks = sorted(
        {str(c["benchmark"]) for c in comparisons}, key=lambda b: (b != "Personalized-RewardBench", b)
    )
    tables: dict[tuple[str, str, Any], dict[str, dict[str, Any]]] = {}
    for c in comparisons:
        tables.setdefault((str(c["source"]), str(c["subset"]), c["k"]), {})[str(c["benchmark"])] = c
    rows = []
    for (source, subset, k), columns in sorted(tables.items(), key=lambda kv: str(kv[0])):
        metrics = next(iter(columns.values()))["metrics"]
        for metric in metrics:
            cells = []
            for name in benchmarks:
                result = columns.get(name, {}).get("metrics", {}).get(metric)
                if result is None:
                    cells.append(fmt.DASH)
                    continue
                ci = result.get("ci_over_rms") or {}
                low, high = fmt.correlation(ci.get("low")), fmt.correlation(ci.get("high"))
                cells.append(f"{fmt.correlation(result.get('value'))} [{low}, {high}]")
            rows.append([f"{source} {subset} k={k}", metric, *cells])
    return TextTable(
        "correlation-side-by-side",
        "Downstream correlation, benchmark by benchmark",
        ["downstream", "metric", *benchmarks],
        rows,
        [False, False, *[True] * len(benchmarks)],
        note="Value [95% bootstrap interval over RMs]; prbj correlate's correlation.json has the item intervals.",
    )


def size_chart(size: SizeFigure) -> Figure | None:
    points = size.points
    if not points:
        return None
    left, top, width, height = 70.0, 30.0, 560.0, 300.0
    canvas = Canvas(left + width + 220, top + height + 50, title="Accuracy against parameter count")
    logs = [math.log10(p.params_b) for p in points]
    low, high = math.floor(min(logs)), math.ceil(max(logs))
    high = high if high > low else low + 1
    acc_low = min(0.4, min(p.accuracy for p in points) - 0.05)
    acc_high = max(0.8, max(p.accuracy for p in points) + 0.05)

    def to_x(value: float) -> float:
        return left + (value - low) / (high - low) * width

    def to_y(value: float) -> float:
        return top + height - (value - acc_low) / (acc_high - acc_low) * height

    for decade in range(low, high + 1):
        canvas.line(to_x(decade), top, to_x(decade), top + height)
        canvas.text(
            to_x(decade), top + height + 14, f"{10.0**decade:g}B", size=10, anchor="middle", fill=MUTED
        )
    for tick in (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0):
        if acc_low <= tick <= acc_high:
            canvas.line(left, to_y(tick), left + width, to_y(tick))
            canvas.text(left - 6, to_y(tick), f"{100 * tick:g}", size=10, anchor="end", fill=MUTED)
    canvas.line(left, top + height, left + width, top + height, stroke=INK)
    canvas.line(left, top, left, top + height, stroke=INK)
    canvas.text(
        left + width / 2,
        top + height + 34,
        "parameters (billions, log scale)",
        size=11,
        anchor="middle",
        fill=MUTED,
    )
    for index, point in enumerate(points):
        x, y = to_x(math.log10(point.params_b)), to_y(point.accuracy)
        tip = (
            f"{point.entry} ({point.context}): {point.params_b:g}B parameters, "
            f"accuracy {fmt.percent(point.accuracy)}%"
        )
        canvas.circle(x, y, 6, fill=colour(index), stroke="#ffffff", tooltip=tip)
        canvas.text(x + 9, y, point.entry, size=11)
    rho = (
        f"Spearman ρ {fmt.correlation(size.spearman)} (95% CI {fmt.correlation(size.ci_low)} to "
        f"{fmt.correlation(size.ci_high)}) over {len(points)} reward models"
        if size.spearman is not None
        else f"{len(points)} reward model(s): ρ needs at least 3"
    )
    return Figure("accuracy-vs-parameters", "Accuracy against parameter count", rho + ".", canvas)


def experiment_sections(
    claims: Sequence[Claim],
    size: SizeFigure,
    effects: Sequence[ContextEffect],
    comparisons: Sequence[dict[str, Any]],
) -> list[Section]:
    sections = [Section("claims", "Claims", tables=[claims_table(claims)])]
    chart = size_chart(size)
    if chart is not None:
        sections.append(Section("parameters", "Accuracy against parameter count", figures=[chart]))
    if effects:
        sections.append(Section("context-effects", "Context effects", tables=[effects_table(effects)]))
    if comparisons:
        sections.append(
            Section("correlation", "Downstream correlation", tables=[correlation_table(comparisons)])
        )
    return sections
