"""The figures beyond accuracy that summary.json carries when a run asked for them (documented in docs/reports.md,
section "Beyond accuracy"). Each key is present only when its figures exist, so a run that asked for none of
them writes exactly the summary.json it always did.

    profile_reliance   a judge ran with --context swapped-profile (and profile)   analysis.reliance
    self_consistency   --samples K >= 2                                           analysis.consistency
    juries             --jury NAME=...                                            analysis.jury
    slices             --slice KIND                                               analysis.slices
    comparisons        --compare                                                  analysis.compare
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from prbj.analysis.compare import better_than, compare_judges
from prbj.analysis.consistency import self_consistency
from prbj.analysis.jury import JuryStats
from prbj.analysis.power import ALPHA, POWER
from prbj.analysis.reliance import profile_reliance
from prbj.analysis.slices import slice_accuracy


def beyond_figures(
    frame: pl.DataFrame,
    *,
    seed: int,
    juries: Sequence[JuryStats] = (),
    slices: Sequence[str] = (),
    compare: bool = False,
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    if reliance := profile_reliance(frame, seed=seed):
        figures["profile_reliance"] = [row.as_dict() for row in reliance]
    if consistency := self_consistency(frame):
        figures["self_consistency"] = [row.as_dict() for row in consistency]
    if juries:
        figures["juries"] = [stats.as_dict() for stats in juries]
    if slices:
        figures["slices"] = [row.as_dict() for row in slice_accuracy(frame, slices, seed=seed)]
    if compare:
        comparisons = compare_judges(frame, seed=seed)
        figures["comparisons"] = {
            "alpha": ALPHA,
            "power": POWER,
            "correction": "holm",
            "pairs": [c.as_dict() for c in comparisons],
            "better_than": better_than(comparisons),
        }
    return figures
