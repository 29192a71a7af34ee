"""Is a group's accuracy different from the rest of the users'? One test per value of a group key (against all
other values together), Holm-adjusted across the key's values, so that per-group rows are never compared by eye
alone (issue 43 item 7).

The test is a permutation test that keeps each user's pairs together:
- a key that is a property of the user (every user's pairs carry one value: an age band) compares **user
  accuracy** (the mean over users of each user's accuracy) of the value's users with the other users', and
  permutes the values among users;
- a key that is a property of the pair (a user's pairs carry several values: a difficulty tier) compares **pair
  accuracy** of the value's pairs with the other pairs', and permutes the values among the pairs of each user
  (who then serves as their own control).
Under "the value does not matter" the permuted labels are as likely as the real ones, so the p-value,
(1 + permutations at least as far from 0) / (1 + PERMUTATIONS), keeps its level at any number of users; the
permutations come from a seeded generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prbj.analysis.compare import holm

PERMUTATIONS = 1000
# Groups with fewer users than this are marked in every table (their interval is wide, their rank noise).
FEW_USERS = 10
# Permutations drawn at once: bounds the memory of a block (permutations × users or pairs).
_BLOCK = 100


@dataclass(frozen=True, slots=True)
class Contrast:
    """A value against the rest: the difference in `figure` (value minus rest), its permutation p-value and
    the Holm-adjusted one."""

    figure: str
    difference: float
    p_value: float
    p_holm: float


def _p_value(observed: np.ndarray, permuted: np.ndarray) -> np.ndarray:
    """Two-sided permutation p-values per column (a value), rows being permutations."""
    far = np.abs(permuted) >= np.abs(observed)[None, :] - 1e-12
    return (1.0 + far.sum(axis=0)) / (1.0 + permuted.shape[0])


def _differences(labels: np.ndarray, outcomes: np.ndarray, weights: np.ndarray, values: int) -> np.ndarray:
    """Per row of `labels` (codes 0 … values − 1) and per value: the weighted mean of `outcomes` where the label
    is the value minus where it is not (NaN when either side is empty)."""
    inside = np.stack([(labels == v) for v in range(values)], axis=-1).astype(np.float64)
    own_weight = np.einsum("...kv,k->...v", inside, weights)
    own_sum = np.einsum("...kv,k->...v", inside, weights * outcomes)
    total_weight, total_sum = float(weights.sum()), float((weights * outcomes).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return own_sum / own_weight - (total_sum - own_sum) / (total_weight - own_weight)


def between_users(values: np.ndarray, accuracy: np.ndarray, *, seed: int) -> list[tuple[float, float]]:
    """Per value code (0 … V − 1) of users' values: (user accuracy of the value − of the rest, p-value),
    permuting values among users."""
    count = int(values.max()) + 1
    ones = np.ones(values.size)
    observed = _differences(values, accuracy, ones, count)
    rng = np.random.default_rng(seed)
    blocks = []
    for start in range(0, PERMUTATIONS, _BLOCK):
        rows = min(_BLOCK, PERMUTATIONS - start)
        shuffled = rng.permuted(np.broadcast_to(values, (rows, values.size)), axis=1)
        blocks.append(_differences(shuffled, accuracy, ones, count))
    p_values = _p_value(observed, np.concatenate(blocks))
    return [(float(d), float(p)) for d, p in zip(observed, p_values, strict=True)]


def within_users(
    values: np.ndarray, correct: np.ndarray, users: np.ndarray, *, seed: int
) -> list[tuple[float, float]]:
    """Per value code of pairs' values: (pair accuracy of the value − of the rest, p-value), permuting values
    among the pairs of each user.

    Within-user permutations leave every value's number of pairs unchanged and move only the right ones: the
    right pairs of a user that fall on each value are a multivariate hypergeometric draw from the user's values,
    drawn value by value for all users and permutations at once, so no pair is shuffled."""
    count = int(values.max()) + 1
    weight = np.bincount(values, minlength=count).astype(np.float64)
    observed_sums = np.bincount(values, correct, minlength=count)
    size = int(users.max()) + 1
    # Per user: how many pairs carry each value, and how many of those are right.
    colours = np.zeros((size, count), dtype=np.int64)
    np.add.at(colours, (users, values), 1)
    right_by_value = np.zeros((size, count))
    np.add.at(right_by_value, (users, values), correct)
    right = right_by_value.sum(axis=1).round().astype(np.int64)
    # Users whose right pairs could fall on other values: several values, some right and some wrong.
    mixed = (np.count_nonzero(colours, axis=1) > 1) & (right > 0) & (right < colours.sum(axis=1))
    sums = np.tile(right_by_value[~mixed].sum(axis=0), (PERMUTATIONS, 1))
    rng = np.random.default_rng(seed)
    left_to_draw = np.tile(right[mixed], (PERMUTATIONS, 1))
    left_in_urn = colours[mixed].sum(axis=1)
    for value in range(count - 1):
        good = colours[mixed, value]
        left_in_urn = left_in_urn - good
        empty = good + left_in_urn == 0
        drawn = rng.hypergeometric(good, np.where(empty, 1, left_in_urn), left_to_draw)
        drawn = np.where(empty, 0, drawn)
        sums[:, value] += drawn.sum(axis=1)
        left_to_draw = left_to_draw - drawn
    sums[:, count - 1] += left_to_draw.sum(axis=1)
    total_weight, total_sum = float(weight.sum()), float(correct.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = observed_sums / weight - (total_sum - observed_sums) / (total_weight - weight)
        permuted = sums / weight - (total_sum - sums) / (total_weight - weight)
    p_values = _p_value(observed, permuted)
    return [(float(d), float(p)) for d, p in zip(observed, p_values, strict=True)]


def contrasts(
    values: np.ndarray, correct: np.ndarray, users: np.ndarray, *, seed: int
) -> list[Contrast | None]:
    """One contrast per value code of these decided pairs (aligned arrays: the pair's value code, 1 or 0, its
    user code), Holm-adjusted across the values; None for a value with no pair or when the key has one
    value."""
    values = np.asarray(values, dtype=np.int64)
    if values.size == 0 or np.unique(values).size < 2:
        return [None] * (int(values.max()) + 1 if values.size else 0)
    correct = np.asarray(correct, dtype=np.float64)
    users = np.asarray(users, dtype=np.int64)
    per_user_values = np.unique(np.c_[users, values], axis=0)
    if per_user_values.shape[0] == np.unique(users).size:
        # One value per user: user accuracy, values permuted among users.
        right = np.bincount(users, correct)
        decided = np.bincount(users)
        present = decided > 0
        own = np.zeros(decided.size, dtype=np.int64)
        own[per_user_values[:, 0]] = per_user_values[:, 1]
        found = between_users(own[present], right[present] / decided[present], seed=seed)
        figure = "user accuracy"
    else:
        found = within_users(values, correct, users, seed=seed)
        figure = "pair accuracy"
    finite = [i for i, (d, _) in enumerate(found) if np.isfinite(d)]
    adjusted = holm([found[i][1] for i in finite])
    out: list[Contrast | None] = [None] * len(found)
    for index, p_holm in zip(finite, adjusted, strict=True):
        difference, p_value = found[index]
        out[index] = Contrast(figure, difference, p_value, p_holm)
    return out
