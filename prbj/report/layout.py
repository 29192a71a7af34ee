"""The order and wording of a report's sections, shared by the Markdown and HTML renderers."""

from __future__ import annotations

from dataclasses import dataclass, field

from prbj.analysis.downstream import STORE_FILE as DOWNSTREAM_FILE
from prbj.report import plots, tables
from prbj.report.content import ReportContent
from prbj.report.frontier import cost_accuracy_figure
from prbj.report.plots import Figure
from prbj.report.tables import TextTable

DEMO_WARNING = (
    "This run used the bundled demo sample, not the benchmark: its figures say nothing about a model's real "
    "accuracy. Use --dataset hf:QiyaoMa/Personalized-RewardBench for real figures."
)


def demo_note(content: ReportContent) -> str | None:
    """The demo-sample warning, worded for exactly the runs that used a bundled sample, with where each
    benchmark's full data is; None when none did."""
    demo = [run for run in content.runs if run.is_demo_sample]
    if not demo:
        return None
    ids = [run.run_id for run in demo]
    if len(demo) == len(content.runs) == 1:
        who, whose = "This run", "its"
    elif len(demo) == len(content.runs):
        who, whose = f"These {len(demo)} runs", "their"
    else:
        who, whose = f"{len(demo)} of these {len(content.runs)} runs ({', '.join(ids)})", "their"
    where = list(dict.fromkeys((run.benchmark, run.full_data) for run in demo))
    if all(benchmark == "prb" for benchmark, _ in where):
        return DEMO_WARNING.replace("This run", who, 1).replace("its figures", f"{whose} figures", 1)
    full = "; ".join(
        f"{benchmark}: {source}"
        if source
        else f"{benchmark}: your own data (the sample is the one beside your card)"
        for benchmark, source in where
    )
    return (
        f"{who} used a bundled demo sample, not the benchmark: {whose} figures say nothing about a model's real "
        f"accuracy. For real figures pass the full data with --dataset ({full})."
    )


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    intro: str = ""
    tables: list[TextTable] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)


def report_sections(content: ReportContent, *, terse: bool = False) -> list[Section]:
    """The report's sections in order; `terse` shortens column names for the terminal."""
    sections = [
        Section("runs", "Runs", tables=[tables.runs_table(content)]),
        Section(
            "leaderboard",
            "Leaderboard",
            intro=content.chance_note,
            tables=[tables.leaderboard_table(content, terse=terse)],
            figures=_present(plots.accuracy_figure(content)),
        ),
    ]
    # Pairwise judges whose every judgment failed: named, with why, where their figures would be.
    silent = "; ".join(u.sentence for u in content.unanswered if u.pairwise)
    if content.position:
        sections.append(
            Section(
                "position",
                "Position bias",
                intro=f"{silent}." if silent else "",
                tables=[tables.position_table(content)],
                figures=_present(plots.position_figure(content)),
            )
        )
    else:
        sections.append(
            Section(
                "position",
                "Position bias",
                intro=f"No answered pairwise judgment in these runs: {silent}."
                if silent
                else "No pairwise judgments in these runs: position bias applies to judges that see both "
                "answers at once as A and B.",
            )
        )
    sections.append(
        Section(
            "length",
            "Length control",
            tables=[tables.length_table(content)],
            figures=_present(plots.length_figure(content)),
        )
    )
    if not content.has_cost:
        cost_intro = (
            "No judgment in these runs recorded a cost (column cost_usd): cost per 100 judgments is n/a."
        )
    elif not any((row.per_100_usd or 0.0) > 0 for row in content.costs):
        cost_intro = (
            "Every judge here was free (offline or local judges, $0 per 100 judgments): no cost chart."
        )
    else:
        cost_intro = ""
    sections.append(
        Section(
            "cost",
            "Cost",
            intro=cost_intro,
            tables=[tables.cost_table(content)],
            figures=_present(plots.cost_figure(content)) + _present(cost_accuracy_figure(content)),
        )
    )
    if content.failures:
        sections.append(Section("failures", "Failures", tables=[tables.failures_table(content)]))
    if content.has_downstream:
        sections.append(
            Section(
                "downstream",
                "Downstream",
                tables=[tables.correlation_table(content)] if content.correlations else [],
                figures=plots.curve_figures(content) + plots.scatter_figures(content),
            )
        )
    else:
        sections.append(
            Section(
                "downstream",
                "Downstream",
                intro=f"No downstream outcomes for these runs: a {DOWNSTREAM_FILE} in a run directory (columns "
                "rm, source, subset, k, score; see prbj downstream) or prbj report --downstream STORE draws "
                "best-of-k curves and the benchmark-vs-downstream scatter.",
            )
        )
    return sections


def _present(figure: Figure | None) -> list[Figure]:
    return [] if figure is None else [figure]
