"""Where a judge fails: accuracy by slice of the pairs, with 95% intervals (over users, with all their pairs,
when users repeat in the run: prbj.analysis.user_counts.user_figures; over pairs otherwise).

Slices (the names `--slice` takes):
- `profile-posts`: number of posts in the user's profile, in quantile bins;
- `profile-tokens`: whitespace-separated tokens in the whole profile, in quantile bins;
- `length-diff`: words of the chosen answer minus words of the rejected one, in quantile bins;
- `subset`: the benchmark subset;
- `aspects`: number of rubric aspects of the pair (a property of the pair, never shown to a judge).

The per-pair features are columns of judgments.parquet (`pair_features` computes them from the pairs), so a
report computes slices from the run alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import polars as pl

from prbj.analysis.stats import CONFIDENCE, accuracy_interval
from prbj.analysis.user_counts import user_figures, users_repeat
from prbj.data.schema import Pair

FEATURE_COLUMNS = {
    "profile-posts": "profile_posts",
    "profile-tokens": "profile_tokens",
    "aspects": "rubric_aspects",
}
QUANTILE_BINS = 4


@dataclass(frozen=True, slots=True)
class SliceRow:
    judge: str
    context: str
    slice: str
    bin: str
    n: int
    n_ok: int
    accuracy: float | None
    ci_low: float | None
    ci_high: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def pair_features(pairs: Sequence[Pair]) -> pl.DataFrame:
    """One row per pair: profile size in posts and tokens, and rubric-aspect count."""
    return pl.DataFrame(
        {
            "pair_id": [p.id for p in pairs],
            "profile_posts": [len(p.profile) for p in pairs],
            "profile_tokens": [sum(len(post.text.split()) for post in p.profile) for p in pairs],
            "rubric_aspects": [len(p.rubric_aspects) for p in pairs],
        },
        schema={
            "pair_id": pl.String,
            "profile_posts": pl.Int64,
            "profile_tokens": pl.Int64,
            "rubric_aspects": pl.Int64,
        },
    ).unique("pair_id", keep="first", maintain_order=True)


def _values(frame: pl.DataFrame, kind: str) -> pl.Series | None:
    if kind == "subset":
        return frame["subset"]
    if kind == "length-diff":
        if not {"chosen_words", "rejected_words"} <= set(frame.columns):
            return None
        return (frame["chosen_words"] - frame["rejected_words"]).alias("length_diff")
    column = FEATURE_COLUMNS[kind]
    # A run written by another tool may store counts as text: read them as numbers, unreadable ones as null.
    return frame[column].cast(pl.Float64, strict=False) if column in frame.columns else None


def quantile_bins(values: Sequence[int | float], bins: int = QUANTILE_BINS) -> list[tuple[float, float]]:
    """Closed intervals covering the values: one per distinct value when there are few, else quantile bins
    (edges from the distinct pairs' values, so a bin never splits equal values)."""
    data = np.asarray(sorted(values), dtype=np.float64)
    if data.size == 0:
        return []
    distinct = np.unique(data)
    if distinct.size <= bins:
        return [(float(v), float(v)) for v in distinct]
    edges = np.unique(np.quantile(data, np.linspace(0, 1, bins + 1)))
    out = []
    low = float(data[0])
    for cut in edges[1:-1]:
        inside = data[(data >= low) & (data <= cut)]
        if inside.size:
            out.append((low, float(inside.max())))
            above = data[data > cut]
            low = float(above.min()) if above.size else low
    out.append((low, float(data[-1])))
    return [b for b in out if b[0] <= b[1]]


def _label(low: float, high: float) -> str:
    """ "3–7"; with a negative end "−11 to −3" (a typographic minus, and words where a dash would read as one)."""

    def show(v: float) -> str:
        text = str(int(v)) if float(v).is_integer() else f"{v:g}"
        return text.replace("-", "−")

    if low == high:
        return show(low)
    return f"{show(low)} to {show(high)}" if min(low, high) < 0 else f"{show(low)}–{show(high)}"


def slice_accuracy(frame: pl.DataFrame, kinds: Sequence[str], *, seed: int) -> list[SliceRow]:
    """Rows per judge × context × slice × bin, bins in increasing order (subsets by name)."""
    rows: list[SliceRow] = []
    repeat = users_repeat(frame)
    for kind in kinds:
        values = _values(frame, kind)
        if values is None:
            continue
        tagged = frame.with_columns(values.alias("_value"))
        per_pair = tagged.unique("pair_id", keep="first")["_value"].drop_nulls().to_list()
        if kind == "subset":
            groups = [(v, pl.col("_value") == v) for v in sorted(set(per_pair))]
        else:
            groups = [
                (_label(lo, hi), pl.col("_value").is_between(lo, hi)) for lo, hi in quantile_bins(per_pair)
            ]
        for judge, context in tagged.select("judge", "context").unique(maintain_order=True).iter_rows():
            mine = tagged.filter(pl.col("judge") == judge, pl.col("context") == context)
            for label, condition in groups:
                part = mine.filter(condition)
                ok = part.filter(pl.col("status") == "ok")
                outcomes = ok["correct"].cast(pl.Float64).to_numpy()
                low, high = _interval(part, outcomes, seed=seed, repeat=repeat)
                rows.append(
                    SliceRow(
                        judge=judge,
                        context=context,
                        slice=kind,
                        bin=str(label),
                        n=part.height,
                        n_ok=ok.height,
                        accuracy=float(outcomes.mean()) if ok.height else None,
                        ci_low=low,
                        ci_high=high,
                    )
                )
    return rows


def _interval(
    part: pl.DataFrame, outcomes: np.ndarray, *, seed: int, repeat: bool
) -> tuple[float | None, float | None]:
    """Pair accuracy's interval for one bin: resampling users with all their pairs in the bin when users repeat
    in the run (a bin's pairs of one user go right or wrong together), else over pairs."""
    interval = accuracy_interval(outcomes, seed=seed)
    if not repeat:
        return interval
    figures = user_figures(
        part,
        accuracy=float(outcomes.mean()) if outcomes.size else None,
        pair_interval=interval,
        confidence=CONFIDENCE,
    )
    return figures.ci_low, figures.ci_high
