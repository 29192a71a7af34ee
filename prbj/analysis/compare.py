"""Judges against each other on the same pairs: the paired bootstrap interval of the accuracy difference,
McNemar's p with Holm's correction across all pairs of judges, and the minimum detectable difference.

An entry is one judge in one context. Two entries are compared on the pairs both answered (status ok)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from itertools import combinations
from typing import Any

import numpy as np
import polars as pl

from prbj.analysis.mcnemar import mcnemar
from prbj.analysis.paired import paired_difference_ci
from prbj.analysis.power import ALPHA, POWER, min_detectable_difference, pairs_needed


@dataclass(frozen=True, slots=True)
class Comparison:
    first: str
    second: str
    n: int
    accuracy_first: float | None
    accuracy_second: float | None
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    # Pairs only the first got right, and only the second.
    first_only: int
    second_only: int
    p_value: float
    method: str
    p_holm: float
    significant: bool
    discordance: float | None
    min_detectable_difference: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def entry_label(judge: str, context: str) -> str:
    return f"{judge} · {context}"


def outcomes(frame: pl.DataFrame) -> dict[str, dict[str, bool]]:
    """Per entry label, pair id → correct, over the judgments that ended ok."""
    ok = frame.filter(pl.col("status") == "ok")
    table: dict[str, dict[str, bool]] = {}
    for judge, context, pair_id, correct in ok.select("judge", "context", "pair_id", "correct").iter_rows():
        table.setdefault(entry_label(judge, context), {})[pair_id] = bool(correct)
    return table


def paired_arrays(first: dict[str, bool], second: dict[str, bool]) -> tuple[np.ndarray, np.ndarray]:
    shared = sorted(first.keys() & second.keys())
    return (
        np.array([first[k] for k in shared], dtype=np.float64),
        np.array([second[k] for k in shared], dtype=np.float64),
    )


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment: the family-wise error stays at α over all the comparisons."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def compare_pair(
    first: str, second: str, a: np.ndarray, b: np.ndarray, *, seed: int, alpha: float, power: float
) -> Comparison:
    n = int(a.size)
    first_only = int(((a == 1) & (b == 0)).sum())
    second_only = int(((a == 0) & (b == 1)).sum())
    test = mcnemar(second_only, first_only)
    low, high = paired_difference_ci(a, b, seed=seed) if n else (None, None)
    discordance = (first_only + second_only) / n if n else None
    return Comparison(
        first=first,
        second=second,
        n=n,
        accuracy_first=float(a.mean()) if n else None,
        accuracy_second=float(b.mean()) if n else None,
        difference=float(a.mean() - b.mean()) if n else None,
        ci_low=low,
        ci_high=high,
        first_only=first_only,
        second_only=second_only,
        p_value=test.p_value,
        method=test.method,
        p_holm=test.p_value,
        significant=False,
        discordance=discordance,
        min_detectable_difference=(
            min_detectable_difference(discordance, n, alpha=alpha, power=power) if discordance else None
        ),
    )


def compare_judges(
    frame: pl.DataFrame, *, seed: int, alpha: float = ALPHA, power: float = POWER
) -> list[Comparison]:
    """Every pair of entries that share at least one answered pair, Holm-corrected together."""
    table = outcomes(frame)
    raw = []
    for first, second in combinations(table, 2):
        a, b = paired_arrays(table[first], table[second])
        if a.size:
            raw.append(compare_pair(first, second, a, b, seed=seed, alpha=alpha, power=power))
    adjusted = holm([c.p_value for c in raw])
    return [
        replace(comparison, p_holm=p_holm, significant=p_holm < alpha)
        for comparison, p_holm in zip(raw, adjusted, strict=True)
    ]


def better_than(comparisons: list[Comparison]) -> dict[str, list[str]]:
    """Entry → the entries it is significantly better than (Holm-corrected), the compact matrix's content."""
    wins: dict[str, list[str]] = {}
    for c in comparisons:
        wins.setdefault(c.first, [])
        wins.setdefault(c.second, [])
        if c.significant and c.difference is not None and c.difference != 0:
            winner, loser = (c.first, c.second) if c.difference > 0 else (c.second, c.first)
            wins[winner].append(loser)
    return wins


def power_rows(
    comparisons: list[Comparison], *, delta: float, alpha: float = ALPHA, power: float = POWER
) -> list[dict[str, Any]]:
    """For `prbj power`: per pair of entries, pairs needed to detect `delta` and the MDE at the current size."""
    return [
        {
            "first": c.first,
            "second": c.second,
            "n": c.n,
            "discordance": c.discordance,
            "difference": c.difference,
            "delta": delta,
            "pairs_needed": pairs_needed(c.discordance, delta, alpha=alpha, power=power)
            if c.discordance
            else None,
            "min_detectable_difference": c.min_detectable_difference,
        }
        for c in comparisons
    ]
