"""Profile reliance: does a judge use the user's profile? The same judge is run with the real profile
(context `profile`) and with another user's (context `swapped-profile`); reliance is the accuracy drop,

    reliance = acc(profile) − acc(swapped-profile)

on the pairs both judgments answered, with a paired bootstrap interval. A judge that ignores the profile
shows about 0; one that uses it shows a drop. Accuracy without any profile (context `none`) is given beside
it, on the same pairs, when the judge ran there too. Where users repeat, the interval resamples users with all
their pairs (prbj.analysis.paired.paired_ci)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import polars as pl

from prbj.analysis.clusters import PairedClusters
from prbj.analysis.compare import entry_label, outcomes, pair_users, paired_arrays
from prbj.analysis.paired import paired_ci
from prbj.analysis.user_counts import users_of_pairs, users_repeat

REAL = "profile"
SWAPPED = "swapped-profile"
NONE = "none"


@dataclass(frozen=True, slots=True)
class RelianceRow:
    judge: str
    n: int
    accuracy_profile: float | None
    accuracy_swapped: float | None
    accuracy_none: float | None
    reliance: float | None
    ci_low: float | None
    ci_high: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def profile_reliance(frame: pl.DataFrame, *, seed: int) -> list[RelianceRow]:
    """One row per judge that ran with both the real and a swapped profile."""
    if frame.height == 0:
        return []
    answered = outcomes(frame)
    users = users_of_pairs(frame) if users_repeat(frame) else None
    rows = []
    judges = frame.filter(pl.col("context") == SWAPPED)["judge"].unique(maintain_order=True).to_list()
    for judge in judges:
        real = answered.get(entry_label(judge, REAL), {})
        swapped = answered.get(entry_label(judge, SWAPPED), {})
        a, b = paired_arrays(real, swapped)
        if not a.size:
            rows.append(RelianceRow(judge, 0, None, None, None, None, None, None))
            continue
        labels = pair_users(real, swapped, users)
        grouped = PairedClusters.from_pairs(a, b, labels) if labels is not None else None
        low, high = paired_ci(a, b, seed=seed, clusters=grouped)
        blind = answered.get(entry_label(judge, NONE), {})
        on_same = [blind[k] for k in real.keys() & swapped.keys() & blind.keys()]
        rows.append(
            RelianceRow(
                judge=judge,
                n=int(a.size),
                accuracy_profile=float(a.mean()),
                accuracy_swapped=float(b.mean()),
                accuracy_none=float(np.mean(on_same)) if on_same else None,
                reliance=float(a.mean() - b.mean()),
                ci_low=low,
                ci_high=high,
            )
        )
    return rows
