"""What a report says, as plain data: the terminal, Markdown and HTML renderers all draw from one
`ReportContent`, so the three can never disagree about a figure."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from prbj.analysis.across import benchmark_name
from prbj.analysis.chance import Chance, chance_of
from prbj.analysis.headline import DEFAULT_HEADLINE, Headline, headline_of
from prbj.analysis.run_data import RunData
from prbj.analysis.small_samples import SMALL_SAMPLE
from prbj.analysis.stats import ALL_SUBSETS, GroupStats
from prbj.data.cards import recorded_own_card, recorded_shipped_card
from prbj.data.loaders import OFFICIAL_HF_DATASET
from prbj.report import fmt

# Optional judgment columns other parts of prbj add; read when present, never required.
COST_COLUMN = "cost_usd"
# What each answer cost when first bought: a cached replay costs 0 now, but its honest price is this.
ORIGINAL_COST_COLUMN = "original_cost_usd"
# The context that shows the judge the scoring rubric: an upper bound, never ranked with the fair settings.
ORACLE_CONTEXT = "oracle"
CACHED_COLUMN = "cached"
LATENCY_COLUMNS = ("latency_s", "latency")


@dataclass(frozen=True)
class Entry:
    """One judge in one context setting in one run: a row of the leaderboard."""

    run: str
    judge: str
    context: str
    label: str

    @property
    def is_upper_bound(self) -> bool:
        return self.context == ORACLE_CONTEXT


@dataclass(frozen=True)
class LeaderRow:
    entry: Entry
    overall: GroupStats
    by_subset: dict[str, GroupStats]
    # What its run ranks by (summary.json's headline; prbj's default for runs that record none).
    headline: Headline = DEFAULT_HEADLINE

    @property
    def rank_value(self) -> float | None:
        return self.headline.value(self.overall)

    @property
    def failed(self) -> int:
        return self.overall.failed


@dataclass(frozen=True)
class PositionRow:
    """Accuracy with the chosen answer shown first (A) and second (B); only for pairwise judges."""

    entry: Entry
    n_a: int
    accuracy_a: float | None
    n_b: int
    accuracy_b: float | None
    picked_a: float | None
    order_consistency: float | None = None

    @property
    def gap(self) -> float | None:
        if self.accuracy_a is None or self.accuracy_b is None:
            return None
        return self.accuracy_a - self.accuracy_b


@dataclass(frozen=True)
class CostRow:
    entry: Entry
    judgments: int
    total_usd: float | None
    per_100_usd: float | None
    cached_share: float | None
    median_latency_s: float | None


@dataclass(frozen=True)
class Unanswered:
    """An entry with no answered judgment: the report says so (and why) where its figures would be."""

    entry: Entry
    failed: int
    total: int
    # Whether it is a pairwise judge (its judgments carry the position the chosen answer was shown in).
    pairwise: bool

    @property
    def sentence(self) -> str:
        return f"{self.entry.label}: no answered judgment ({self.failed}/{self.total} failed; causes under Failures)"


@dataclass(frozen=True)
class FailureRow:
    entry: Entry
    total: int
    parse_errors: int
    api_errors: int
    # Budget and cache skips, and any status a later version adds.
    skipped: int
    examples: list[str]
    # Paid replies cut at their output cap before an answer, and replies the provider refused.
    truncated: int = 0
    refused: int = 0


@dataclass(frozen=True)
class Curve:
    """Best-of-k downstream score of one RM on one subset, by k."""

    label: str
    subset: str
    source: str
    points: list[tuple[int, float]]


@dataclass(frozen=True)
class ScatterPoint:
    label: str
    benchmark: float
    downstream: float


@dataclass(frozen=True)
class Correlation:
    source: str
    n: int
    spearman: float | None
    kendall: float | None
    pearson: float | None
    points: list[ScatterPoint]


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    path: str
    dataset_source: str
    fingerprint: str
    n_pairs: int | None
    seed: Any
    started: str | None
    finished: str | None
    version: str | None
    # The benchmark the data was read as (run.json's config.benchmark); prb for runs that do not say.
    benchmark: str = "prb"
    # What a judge picking at random reaches, where some item holds more than two answers (prbj.analysis.chance).
    chance: Chance | None = None
    # Where the benchmark's full data is, for a run on its bundled sample ("" for a card of the user's own, whose
    # sample is theirs: prbj knows no full data for it).
    full_data: str = f"hf:{OFFICIAL_HF_DATASET}"

    @property
    def is_demo_sample(self) -> bool:
        return self.dataset_source == "sample"

    @property
    def dataset_label(self) -> str:
        """The dataset as reports name it: with its benchmark where that is not Personalized RewardBench."""
        return self.dataset_source if self.benchmark == "prb" else f"{self.dataset_source} ({self.benchmark})"


@dataclass(frozen=True)
class ReportContent:
    title: str
    runs: list[RunInfo]
    subsets: list[str]
    leaderboard: list[LeaderRow]
    position: list[PositionRow]
    costs: list[CostRow]
    failures: list[FailureRow]
    curves: list[Curve] = field(default_factory=list)
    correlations: list[Correlation] = field(default_factory=list)
    # Per entry: the pair ids judged wrong, and those whose judgment failed (the HTML report lists them).
    wrong_pairs: dict[Entry, tuple[list[str], list[str]]] = field(default_factory=dict)
    unanswered: list[Unanswered] = field(default_factory=list)

    @property
    def has_cost(self) -> bool:
        return any(row.per_100_usd is not None for row in self.costs)

    @property
    def has_downstream(self) -> bool:
        return bool(self.curves or self.correlations)

    @property
    def per_user(self) -> bool:
        """Whether some run's users have several pairs, so that user figures differ from pair figures."""
        return any(row.overall.user_accuracy is not None for row in self.leaderboard)

    @property
    def chance_note(self) -> str:
        """The chance level of runs with best-of-k items, said under the leaderboard; '' when all are pairs."""
        levels = {(run.benchmark, run.chance.label): None for run in self.runs if run.chance is not None}
        if not levels:
            return ""
        if len(levels) == 1 and all(run.chance is not None for run in self.runs):
            return f"Chance level (a judge picking at random): {next(iter(levels))[1]}."
        listed = "; ".join(f"{benchmark} {label}" for benchmark, label in levels)
        return f"Chance level (a judge picking at random; pairs 50%): {listed}."

    @property
    def interval_note(self) -> str:
        """How the report's intervals were drawn, for its footer."""
        over_pairs = (
            f"Clopper–Pearson under {SMALL_SAMPLE} pairs and at 0% or 100%, else the percentile bootstrap"
        )
        if self.per_user:
            return (
                "Accuracy intervals are 95% intervals, over users where users have several pairs (Korn–Graubard "
                f"over users, none under 2 users), else over pairs ({over_pairs})"
            )
        return f"Accuracy intervals are 95% intervals over pairs ({over_pairs})"


def _mean(series: pl.Series) -> float | None:
    value = series.mean() if series.len() else None
    # polars types mean() as any scalar; on a numeric column it is a number.
    return None if value is None else float(value)  # type: ignore[arg-type]


def _entries(runs: Sequence[RunData]) -> list[tuple[RunData, Entry]]:
    several = len(runs) > 1
    labels = _run_labels(runs)
    out = []
    for run, run_label in zip(runs, labels, strict=True):
        seen: set[tuple[str, str]] = set()
        for row in run.results:
            key = (row.judge, row.context)
            if key in seen:
                continue
            seen.add(key)
            label = f"{row.judge} · {row.context}" + (f" · {run_label}" if several else "")
            out.append((run, Entry(run_label, row.judge, row.context, label)))
    return out


def _run_labels(runs: Sequence[RunData]) -> list[str]:
    ids = [run.run_id for run in runs]
    counts = Counter(ids)
    # Two runs with the same id (copied folders) need their parent folder to tell them apart.
    return [
        run.run_id if counts[run.run_id] == 1 else f"{run.run_dir.parent.name}/{run.run_id}" for run in runs
    ]


def _mine(run: RunData, entry: Entry) -> pl.DataFrame:
    return run.judgments.filter(pl.col("judge") == entry.judge, pl.col("context") == entry.context)


def position_row(frame: pl.DataFrame, overall: GroupStats, entry: Entry) -> PositionRow | None:
    """From summary.json's position figures when the run has them (they also cover --order both, where
    each pair is judged in both orders); otherwise from the judgments' chosen_position."""
    if overall.accuracy_chosen_a is not None or overall.accuracy_chosen_b is not None:
        ok = frame.filter(pl.col("status") == "ok")
        n_a, n_b = (
            int(ok[column].drop_nulls().len()) if column in ok.columns else 0
            for column in ("verdict_chosen_a", "verdict_chosen_b")
        )
        return PositionRow(
            entry,
            n_a,
            overall.accuracy_chosen_a,
            n_b,
            overall.accuracy_chosen_b,
            overall.share_a,
            overall.order_consistency,
        )
    if "chosen_position" not in frame.columns:
        return None
    placed = frame.filter(pl.col("status") == "ok", pl.col("chosen_position").is_in(["A", "B"]))
    if placed.height == 0:
        return None
    in_a = placed.filter(pl.col("chosen_position") == "A")["correct"].cast(pl.Float64)
    in_b = placed.filter(pl.col("chosen_position") == "B")["correct"].cast(pl.Float64)
    decided = placed.filter(pl.col("verdict").is_in(["chosen", "rejected"]))
    said_a = (
        (decided["verdict"] == "chosen") & (decided["chosen_position"] == "A")
        | (decided["verdict"] == "rejected") & (decided["chosen_position"] == "B")
    ).cast(pl.Float64)
    return PositionRow(entry, in_a.len(), _mean(in_a), in_b.len(), _mean(in_b), _mean(said_a))


def cost_row(frame: pl.DataFrame, entry: Entry) -> CostRow:
    total = per_100 = cached = latency = None
    if COST_COLUMN in frame.columns and frame[COST_COLUMN].drop_nulls().len():
        total = float(frame[COST_COLUMN].drop_nulls().sum())
        per_100 = 100.0 * total / frame.height
        if ORIGINAL_COST_COLUMN in frame.columns:
            # Per 100 judgments at the price each answer was bought for: what the run costs uncached.
            original = frame.select(pl.coalesce(ORIGINAL_COST_COLUMN, COST_COLUMN)).to_series().drop_nulls()
            per_100 = 100.0 * float(original.sum()) / frame.height
    if CACHED_COLUMN in frame.columns and frame[CACHED_COLUMN].drop_nulls().len():
        cached = _mean(frame[CACHED_COLUMN].drop_nulls().cast(pl.Float64))
    column = next((c for c in LATENCY_COLUMNS if c in frame.columns), None)
    # Over answered judgments only: a failed or never-sent call's time says nothing about the model's speed.
    answered = frame.filter(pl.col("status") == "ok") if "status" in frame.columns else frame
    if column and answered[column].drop_nulls().len():
        # polars types median() as any scalar; on a numeric column it is a number.
        latency = float(answered[column].drop_nulls().cast(pl.Float64).median())  # type: ignore[arg-type]
    return CostRow(entry, frame.height, total, per_100, cached, latency)


def wrong_pair_ids(frame: pl.DataFrame) -> tuple[list[str], list[str]]:
    """Pair ids judged wrong (answered, not correct: ties included) and those that failed."""
    if frame.is_empty() or "pair_id" not in frame.columns:
        return [], []
    answered = pl.col("status") == "ok"
    wrong = frame.filter(answered & ~pl.col("correct").fill_null(False))["pair_id"].unique(
        maintain_order=True
    )
    failed = frame.filter(~answered)["pair_id"].unique(maintain_order=True)
    return wrong.to_list(), failed.to_list()


def failure_row(frame: pl.DataFrame, overall: GroupStats, entry: Entry) -> FailureRow | None:
    if overall.failed == 0:
        return None
    examples: list[str] = []
    if "error" in frame.columns:
        messages = frame.filter(pl.col("status") != "ok")["error"].drop_nulls().to_list()
        examples = [message for message, _ in Counter(messages).most_common(3)]
    parse_errors, api_errors = overall.parse_errors or 0, overall.api_errors or 0
    # Not in summary.json (whose fields a plain run keeps unchanged): counted from the judgments.
    truncated, refused = (int((frame["status"] == status).sum()) for status in ("truncated", "refused"))
    skipped = overall.failed - parse_errors - api_errors - truncated - refused
    return FailureRow(entry, overall.n, parse_errors, api_errors, skipped, examples, truncated, refused)


def _rm_names(entry: Entry, first_context: dict[str, str]) -> set[str]:
    """The RM names a downstream row may give this entry: `judge@context`, or plain `judge` for the first
    context the judge ran in (the names `prbj correlate --map` uses)."""
    names = {f"{entry.judge}@{entry.context}"}
    if first_context.get(entry.judge) == entry.context:
        names.add(entry.judge)
    return names


def match_downstream(
    runs: Sequence[RunData], entries: Sequence[tuple[RunData, Entry]], extra: pl.DataFrame | None
) -> pl.DataFrame | None:
    """All downstream rows that belong to a leaderboard entry, with `rm` replaced by the entry's label. A run's
    own downstream.parquet speaks of its own judges; rows given with --downstream go to the first entry, in the
    order the runs were given, whose judge they name."""
    first_context: dict[int, dict[str, str]] = {}
    for run in runs:
        contexts: dict[str, str] = {}
        for r in run.results:
            contexts.setdefault(r.judge, r.context)
        first_context[id(run)] = contexts
    parts = []
    claimed: set[str] = set()
    for run, entry in entries:
        names = _rm_names(entry, first_context[id(run)])
        for frame, shared in ((run.downstream, False), (extra, True)):
            if frame is None:
                continue
            wanted = names - claimed if shared else names
            rows = frame.filter(pl.col("rm").is_in(sorted(wanted)))
            if rows.height:
                parts.append(rows.with_columns(pl.lit(entry.label).alias("rm")))
                if shared:
                    claimed |= set(rows["rm"].to_list())
    return pl.concat(parts) if parts else None


def _curves(rows: pl.DataFrame) -> list[Curve]:
    curves = []
    with_k = rows.filter(pl.col("k").is_not_null())
    for (label, source, subset), part in sorted(
        with_k.group_by("rm", "source", "subset"), key=lambda g: g[0]
    ):
        points = part.group_by("k").agg(pl.col("score").mean()).sort("k").rows()
        curves.append(Curve(str(label), str(subset), str(source), [(int(k), float(s)) for k, s in points]))
    return curves


def _overall_scores(rows: pl.DataFrame) -> dict[str, dict[str, float]]:
    """Per source, each RM's downstream figure as `prbj correlate` takes it by default: subset `all` (the
    n-weighted mean over subsets when the source has no such rows), or the only subset a source has, at the
    k most RMs report."""
    from prbj.analysis.correlate_run import CorrelateConfig, downstream_tables

    tables, _ = downstream_tables(rows, CorrelateConfig(k="max"))
    by_source: dict[str, list[Any]] = {}
    for table in tables:
        by_source.setdefault(table.source, []).append(table)
    scores = {}
    for source, mine in by_source.items():
        overall = [t for t in mine if t.subset == ALL_SUBSETS]
        if overall or len(mine) == 1:
            scores[source] = dict((overall or mine)[0].scores)
    return scores


def correlate(source: str, points: list[ScatterPoint]) -> Correlation:
    """Spearman, Kendall τ-b and Pearson with prbj.analysis.correlate, the same functions as `prbj correlate` (which
    adds bootstrap intervals, weighted τ, NDCG and RBO)."""
    if len(points) < 3:
        return Correlation(source, len(points), None, None, None, points)
    from prbj.analysis.correlate import kendall_tau_b, pearson, spearman

    x = np.array([p.benchmark for p in points])
    y = np.array([p.downstream for p in points])

    def finite(value: Any) -> float | None:
        value = float(value)
        return None if math.isnan(value) else value

    return Correlation(
        source,
        len(points),
        finite(spearman(x, y)),
        finite(kendall_tau_b(x, y)),
        finite(pearson(x, y)),
        points,
    )


def build_content(
    runs: Sequence[RunData], *, title: str | None = None, extra_downstream: pl.DataFrame | None = None
) -> ReportContent:
    entries = _entries(runs)
    subsets = fmt.subset_columns({r.subset for run in runs for r in run.results})
    leaderboard, position, costs, failures, curves = [], [], [], [], []
    unanswered: list[Unanswered] = []
    wrong: dict[Entry, tuple[list[str], list[str]]] = {}
    scatter: dict[str, list[ScatterPoint]] = {}
    for run, entry in entries:
        rows = {r.subset: r for r in run.results if (r.judge, r.context) == (entry.judge, entry.context)}
        overall = rows.get(ALL_SUBSETS)
        if overall is None:
            continue
        leaderboard.append(
            LeaderRow(
                entry,
                overall,
                {s: r for s, r in rows.items() if s != ALL_SUBSETS},
                headline_of(run.summary),
            )
        )
        frame = _mine(run, entry)
        if (row := position_row(frame, overall, entry)) is not None:
            position.append(row)
        costs.append(cost_row(frame, entry))
        wrong[entry] = wrong_pair_ids(frame)
        if (failure := failure_row(frame, overall, entry)) is not None:
            failures.append(failure)
        if overall.n_ok == 0 and overall.n:
            placed = "chosen_position" in frame.columns and frame["chosen_position"].drop_nulls().len() > 0
            unanswered.append(Unanswered(entry, overall.n - overall.n_ok, overall.n, placed))
    downstream = match_downstream(runs, entries, extra_downstream)
    if downstream is not None:
        curves = _curves(downstream)
        accuracy = {row.entry.label: row.overall.accuracy for row in leaderboard}
        for source, scores in _overall_scores(downstream).items():
            scatter[source] = [
                ScatterPoint(label, value, score)
                for label, score in scores.items()
                if (value := accuracy.get(label)) is not None
            ]
    # Ranked by the headline (a card's unit; prbj.analysis.headline). Oracle rows (the judge saw the rubric)
    # come after every fair setting: an upper bound, not a rank.
    leaderboard.sort(
        key=lambda r: (
            r.entry.is_upper_bound,
            -(r.rank_value if r.rank_value is not None else -1.0),
        )
    )
    order = {row.entry: i for i, row in enumerate(leaderboard)}
    for rows_ in (position, costs, failures):
        rows_.sort(key=lambda r: order[r.entry])
    correlations = [correlate(source, points) for source, points in sorted(scatter.items())]
    return ReportContent(
        title=title or _default_title(runs),
        runs=[_run_info(run, label) for run, label in zip(runs, _run_labels(runs), strict=True)],
        subsets=subsets,
        leaderboard=leaderboard,
        position=position,
        costs=costs,
        failures=failures,
        curves=curves,
        correlations=correlations,
        wrong_pairs=wrong,
        unanswered=unanswered,
    )


def _default_title(runs: Sequence[RunData]) -> str:
    if len(runs) == 1:
        return f"prbj report · {runs[0].run_id}"
    return f"prbj leaderboard · {len(runs)} runs"


def _run_info(run: RunData, label: str) -> RunInfo:
    dataset = run.dataset
    return RunInfo(
        run_id=label,
        path=str(run.run_dir),
        dataset_source=str(dataset.get("source", "?")),
        fingerprint=str(dataset.get("fingerprint", "?")),
        n_pairs=dataset.get("n_pairs"),
        seed=run.summary.get("seed", run.run.get("config", {}).get("seed")),
        started=run.run.get("started"),
        finished=run.run.get("finished"),
        version=run.summary.get("prbj_version"),
        benchmark=benchmark_name(run)[0],
        chance=chance_of(run.judgments),
        full_data=_full_data(run),
    )


def _full_data(run: RunData) -> str:
    """Where the full data of the benchmark a run read is (its card's source; Personalized RewardBench's hub
    dataset), or "" for a card of the user's own. run.json is untrusted: a name is only looked up."""
    config = run.run.get("config")
    recorded = config.get("benchmark") if isinstance(config, dict) else None
    if recorded_own_card(recorded):
        return ""
    card = recorded_shipped_card(recorded)
    return (card.source or "") if card is not None else f"hf:{OFFICIAL_HF_DATASET}"
