"""Self-consistency: with `--samples K` each LLM judgment is asked K times; the judgments table keeps the
first sample's verdict (so accuracy means what it means at K = 1) and every sample's outcome in
`sample_verdicts` (K entries joined by `|`: a verdict, or the status of a failed sample).

- agreement: among pairs whose K samples all answered, the share on which all K gave the same verdict;
- majority_accuracy: among pairs with at least one answered sample, the share on which strictly more samples
  picked the chosen answer than the rejected one (an even split is a tie, never correct).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import polars as pl

SAMPLE_COLUMN = "sample_verdicts"
SEPARATOR = "|"
VERDICTS = frozenset({"chosen", "rejected", "tie", "inconsistent"})


@dataclass(frozen=True, slots=True)
class ConsistencyRow:
    judge: str
    context: str
    samples: int
    n: int
    n_all_answered: int
    agreement: float | None
    majority_accuracy: float | None
    first_sample_accuracy: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def majority_correct(verdicts: list[str]) -> bool:
    return verdicts.count("chosen") > verdicts.count("rejected")


def self_consistency(frame: pl.DataFrame) -> list[ConsistencyRow]:
    if SAMPLE_COLUMN not in frame.columns:
        return []
    sampled = frame.filter(pl.col(SAMPLE_COLUMN).is_not_null())
    rows = []
    for judge, context in sampled.select("judge", "context").unique(maintain_order=True).iter_rows():
        mine = sampled.filter(pl.col("judge") == judge, pl.col("context") == context)
        outcomes = [text.split(SEPARATOR) for text in mine[SAMPLE_COLUMN].to_list()]
        k = max(len(o) for o in outcomes)
        full = [o for o in outcomes if all(v in VERDICTS for v in o)]
        some = [[v for v in o if v in VERDICTS] for o in outcomes]
        some = [o for o in some if o]
        first = mine.filter(pl.col("status") == "ok")
        rows.append(
            ConsistencyRow(
                judge=judge,
                context=context,
                samples=k,
                n=mine.height,
                n_all_answered=len(full),
                agreement=sum(len(set(o)) == 1 for o in full) / len(full) if full else None,
                majority_accuracy=sum(majority_correct(o) for o in some) / len(some) if some else None,
                first_sample_accuracy=int(first["correct"].sum()) / first.height if first.height else None,
            )
        )
    return rows
