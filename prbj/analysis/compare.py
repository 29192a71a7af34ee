"""Judges against each other on the same pairs: the paired interval of the accuracy difference, McNemar's p with
Holm's correction across all pairs of judges, and the minimum detectable difference.

An entry is one judge in one context. Two entries are compared on the pairs both answered (status ok). When users
repeat (prbj.analysis.users), the interval is over users (t with the jackknife's standard error,
prbj.analysis.paired), the test is over users (the exact sign-flip test under 50 users, Obuchowski's clustered
McNemar from 50: prbj.analysis.mcnemar.clustered_test), and the minimum detectable difference counts pairs at
their effective number (pairs over the design effect, prbj.analysis.clusters)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from itertools import combinations
from typing import Any

import numpy as np
import polars as pl

from prbj.analysis.clusters import PairedClusters, design_effect, upper_design_effect
from prbj.analysis.mcnemar import clustered_test, mcnemar
from prbj.analysis.paired import paired_ci
from prbj.analysis.power import (
    ALPHA,
    POWER,
    min_detectable_difference,
    pairs_needed_exact,
    users_needed,
)
from prbj.analysis.stats import BOOTSTRAP_RESAMPLES
from prbj.analysis.user_counts import users_of_pairs, users_repeat


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
    # Where users repeat among the pairs compared (None otherwise, and left out of summary.json): how many users,
    # and how much their clustering inflates the variance of the difference (pairs needed grow by it).
    users: int | None = None
    design_effect: float | None = None
    # The upper 80% of the design effect over user resamples: what `prbj power` plans with.
    design_effect_upper: float | None = None

    def as_dict(self) -> dict[str, Any]:
        row = asdict(self)
        for name in ("users", "design_effect", "design_effect_upper"):
            if row[name] is None:
                del row[name]
        return row


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


def pair_users(
    first: dict[str, bool], second: dict[str, bool], users: dict[str, str] | None
) -> np.ndarray | None:
    """The user of each shared pair, in paired_arrays' order; None when users do not repeat."""
    if users is None:
        return None
    return np.array([users.get(k, k) for k in sorted(first.keys() & second.keys())], dtype=object)


def compare_runs(before: pl.DataFrame, after: pl.DataFrame, *, seed: int) -> list[Comparison]:
    """Each entry (judge · context) in both runs: its accuracy after minus before, on the pairs both runs
    answered, paired and resampled as compare_judges does (the user of a pair read from either run)."""
    old, new = outcomes(before), outcomes(after)
    both = pl.concat(
        [before.select(_user_columns(before)), after.select(_user_columns(after))], how="diagonal"
    )
    users = users_of_pairs(both) if users_repeat(both) else None
    comparisons = []
    for entry in (label for label in new if label in old):
        b, a = paired_arrays(old[entry], new[entry])
        if a.size:
            labels = pair_users(new[entry], old[entry], users)
            comparisons.append(
                compare_pair(entry, entry, a, b, seed=seed, alpha=ALPHA, power=POWER, users=labels)
            )
    return comparisons


def _user_columns(frame: pl.DataFrame) -> list[str]:
    return [c for c in ("pair_id", "user_id") if c in frame.columns]


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
    first: str,
    second: str,
    a: np.ndarray,
    b: np.ndarray,
    *,
    seed: int,
    alpha: float,
    power: float,
    users: np.ndarray | None = None,
) -> Comparison:
    """`users`: each pair's user, aligned with `a` and `b`, when users may repeat."""
    n = int(a.size)
    first_only = int(((a == 1) & (b == 0)).sum())
    second_only = int(((a == 0) & (b == 1)).sum())
    grouped = PairedClusters.from_pairs(a, b, users) if users is not None and n else None
    clustered = grouped if grouped is not None and grouped.repeat else None
    # The second is the baseline of the test: `lost` counts pairs only it got right.
    test = (
        clustered_test(b, a, users, seed=seed)
        if clustered is not None and users is not None
        else mcnemar(second_only, first_only)
    )
    low, high = paired_ci(a, b, seed=seed, clusters=clustered) if n else (None, None)
    discordance = (first_only + second_only) / n if n else None
    inflation = design_effect(clustered) if clustered is not None else None
    effective = int(n / inflation) if inflation is not None else n
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
            min_detectable_difference(discordance, effective, alpha=alpha, power=power)
            if discordance
            else None
        ),
        users=clustered.count if clustered is not None else None,
        design_effect=inflation,
        design_effect_upper=(
            upper_design_effect(clustered, seed=seed, resamples=BOOTSTRAP_RESAMPLES)
            if clustered is not None
            else None
        ),
    )


def compare_judges(
    frame: pl.DataFrame, *, seed: int, alpha: float = ALPHA, power: float = POWER
) -> list[Comparison]:
    """Every pair of entries that share at least one answered pair, Holm-corrected together."""
    table = outcomes(frame)
    users = users_of_pairs(frame) if users_repeat(frame) else None
    raw = []
    for first, second in combinations(table, 2):
        a, b = paired_arrays(table[first], table[second])
        if a.size:
            labels = pair_users(table[first], table[second], users)
            raw.append(compare_pair(first, second, a, b, seed=seed, alpha=alpha, power=power, users=labels))
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
    """For `prbj power`: per pair of entries, pairs needed to detect `delta` and the MDE at the current size;
    where users repeat, the users needed (prbj.analysis.power.users_needed, at the upper 80% of the design
    effect over user resamples) and the pairs they bring."""
    rows = []
    for c in comparisons:
        row: dict[str, Any] = {
            "first": c.first,
            "second": c.second,
            "n": c.n,
            "discordance": c.discordance,
            "difference": c.difference,
            "delta": delta,
            "pairs_needed": _pairs_needed(c, delta, alpha=alpha, power=power),
            "min_detectable_difference": c.min_detectable_difference,
        }
        if c.users and c.design_effect is not None:
            per_user = c.n / c.users
            upper = c.design_effect_upper if c.design_effect_upper is not None else c.design_effect
            needed = (
                users_needed(
                    c.discordance,
                    delta,
                    design_effect=upper,
                    pairs_per_user=per_user,
                    alpha=alpha,
                    power=power,
                )
                if c.discordance
                else None
            )
            row |= {
                "users": c.users,
                "design_effect": c.design_effect,
                "design_effect_upper": upper,
                "pairs_per_user": per_user,
                "users_needed": needed,
                # The pairs those users bring, at the run's pairs per user.
                "pairs_needed": None if needed is None else math.ceil(needed * per_user),
            }
        rows.append(row)
    return rows


def _pairs_needed(c: Comparison, delta: float, *, alpha: float, power: float) -> int | None:
    """Pairs needed to detect `delta` at this discordance, were the pairs independent; None when no number of
    pairs can."""
    if not c.discordance:
        return None
    value = pairs_needed_exact(c.discordance, delta, alpha=alpha, power=power)
    return None if math.isinf(value) else math.ceil(value)
