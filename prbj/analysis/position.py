"""Position bias in full, for judges that saw every pair in both orders (`--order both`), as Shi et al. define
it ("Judging the Judges", arXiv 2406.07791, and their Position-Bias-Analyzer):

- position consistency = consistent pairs / pairs, a pair being consistent when the judge picked the same answer
  in both orders;
- an inconsistent pair is primacy-preferred when the judge said A in both orders (it picked whatever came
  first), recency-preferred when it said B in both;
- preference fairness = (recency − primacy) · share, rescaled to [−1, 1] by the most either could be (every
  pair inconsistent one way): with raw = recency·r% − primacy·p% (r%, p%: each one's share of the inconsistent
  pairs) and bounds ±pairs, this is (recency − primacy) / pairs. 0 is fair; −1 always picks the first answer,
  +1 always the second.

summary.json `position_fairness` holds one row per judge × context (present only when some judge ran both
orders), beside the results rows' `position_bias` and `order_consistency`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import polars as pl


@dataclass(frozen=True, slots=True)
class FairnessRow:
    judge: str
    context: str
    pairs: int
    consistent: int
    primacy: int
    recency: int
    position_consistency: float | None
    preference_fairness: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def position_fairness(frame: pl.DataFrame) -> list[FairnessRow]:
    if "chosen_position" not in frame.columns or "verdict_chosen_a" not in frame.columns:
        return []
    both = frame.filter(
        pl.col("chosen_position") == "both",
        pl.col("verdict_chosen_a").is_not_null(),
        pl.col("verdict_chosen_b").is_not_null(),
    )
    rows = []
    for judge, context in both.select("judge", "context").unique(maintain_order=True).iter_rows():
        mine = both.filter(pl.col("judge") == judge, pl.col("context") == context)
        in_a, in_b = pl.col("verdict_chosen_a"), pl.col("verdict_chosen_b")
        counts = mine.select(
            (in_a == in_b).sum().alias("consistent"),
            # Said A in both orders: picked the chosen answer when it was A, the rejected one when it was.
            ((in_a == "chosen") & (in_b == "rejected")).sum().alias("primacy"),
            ((in_a == "rejected") & (in_b == "chosen")).sum().alias("recency"),
        ).row(0, named=True)
        pairs = mine.height
        rows.append(
            FairnessRow(
                judge=judge,
                context=context,
                pairs=pairs,
                consistent=int(counts["consistent"]),
                primacy=int(counts["primacy"]),
                recency=int(counts["recency"]),
                position_consistency=int(counts["consistent"]) / pairs if pairs else None,
                preference_fairness=(int(counts["recency"]) - int(counts["primacy"])) / pairs
                if pairs
                else None,
            )
        )
    return rows
