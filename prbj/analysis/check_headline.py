"""`prbj check` on the run's headline where it is not accuracy over pairs: user accuracy on a per-user benchmark
(a user who loses their only right answer weighs as much as one who loses ten), a card's unit of judgments, or
the card's own rules under `--protocol official` (prbj.analysis.headline).

The change in the headline between baseline and run is tested with a sign-flip test over users
(prbj.analysis.sign_flip): each user's change on the items both runs counted, summed (pairs, judgments) or as the
change in their own accuracy (users) (headline_test). prbj.analysis.check gates on that test with the decision
it makes for accuracy over pairs: FAIL when the headline dropped by more than the tolerance AND the test says so
at alpha, WARN when the test cannot tell the drop from noise, FAIL on the tolerance alone when too few users
differ for any outcome to reach alpha; the failure-rate bound as there.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from prbj.analysis.baseline import GroupKey, item_outcomes
from prbj.analysis.headline import Headline, scores_by_group
from prbj.analysis.mcnemar import McNemarResult
from prbj.analysis.sign_flip import sign_flip_test

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


def headline_test(
    items: tuple[Scores, Scores], users: Mapping[str, str], headline: Headline, *, seed: int
) -> tuple[int, McNemarResult]:
    """The sign-flip test over users of the change in the headline between `items`, the baseline's and the run's
    item scores of one subset (`users` maps a pair id to its user): how many items both counted, and the test as
    prbj.analysis.mcnemar.paired_test gives it (here `lost` and `gained` count users, `clusters` those who
    changed), for prbj.analysis.check to gate on as it gates accuracy over pairs."""
    base_items, run_items = items
    changes = user_changes(base_items, run_items, users, per_user_mean=headline.unit == "users")
    flip = sign_flip_test(changes, seed=seed)
    test = McNemarResult(
        lost=int(np.sum(changes < 0)),
        gained=int(np.sum(changes > 0)),
        p_value=flip.p_value,
        method="sign-flip",
        clusters=flip.users,
        floor=flip.floor,
        draws=flip.draws,
    )
    return len(base_items.keys() & run_items.keys()), test
