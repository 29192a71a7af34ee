"""The accuracy a judge that picks at random would reach: 1/k on an item of k candidates (1/2 on a pair), averaged
over the items judged. Best-of-k figures are read against it (RewardBench 2's best-of-4 against 25%).

Items of k candidates are recorded in judgments.parquet's `candidates` column (prbj.data.user_columns), present
only when some item has more than two; without it every item is a pair.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from prbj.data.user_columns import CANDIDATES


@dataclass(frozen=True)
class Chance:
    # The mean over items of 1/k.
    level: float
    # The numbers of candidates the items hold, smallest first (k = 2: pairs).
    k: tuple[int, ...]

    @property
    def label(self) -> str:
        """`25.0% (best of 4)`, `31.2% (best of 2 to 4)`."""
        low, high = self.k[0], self.k[-1]
        of = f"best of {low}" if low == high else f"best of {low} to {high}"
        return f"{self.level:.1%} ({of})"


def chance_of(judgments: pl.DataFrame) -> Chance | None:
    """The chance level of the items judged, or None when every item is a pair (no `candidates` column)."""
    if CANDIDATES not in judgments.columns or "pair_id" not in judgments.columns or judgments.is_empty():
        return None
    items = judgments.select("pair_id", pl.col(CANDIDATES).fill_null(2)).unique("pair_id")
    k = [int(value) for value in items[CANDIDATES].to_list()]
    if max(k) <= 2:
        return None
    return Chance(sum(1.0 / value for value in k) / len(k), tuple(sorted(set(k))))
