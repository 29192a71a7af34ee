"""What a build produced, in numbers: kept/dropped/incomplete per subset and per reason, check-score
distributions, and how often the chosen answer is the longer one (a length-biased benchmark would reward
length-biased judges)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from prbj.build.checks import DIMENSIONS, word_count
from prbj.build.pipeline import Outcome

# Above this share of kept pairs with a longer chosen answer, --balance-length warns.
LENGTH_WARNING_SHARE = 0.6
ANSWER_ROLES = ("chosen", "rejected")


def outcomes_frame(outcomes: Sequence[Outcome]) -> pl.DataFrame:
    rows = []
    for o in outcomes:
        row: dict[str, Any] = {
            "id": o.record.id,
            "subset": o.record.category,
            "status": o.status,
            "reason": o.reason,
            "chosen_words": word_count(o.chosen) if o.chosen is not None else None,
            "rejected_words": word_count(o.rejected) if o.rejected is not None else None,
            "checked": bool(o.checks),
        }
        for role in ANSWER_ROLES:
            scores = o.checks.get(role)
            for dimension in DIMENSIONS:
                row[f"{role}_{dimension}"] = getattr(scores, dimension) if scores else None
        rows.append(row)
    schema: dict[str, Any] = {
        "id": pl.String,
        "subset": pl.String,
        "status": pl.String,
        "reason": pl.String,
        "chosen_words": pl.Int64,
        "rejected_words": pl.Int64,
        "checked": pl.Boolean,
        **{f"{r}_{d}": pl.Float64 for r in ANSWER_ROLES for d in DIMENSIONS},
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def _counts(frame: pl.DataFrame) -> dict[str, Any]:
    statuses = dict(frame.group_by("status").len().iter_rows())
    return {
        "records": frame.height,
        "kept": int(statuses.get("kept", 0)),
        "dropped": int(statuses.get("dropped", 0)),
        "incomplete": int(statuses.get("incomplete", 0)),
        "drop_reasons": _reasons(frame, "dropped"),
        "incomplete_reasons": _reasons(frame, "incomplete"),
    }


def _reasons(frame: pl.DataFrame, status: str) -> dict[str, int]:
    rows = frame.filter(pl.col("status") == status).group_by("reason").len().sort("reason")
    return {str(reason): int(n) for reason, n in rows.iter_rows()}


def _distribution(values: pl.Series) -> dict[str, Any]:
    values = values.drop_nulls()
    if values.len() == 0:
        return {"n": 0, "mean": None, "histogram": {}}
    histogram = values.value_counts().sort(values.name)
    return {
        "n": values.len(),
        # polars types mean() as any scalar; on these numeric columns it is a number.
        "mean": round(float(values.mean()), 4),  # type: ignore[arg-type]
        "histogram": {f"{v:g}": int(n) for v, n in histogram.iter_rows()},
    }


def _scores(frame: pl.DataFrame) -> dict[str, Any]:
    document: dict[str, Any] = {"n": frame.height}
    for role in ANSWER_ROLES:
        document[role] = {d: _distribution(frame[f"{role}_{d}"]) for d in DIMENSIONS}
    gap = (frame["chosen_adherence"] - frame["rejected_adherence"]).alias("gap")
    document["adherence_gap"] = _distribution(gap)
    return document


def length_balance(frame: pl.DataFrame, *, warn: bool) -> dict[str, Any]:
    kept = frame.filter(pl.col("status") == "kept")
    n = kept.height
    longer = int((kept["chosen_words"] > kept["rejected_words"]).sum()) if n else 0
    shorter = int((kept["chosen_words"] < kept["rejected_words"]).sum()) if n else 0
    share = longer / n if n else None
    return {
        "kept_pairs": n,
        "chosen_longer": longer,
        "chosen_shorter": shorter,
        "equal_length": n - longer - shorter,
        "chosen_longer_share": round(share, 4) if share is not None else None,
        "mean_words_chosen": _mean_words(kept["chosen_words"]) if n else None,
        "mean_words_rejected": _mean_words(kept["rejected_words"]) if n else None,
        "warning_share": LENGTH_WARNING_SHARE,
        "checked": warn,
        "warning": bool(warn and share is not None and share > LENGTH_WARNING_SHARE),
    }


def summarize(outcomes: Sequence[Outcome], *, balance_length: bool) -> dict[str, Any]:
    """The numeric part of build_summary.json: a pure function of the outcomes (no times, no paths)."""
    frame = outcomes_frame(outcomes)
    by_subset = {
        subset: _counts(frame.filter(pl.col("subset") == subset)) for subset in sorted(set(frame["subset"]))
    }
    checked = frame.filter(pl.col("checked"))
    return {
        "counts": _counts(frame),
        "by_subset": by_subset,
        "scores": {
            "all_checked": _scores(checked),
            "kept": _scores(checked.filter(pl.col("status") == "kept")),
        },
        "length": length_balance(frame, warn=balance_length),
    }


def _mean_words(column: pl.Series) -> float:
    # polars types mean() as any scalar; word counts are integers, so it is a number.
    return round(float(column.mean()), 2)  # type: ignore[arg-type]
