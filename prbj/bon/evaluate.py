"""`prbj bon evaluate`: the gold judge grades every picked answer once; best-of-k curves per RM × subset × k.

A pick shared by several RMs or several k (the same sample of the same question) is graded once: the picks are
deduplicated before any call, and identical requests (two samples with the same text, a later run adding an
RM) are answered by the cache. Questions without a pick and picks whose grading failed are left out of the mean
and counted (`no_pick`, `gold_failed`), never scored 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import numpy as np
import polars as pl

from prbj.analysis.downstream import OFFICIAL_SCALE, UNIT_SCALE
from prbj.analysis.downstream import SCHEMA as DOWNSTREAM_SCHEMA
from prbj.analysis.stats import ALL_SUBSETS, BOOTSTRAP_RESAMPLES, CONFIDENCE
from prbj.bon.gold import GoldJudge
from prbj.data.schema import Pair
from prbj.runs.engine import run_jobs

GOLD_SCHEMA: dict[str, Any] = {
    "pair_id": pl.String,
    "subset": pl.String,
    "sample_index": pl.Int64,
    "score": pl.Float64,
    "aspect_scores": pl.List(pl.Int64),
    "n_aspects": pl.Int64,
    "status": pl.String,
    "error": pl.String,
    "cause": pl.String,
    "cost": pl.Float64,
    "cached": pl.Boolean,
}
EVALUATION_SCHEMA: dict[str, Any] = {
    "rm": pl.String,
    "pair_id": pl.String,
    "subset": pl.String,
    "k": pl.Int64,
    "sample_index": pl.Int64,
    "gold_score": pl.Float64,
    # ok, no_pick, or the gold judge's failure (parse_error, truncated, refused, api_error, skipped_budget,
    # skipped_cache, no_rubric)
    "status": pl.String,
}
DOWNSTREAM_SOURCE = "bon"


async def _grade(gold: GoldJudge, pair: Pair, index: int, answer: str) -> dict[str, Any]:
    grade = await gold.grade(pair, answer)
    return {
        "pair_id": pair.id,
        "subset": pair.category,
        "sample_index": index,
        "score": grade.score,
        "aspect_scores": grade.aspect_scores,
        "n_aspects": len(pair.rubric_aspects),
        "status": grade.status,
        "error": grade.error,
        "cause": grade.cause,
        "cost": grade.cost,
        "cached": grade.calls > 0 and grade.cached_calls == grade.calls,
    }


def picked_samples(picks: pl.DataFrame) -> pl.DataFrame:
    """Each (question, sample) picked by any RM at any k, once."""
    return (
        picks.filter(pl.col("sample_index").is_not_null())
        .select("pair_id", "sample_index")
        .unique()
        .sort("pair_id", "sample_index")
    )


async def grade_picks(
    gold: GoldJudge,
    questions: dict[str, Pair],
    samples: pl.DataFrame,
    picks: pl.DataFrame,
    *,
    concurrency: int,
    show_progress: bool,
    admitted: Callable[[], int] | None = None,
) -> pl.DataFrame:
    texts = {
        (pair_id, index): text
        for pair_id, index, text in samples.select("pair_id", "sample_index", "text").iter_rows()
    }
    jobs = [
        partial(_grade, gold, questions[pair_id], index, texts[(pair_id, index)])
        for pair_id, index in picked_samples(picks).iter_rows()
    ]
    rows = await run_jobs(
        jobs, concurrency=concurrency, description="grading", show_progress=show_progress, admitted=admitted
    )
    return pl.DataFrame(rows, schema=GOLD_SCHEMA, orient="row")


def evaluations(picks: pl.DataFrame, gold: pl.DataFrame) -> pl.DataFrame:
    """Every pick with its gold score; rows keep the picks' order."""
    joined = picks.join(
        gold.select(
            "pair_id", "sample_index", pl.col("score").alias("gold_score"), pl.col("status").alias("g")
        ),
        on=["pair_id", "sample_index"],
        how="left",
        maintain_order="left",
    )
    status = (
        pl.when(pl.col("sample_index").is_null())
        .then(pl.lit("no_pick"))
        .otherwise(pl.col("g").fill_null("not_graded"))
    )
    return joined.with_columns(status.alias("status")).select(list(EVALUATION_SCHEMA))


def bootstrap_mean_ci(
    values: np.ndarray, *, seed: int, resamples: int = BOOTSTRAP_RESAMPLES, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean, resampling questions with replacement."""
    data = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """The gold score of one RM's best-of-k picks on one subset ("all" for every question)."""

    rm: str
    subset: str
    k: int
    n: int  # questions
    n_scored: int  # questions whose pick has a gold score: the mean is over these
    mean: float | None
    std: float | None  # population standard deviation (numpy's default, as the official summary)
    min: float | None
    max: float | None
    ci_low: float | None
    ci_high: float | None
    no_pick: int  # none of the first k samples had an RM score
    gold_failed: int  # the gold judge's reply was unreadable, or its call failed or was skipped

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _point(rm: str, subset: str, k: int, rows: pl.DataFrame, seed: int) -> CurvePoint:
    scored = rows.filter(pl.col("status") == "ok")["gold_score"].to_numpy()
    no_pick = int((rows["status"] == "no_pick").sum())
    stats: dict[str, float | None] = dict.fromkeys(("mean", "std", "min", "max", "ci_low", "ci_high"))
    if scored.size:
        low, high = bootstrap_mean_ci(scored, seed=seed)
        stats = {
            "mean": float(scored.mean()),
            "std": float(scored.std()),
            "min": float(scored.min()),
            "max": float(scored.max()),
            "ci_low": low,
            "ci_high": high,
        }
    return CurvePoint(
        rm=rm,
        subset=subset,
        k=k,
        n=rows.height,
        n_scored=int(scored.size),
        no_pick=no_pick,
        gold_failed=rows.height - int(scored.size) - no_pick,
        **stats,
    )


def curves(evaluated: pl.DataFrame, *, seed: int) -> list[CurvePoint]:
    """Per RM (in order of first appearance) × subset ("all" first, then each subset) × k ascending."""
    points: list[CurvePoint] = []
    subsets = sorted(evaluated["subset"].unique().to_list())
    for rm in evaluated["rm"].unique(maintain_order=True).to_list():
        mine = evaluated.filter(pl.col("rm") == rm)
        for subset in [ALL_SUBSETS, *subsets]:
            part = mine if subset == ALL_SUBSETS else mine.filter(pl.col("subset") == subset)
            for k in sorted(part["k"].unique().to_list()):
                points.append(_point(rm, subset, k, part.filter(pl.col("k") == k), seed))
    return points


def official_summary(points: Sequence[CurvePoint], rm: str) -> dict[str, dict[str, dict[str, Any]]]:
    """One RM's curve in the shape of the official `evaluation_summary.json`: {subset: {k: {...}}}. Only real
    subsets (the official file has no overall entry), only k with at least one graded pick. On the official
    0-2 scale like the official file (prbj's gold means are on [0, 1]: multiplied by OFFICIAL_SCALE), so that
    `prbj downstream add` converts it back exactly like an official file."""

    def official(value: float | None) -> float | None:
        return None if value is None else value * OFFICIAL_SCALE

    document: dict[str, dict[str, dict[str, Any]]] = {}
    for point in points:
        if point.rm != rm or point.subset == ALL_SUBSETS or point.mean is None:
            continue
        document.setdefault(point.subset, {})[str(point.k)] = {
            "k": point.k,
            "num_examples": point.n_scored,
            "mean_score": official(point.mean),
            "std_score": official(point.std),
            "min_score": official(point.min),
            "max_score": official(point.max),
        }
    return document


def downstream_frame(points: Sequence[CurvePoint], origin: str) -> pl.DataFrame:
    """The rows `prbj downstream add RUN_DIR` ingests: one per RM × subset (and "all") × k with a mean."""
    rows = [
        (p.rm, DOWNSTREAM_SOURCE, p.subset, p.k, p.mean, p.n_scored, p.std, origin, UNIT_SCALE, None)
        for p in points
        if p.mean is not None
    ]
    return pl.DataFrame(rows, schema=DOWNSTREAM_SCHEMA, orient="row")
