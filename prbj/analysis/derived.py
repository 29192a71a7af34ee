"""Judges made from other judges' judgments (juries, cascades): their rows are appended to the run's
judgments, so that every figure treats them as judges of their own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import polars as pl

Spec = TypeVar("Spec")
Stats = TypeVar("Stats")


def with_derived(
    frame: pl.DataFrame,
    specs: Sequence[Spec],
    derive: Callable[[pl.DataFrame, Spec], tuple[pl.DataFrame, list[Stats]]],
) -> tuple[pl.DataFrame, list[Stats]]:
    """The judgments with each spec's derived rows appended (columns they lack are null), and their figures.
    Each spec derives from the judgments as they stand, those derived before it included."""
    stats: list[Stats] = []
    for spec in specs:
        rows, figures = derive(frame, spec)
        stats.extend(figures)
        if rows.height:
            frame = pl.concat([frame, rows], how="diagonal_relaxed")
    return frame, stats
