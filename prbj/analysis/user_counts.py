"""Who each judgment's user is, and the figures per user of one group of judgments: user accuracy (the mean
over users of each user's accuracy) and the intervals over users. prbj.analysis.stats puts them in every results
row where users repeat; prbj.analysis.users adds the per-group and seen/unseen rows. The rules are in
prbj.analysis.users' docstring."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import polars as pl

from prbj.analysis.clusters import accuracy_intervals
from prbj.data.user_columns import GROUP_PREFIX, USER_ID

# The column user_expr names: who each judgment's user is.
USER_KEY = "_user"
# A null user id becomes this plus the pair id: its own user, never mistaken for a real user's id.
_PAIR_AS_USER = "\x00pair:"

Interval = tuple[float | None, float | None]


def user_expr(frame: pl.DataFrame) -> pl.Expr:
    """Each judgment's user, as the column `_user`."""
    if USER_ID not in frame.columns:
        return pl.col("pair_id").alias(USER_KEY)
    own = pl.concat_str(pl.lit(_PAIR_AS_USER), pl.col("pair_id"))
    return pl.col(USER_ID).cast(pl.String).fill_null(own).alias(USER_KEY)


def users_repeat(frame: pl.DataFrame) -> bool:
    """Whether some user has more than one pair in these judgments (never, without a user_id column)."""
    if USER_ID not in frame.columns or frame.height == 0:
        return False
    # Each pair its own user, its id the pair's (PRB, and runs from before users were recorded): one cheap pass.
    if bool(frame.select((pl.col(USER_ID) == pl.col("pair_id")).all()).item()):
        return False
    pairs = frame.select(user_expr(frame), pl.col("pair_id")).unique()
    return pairs.height > pairs[USER_KEY].n_unique()


def users_of_pairs(frame: pl.DataFrame) -> dict[str, str]:
    """pair id → user, for the pairs of these judgments."""
    rows = frame.select(pl.col("pair_id"), user_expr(frame)).unique("pair_id", keep="first")
    return dict(zip(rows["pair_id"].to_list(), rows[USER_KEY].to_list(), strict=True))


def group_columns(frame: pl.DataFrame) -> list[str]:
    return sorted(c for c in frame.columns if c.startswith(GROUP_PREFIX))


@dataclass(frozen=True, slots=True)
class UserCounts:
    """Per user: decided judgments and correct ones (users with no decided judgment included, at 0)."""

    correct: np.ndarray
    decided: np.ndarray

    @classmethod
    def of(cls, frame: pl.DataFrame) -> UserCounts:
        decided = pl.col("status") == "ok"
        per_user = frame.group_by(user_expr(frame)).agg(
            decided.sum().alias("decided"),
            (decided & pl.col("correct").fill_null(False)).sum().alias("correct"),
        )
        return cls(
            per_user["correct"].to_numpy().astype(np.int64), per_user["decided"].to_numpy().astype(np.int64)
        )

    @property
    def users(self) -> int:
        return int(self.decided.size)

    @property
    def users_decided(self) -> int:
        return int((self.decided > 0).sum())

    @property
    def one_each(self) -> bool:
        """Whether every user with a decided judgment has exactly one: then user figures are pair figures."""
        return not self.decided.size or int(self.decided.max()) <= 1

    def mean_accuracy(self) -> float | None:
        """The mean over users of each user's accuracy, rounded once from its exact value (so that a hand
        computation with fractions gives the very same float)."""
        keep = self.decided > 0
        if not keep.any():
            return None
        kinds, counts = np.unique(
            np.column_stack([self.correct[keep], self.decided[keep]]), axis=0, return_counts=True
        )
        total = sum(
            (Fraction(int(c), int(n)) * int(k) for (c, n), k in zip(kinds, counts, strict=True)), Fraction(0)
        )
        return float(total / int(counts.sum()))


@dataclass(frozen=True, slots=True)
class UserFigures:
    n_users: int
    n_users_decided: int
    user_accuracy: float | None
    user_ci_low: float | None
    user_ci_high: float | None
    # The interval of pair accuracy, resampling users.
    ci_low: float | None
    ci_high: float | None


def user_figures(
    frame: pl.DataFrame, *, accuracy: float | None, pair_interval: Interval, confidence: float
) -> UserFigures:
    """User accuracy and both intervals over users for one group of judgments; `accuracy` and `pair_interval`
    are the group's pair figures, which are also the user figures when each user has one decided judgment.
    Under 2 users with a decided judgment there is no interval (prbj.analysis.clusters.accuracy_intervals)."""
    counts = UserCounts.of(frame)
    if counts.one_each:
        low, high = pair_interval
        return UserFigures(counts.users, counts.users_decided, accuracy, low, high, low, high)
    found = accuracy_intervals(counts.correct, counts.decided, confidence=confidence)
    if found is None:
        return UserFigures(counts.users, counts.users_decided, counts.mean_accuracy(), None, None, None, None)
    return UserFigures(
        counts.users,
        counts.users_decided,
        counts.mean_accuracy(),
        *found.mean_of_clusters,
        *found.pooled,
    )
