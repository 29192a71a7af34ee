"""Cascades: a cheap judge decides the pairs it is sure of and hands the others to a strong judge
(`--escalate-to PROVIDER --escalate-below CONF`, or `--selective FILE`). Trust or Escalate (Jung et al.,
arXiv 2407.18370) in its simplest form.

A first-stage judgment is escalated when its verdict was withheld (`abstained`), when it answered with a
confidence below the threshold or with no probability at all (nothing says it is sure), or when its call failed
in a way a fresh answer can heal (a parse or API error); a judgment never sent (budget, cache, dry run) is not.
The strong judge's calls on escalated pairs are the run's own (cached when they ran before); on every other
pair no second-stage call is made.

The cascade is a judge of its own, `cascade(first→second)`: on each pair the deciding stage's judgment (status,
verdict, probability, and the per-order verdicts and reply it came from) with the cost of both stages, and
`cascade_stage` saying which one decided. Its figures (summary.json `cascades`) put its accuracy and cost per
100 judgments beside the strong judge alone on the same pairs: measured when the strong judge also ran on
every pair (it was among --provider), otherwise its cost estimated from its mean cost on the escalated pairs
(accuracy then unknown).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import polars as pl

from prbj.analysis.confidence import CONFIDENCE
from prbj.analysis.derived import with_derived
from prbj.data.status import ABSTAINED, HEALABLE_STATUSES

ESCALATED_SUFFIX = " (escalated)"
STAGE_COLUMN = "cascade_stage"
# The pair itself, the same in both stages' rows.
_PAIR = ("pair_id", "subset", "context", "chosen_words", "rejected_words")
# Added up over both stages.
_SUMMED = ("cost_usd", "original_cost_usd", "prompt_tokens", "completion_tokens")
# Every other column is the judgment of the stage that decided the pair: its verdict and probability, and the
# per-order verdicts, scores and reply that verdict came from (position figures read the per-order ones).


def cascade_name(first: str, second: str) -> str:
    return f"cascade({first}→{second})"


def escalated_label(second: str) -> str:
    """The judge name of a strong judge's rows on escalated pairs only (so that its leaderboard row is never
    taken for a judgment of every pair)."""
    return second + ESCALATED_SUFFIX


@dataclass(frozen=True, slots=True)
class CascadePlan:
    first: str
    # The provider spec of the strong judge, and the judge name its rows on the escalated pairs carry.
    second: str
    second_rows: str
    context: str
    # Escalate below this confidence; None: escalate what --selective withheld (and what has no probability).
    below: float | None
    # Whether the strong judge's rows cover every pair (it was also among --provider).
    second_ran_alone: bool


def escalated_pairs(frame: pl.DataFrame, first: str, context: str, below: float | None) -> list[str]:
    """The pairs whose first-stage judgment goes on to the strong judge, in the order they were judged."""
    mine = frame.filter(pl.col("judge") == first, pl.col("context") == context)
    confidence = pl.col(CONFIDENCE) if CONFIDENCE in mine.columns else pl.lit(None, dtype=pl.Float64)
    unsure = pl.col("status") == ABSTAINED
    answered_unsure = (pl.col("status") == "ok") & (
        confidence.is_null() | (confidence < below if below is not None else pl.lit(False))
    )
    healable = pl.col("status").is_in(HEALABLE_STATUSES)
    return mine.filter(unsure | answered_unsure | healable)["pair_id"].to_list()


@dataclass(frozen=True, slots=True)
class CascadeStats:
    name: str
    first: str
    second: str
    context: str
    escalate_below: float | None
    n: int
    escalated: int
    share_escalated: float | None
    # Shares of the pairs decided (answered) by each stage.
    coverage_first: float | None
    coverage_second: float | None
    accuracy: float | None
    cost_usd: float
    cost_per_100: float | None
    second_alone_cost_per_100: float | None
    second_alone_cost_estimated: bool
    second_alone_accuracy: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _cost(frame: pl.DataFrame) -> pl.Series:
    """What each judgment's answers cost when first bought (the uncached price), else what they cost now."""
    if "original_cost_usd" in frame.columns:
        return frame.select(pl.coalesce("original_cost_usd", "cost_usd")).to_series()
    return frame["cost_usd"]


def cascade_rows(frame: pl.DataFrame, plan: CascadePlan) -> tuple[pl.DataFrame, CascadeStats]:
    """The cascade's judgment rows (judgments.parquet columns) and its figures."""
    first = frame.filter(pl.col("judge") == plan.first, pl.col("context") == plan.context)
    second = frame.filter(pl.col("judge") == plan.second_rows, pl.col("context") == plan.context)
    escalated = set(escalated_pairs(frame, plan.first, plan.context, plan.below))
    summed = [c for c in _SUMMED if c in frame.columns]
    deciding = [c for c in frame.columns if c not in (*_PAIR, "judge", STAGE_COLUMN, *summed)]
    joined = first.join(
        second.select("pair_id", *deciding, *summed).rename(lambda c: c if c == "pair_id" else f"{c}__2"),
        on="pair_id",
        how="left",
    )
    up = pl.col("pair_id").is_in(sorted(escalated)) & pl.col("status__2").is_not_null()
    name = cascade_name(plan.first, plan.second)
    rows = joined.with_columns(
        pl.lit(name).alias("judge"),
        *(pl.when(up).then(pl.col(f"{c}__2")).otherwise(pl.col(c)).alias(c) for c in deciding),
        *(
            (pl.col(c).fill_null(0) + pl.when(up).then(pl.col(f"{c}__2").fill_null(0)).otherwise(0)).alias(c)
            for c in summed
        ),
        pl.when(up).then(2).otherwise(1).cast(pl.Int64).alias(STAGE_COLUMN),
    ).drop([f"{c}__2" for c in (*deciding, *summed)])
    return rows, _stats(rows, second, plan, len(escalated & set(first["pair_id"].to_list())))


def _stats(rows: pl.DataFrame, second: pl.DataFrame, plan: CascadePlan, escalated: int) -> CascadeStats:
    n = rows.height
    ok = rows.filter(pl.col("status") == "ok")
    decided_first = int((ok[STAGE_COLUMN] == 1).sum())
    decided_second = int((ok[STAGE_COLUMN] == 2).sum())
    cost = float(_cost(rows).fill_null(0.0).sum())
    alone_cost: float | None = None
    alone_accuracy: float | None = None
    if plan.second_ran_alone:
        same = second.filter(pl.col("pair_id").is_in(rows["pair_id"].implode()))
        if same.height:
            alone_cost = 100.0 * float(_cost(same).fill_null(0.0).sum()) / same.height
            answered = same.filter(pl.col("status") == "ok")
            alone_accuracy = int(answered["correct"].sum()) / answered.height if answered.height else None
    else:
        asked = second.filter(pl.col("pair_id").is_in(rows["pair_id"].implode()))
        if asked.height:
            alone_cost = 100.0 * float(_cost(asked).fill_null(0.0).sum()) / asked.height
    return CascadeStats(
        name=cascade_name(plan.first, plan.second),
        first=plan.first,
        second=plan.second,
        context=plan.context,
        escalate_below=plan.below,
        n=n,
        escalated=escalated,
        share_escalated=escalated / n if n else None,
        coverage_first=decided_first / n if n else None,
        coverage_second=decided_second / n if n else None,
        accuracy=int(ok["correct"].sum()) / ok.height if ok.height else None,
        cost_usd=float(rows["cost_usd"].fill_null(0.0).sum()),
        cost_per_100=100.0 * cost / n if n else None,
        second_alone_cost_per_100=alone_cost,
        second_alone_cost_estimated=not plan.second_ran_alone,
        second_alone_accuracy=alone_accuracy,
    )


def add_cascades(frame: pl.DataFrame, plans: list[CascadePlan]) -> tuple[pl.DataFrame, list[CascadeStats]]:
    """The judgments with every cascade's rows appended, and the cascades' figures."""

    def derive(judgments: pl.DataFrame, plan: CascadePlan) -> tuple[pl.DataFrame, list[CascadeStats]]:
        rows, stats = cascade_rows(judgments, plan)
        return rows, [stats]

    return with_derived(frame, plans, derive)
