"""`prbj check` on the run's headline where it is not accuracy over pairs: user accuracy on a per-user benchmark
(a user who loses their only right answer weighs as much as one who loses ten), a card's unit of judgments, or
the card's own rules under `--protocol official` (prbj.analysis.headline).

The change in the headline between baseline and run is tested with a sign-flip test over users
(prbj.analysis.sign_flip): each user's change on the items both runs counted, summed (pairs, judgments) or as the
change in their own accuracy (users). The gate is the one of accuracy over pairs (prbj.analysis.check): FAIL when
the headline dropped by more than the tolerance AND the test says so at alpha, WARN when the test cannot tell the
drop from noise, FAIL on the tolerance alone when too few users differ for any outcome to reach alpha; the
failure-rate bound as there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from prbj.analysis.baseline import GroupKey, item_outcomes
from prbj.analysis.headline import Headline, scores_by_group
from prbj.analysis.sign_flip import sign_flip_test
from prbj.analysis.stats import GroupStats

# One item's headline score: 1, 1/2 or 0, or None where the rules leave it out.
Scores = dict[str, float | None]


def gates_on_headline(headline: Headline, users_repeat: bool) -> bool:
    """Whether the headline needs this gate: everything but accuracy over pairs (and user accuracy where every
    user has one pair, for then it is accuracy over pairs)."""
    if headline.native and headline.unit == "pairs":
        return False
    return not (headline.native and headline.unit == "users" and not users_repeat)


def headline_scores(judgments: pl.DataFrame, headline: Headline) -> dict[GroupKey, Scores]:
    """Per judge × context, each item's headline score, keyed as prbj.analysis.headline.item_scores keys them
    (user accuracy by prbj's rules: the items of accuracy over pairs, prbj.analysis.baseline.item_outcomes)."""
    if headline.native:
        outcomes, _ = item_outcomes(judgments)
        return {
            key: {item: None if value is None else float(value) for item, value in items.items()}
            for key, items in outcomes.items()
        }
    return scores_by_group(judgments, headline.rules)


def pair_of(item: str) -> str:
    """The pair an item key belongs to (`p7#A` → `p7`)."""
    return item.rsplit("#", 1)[0] if "#" in item else item


def of_pairs(scores: Scores, pairs: set[str] | None) -> Scores:
    """The items of these pairs (all of them for None)."""
    return scores if pairs is None else {key: v for key, v in scores.items() if pair_of(key) in pairs}


def user_changes(base: Scores, run: Scores, users: Mapping[str, str], *, per_user_mean: bool) -> np.ndarray:
    """Per user with an item both runs counted: the summed change of those items, or the change of the user's
    mean over them (`per_user_mean`, for user accuracy)."""
    shared: dict[str, list[tuple[float, float]]] = {}
    for item in sorted(base.keys() & run.keys()):
        before, after = base[item], run[item]
        if before is None or after is None:
            continue
        shared.setdefault(users.get(pair_of(item), pair_of(item)), []).append((before, after))
    changes = []
    for pairs in shared.values():
        change = sum(after - before for before, after in pairs)
        changes.append(change / len(pairs) if per_user_mean else change)
    return np.array(changes, dtype=np.float64)


@dataclass(frozen=True)
class HeadlineGate:
    """The gate of one judge × context × subset on the headline (prbj.analysis.check makes it a GroupCheck)."""

    before: float | None
    after: float | None
    delta_points: float | None
    paired_items: int
    # Users whose change was negative, and positive.
    lost: int
    gained: int
    p_value: float
    error_rate: float | None
    status: str
    reasons: list[str]


def check_headline_group(
    base: GroupStats,
    current: GroupStats,
    items: tuple[Scores, Scores],
    users: Mapping[str, str],
    bounds: tuple[float, float, float | None],
    headline: Headline,
    *,
    label: str,
    seed: int,
) -> HeadlineGate:
    """`items`: the baseline's and the run's item scores of this subset; `users` maps a pair id to its user;
    `bounds`: the tolerance in points, alpha, and the largest share of failed judgments (None: no bound)."""
    base_items, run_items = items
    tolerance, alpha, max_error_rate = bounds
    changes = user_changes(base_items, run_items, users, per_user_mean=headline.unit == "users")
    test = sign_flip_test(changes, seed=seed)
    before, after = headline.value(base), headline.value(current)
    delta = None if before is None or after is None else 100.0 * (after - before)
    name = headline.short
    status = "pass"
    reasons: list[str] = []
    if after is None and before is not None:
        status = "fail"
        reasons.append(f"{label}: no {name} figure (baseline {_pct(before)})")
    elif delta is not None and delta < -tolerance:
        change = (
            f"{label}: {name} {_pct(before)} → {_pct(after)} ({delta:+.1f} pts, tolerance {tolerance:g}); "
        )
        if not test.can_reject(alpha):
            # As for accuracy over pairs (prbj.analysis.check): a test that cannot reject does not decide.
            status = "fail"
            reasons.append(
                f"{change}too few users to test (on these {test.users} users the smallest p-value the sign-flip "
                f"test can give is {test.floor:.3g}, not below alpha {alpha:g}), so the drop beyond the "
                "tolerance fails on the tolerance alone"
            )
        elif test.p_value < alpha:
            status = "fail"
            reasons.append(f"{change}{test.describe()} < alpha {alpha:g}")
        else:
            status = "warn"
            reasons.append(f"{change}{test.describe()} ≥ alpha {alpha:g}: not significant, passing")
    error_rate = (current.n - (current.n_ok or 0)) / current.n if current.n else None
    if max_error_rate is not None and error_rate is not None and error_rate > max_error_rate:
        status = "fail"
        reasons.append(f"{label}: {_pct(error_rate)} of judgments failed (bound {_pct(max_error_rate)})")
    return HeadlineGate(
        before=before,
        after=after,
        delta_points=delta,
        paired_items=len(base_items.keys() & run_items.keys()),
        lost=int(np.sum(changes < 0)),
        gained=int(np.sum(changes > 0)),
        p_value=test.p_value,
        error_rate=error_rate,
        status=status,
        reasons=reasons,
    )


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"
