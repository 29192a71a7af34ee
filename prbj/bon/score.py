"""`prbj bon score`: every reward model scores every sample on its own; best-of-k picks follow from the scores.

Best-of-k uses the first k samples (sample_index < k), as the official scripts do, so the picks for all k come
from one set of N scores. The highest score wins; an exact tie goes to the lowest sample index (the official
`max()` keeps the first maximum too). A sample whose policy call or RM score failed can never win: it is skipped
and counted, and a question none of whose first k samples has a score gets no pick (counted, not guessed).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import polars as pl

from prbj.data.schema import Pair
from prbj.errors import ConfigError
from prbj.judges.base import Judge, PointwiseJudge, ScoreFailure
from prbj.runs.engine import run_jobs

SCORE_SCHEMA: dict[str, Any] = {
    "rm": pl.String,
    "pair_id": pl.String,
    "subset": pl.String,
    "sample_index": pl.Int64,
    "score": pl.Float64,
    "status": pl.String,
    "error": pl.String,
    "cause": pl.String,
}
PICK_SCHEMA: dict[str, Any] = {
    "rm": pl.String,
    "pair_id": pl.String,
    "subset": pl.String,
    "k": pl.Int64,
    # Null when none of the first k samples has a score.
    "sample_index": pl.Int64,
    "score": pl.Float64,
    # Of the first k samples: how many had a score, how many were skipped (policy or RM failure).
    "scored": pl.Int64,
    "skipped": pl.Int64,
}
TIE_BREAK = "lowest sample index"


@dataclass(frozen=True)
class RewardModel:
    """A pointwise judge under the name its results carry in scores, picks and the downstream table."""

    name: str
    judge: PointwiseJudge

    def describe(self) -> dict[str, Any]:
        return {"rm": self.name, **self.judge.describe()}


def reward_models(judges: Sequence[Judge]) -> list[RewardModel]:
    """Check every judge can rank samples without the answer key, and name each: the judge's own name, or
    name@context when one judge runs in several contexts."""
    pointwise: list[PointwiseJudge] = []
    for judge in judges:
        if not isinstance(judge, PointwiseJudge):
            raise ConfigError(
                f"--provider {judge.name}: compares two answers; best-of-N needs one score per answer "
                "(LLM judges: --mode pointwise)"
            )
        if judge.context == "oracle":
            raise ConfigError(
                f"--provider {judge.name}: --context oracle shows the gold rubric, which is what the picks are "
                "graded against; use none, profile or planner"
            )
        pointwise.append(judge)
    names = [judge.name for judge in pointwise]
    clash = {name for name in names if names.count(name) > 1}
    return [
        RewardModel(f"{judge.name}@{judge.context}" if judge.name in clash else judge.name, judge)
        for judge in pointwise
    ]


def _scores_alone(rm: RewardModel) -> bool:
    """LLM judges score one answer per call: one job per sample lets their calls run concurrently and keeps a
    failed call from taking the question's other samples down with it."""
    from prbj.judges.generative import LLMJudgeBase

    return isinstance(rm.judge, LLMJudgeBase)


def _row(
    rm: RewardModel,
    pair: Pair,
    index: int,
    score: float | None,
    status: str,
    error: str | None,
    cause: str | None = None,
) -> dict:
    if score is not None and not math.isfinite(score):
        score, status, error = None, "invalid_score", f"non-finite score {score!r}"
    return {
        "rm": rm.name,
        "pair_id": pair.id,
        "subset": pair.category,
        "sample_index": index,
        "score": score,
        "status": status,
        "error": error,
        "cause": cause,
    }


async def _score(rm: RewardModel, pair: Pair, samples: Sequence[tuple[int, str]]) -> list[dict[str, Any]]:
    view = pair.view(rm.judge.context)
    try:
        values = await rm.judge.score(view, [text for _, text in samples])
    except ScoreFailure as failure:
        if len(samples) == 1:
            return [_row(rm, pair, samples[0][0], None, failure.status, failure.message, failure.cause)]
        # One answer failed: score the rest one by one so that only the failed one goes without a score.
        rows: list[dict[str, Any]] = []
        for sample in samples:
            rows.extend(await _score(rm, pair, [sample]))
        return rows
    if len(values) != len(samples):
        raise RuntimeError(f"judge {rm.name} returned {len(values)} scores for {len(samples)} answers")
    return [
        _row(rm, pair, index, float(v), "ok", None) for (index, _), v in zip(samples, values, strict=True)
    ]


async def score_samples(
    rms: Sequence[RewardModel],
    questions: dict[str, Pair],
    samples: pl.DataFrame,
    *,
    concurrency: int,
    show_progress: bool,
    admitted: Callable[[], int] | None = None,
) -> pl.DataFrame:
    """One row per RM × sample the policy wrote (status ok); failed policy samples are not scored. `admitted`:
    the requests in flight the model providers allow now (runs.engine.run_jobs)."""
    answered = samples.filter(pl.col("status") == "ok").sort("pair_id", "sample_index", maintain_order=True)
    by_question: dict[str, list[tuple[int, str]]] = {}
    for pair_id, index, text in answered.select("pair_id", "sample_index", "text").iter_rows():
        by_question.setdefault(pair_id, []).append((index, text))
    jobs: list[Callable[[], Awaitable[list[dict[str, Any]]]]] = []
    for rm in rms:
        for pair_id, items in by_question.items():
            pair = questions[pair_id]
            if _scores_alone(rm):
                jobs.extend(partial(_score, rm, pair, [item]) for item in items)
            else:
                jobs.append(partial(_score, rm, pair, items))
    results = await run_jobs(
        jobs, concurrency=concurrency, description="scoring", show_progress=show_progress, admitted=admitted
    )
    rows = [row for rows in results for row in rows]
    return pl.DataFrame(rows, schema=SCORE_SCHEMA, orient="row")


def best_of_k(scores: pl.DataFrame, samples: pl.DataFrame, ks: Sequence[int]) -> pl.DataFrame:
    """Per RM × question × k, the highest-scored of the first k samples (ties: lowest index; no score: no pick).

    One pass over each question's samples in index order keeps the running best and records it at every k, so
    the cost is N per RM × question whatever the number of k values."""
    questions = samples.select("pair_id", "subset").unique(maintain_order=True).iter_rows()
    question_list = list(questions)
    checkpoints = set(ks)
    n = max(ks)
    ok = scores.filter(pl.col("status") == "ok")
    rows: list[dict[str, Any]] = []
    for rm in scores["rm"].unique(maintain_order=True).to_list():
        mine = ok.filter(pl.col("rm") == rm)
        by_question: dict[str, dict[int, float]] = {}
        for pair_id, index, score in mine.select("pair_id", "sample_index", "score").iter_rows():
            by_question.setdefault(pair_id, {})[index] = score
        for pair_id, subset in question_list:
            scored_samples = by_question.get(pair_id, {})
            best_index: int | None = None
            best_score = -math.inf
            scored = 0
            for index in range(n):
                score = scored_samples.get(index)
                if score is not None:
                    scored += 1
                    if (
                        best_index is None or score > best_score
                    ):  # strictly greater: ties keep the lower index
                        best_index, best_score = index, score
                k = index + 1
                if k in checkpoints:
                    rows.append(
                        {
                            "rm": rm,
                            "pair_id": pair_id,
                            "subset": subset,
                            "k": k,
                            "sample_index": best_index,
                            "score": best_score if best_index is not None else None,
                            "scored": scored,
                            "skipped": k - scored,
                        }
                    )
    return pl.DataFrame(rows, schema=PICK_SCHEMA, orient="row")


def upsert(old: pl.DataFrame | None, new: pl.DataFrame, rms: Sequence[str]) -> pl.DataFrame:
    """Replace the rows of the RMs just scored and keep the others: RMs can be added to a run one at a time."""
    if old is None:
        return new
    kept = old.filter(~pl.col("rm").is_in(list(rms)))
    return pl.concat([kept, new.select(old.columns)], how="vertical")
