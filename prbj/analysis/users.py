"""Figures per user, beside the figures per pair: personalization is about users, and on a benchmark where one
user has many pairs, accuracy over pairs counts a user with ten pairs ten times and its bootstrap over pairs
treats ten correlated outcomes as ten independent ones.

Who a user is: the judgments' `user_id` column (prbj.data.user_columns); each pair is its own user in a run
without one (runs made before it existed: runs.rundir reads them back so), and on PRB, where every pair is its
own user; a judgment whose user id is null is its own user too.

How a judgment counts for its user, by the rules of pair accuracy (prbj.analysis.stats):
- decided = answered (status `ok`), ties included: a tie is decided and never correct;
- failed judgments (parse and API errors, budget and cache skips, …) and withheld verdicts (`abstained`) are not
  decided: they leave the user's count as they leave pair accuracy's;
- a user's accuracy = their correct / their decided judgments; **user accuracy** = the mean of those over the
  users with at least one decided judgment (macro). A user with none has no accuracy: counted in `n_users`, not
  in `n_users_decided`, and left out of the mean (as a failed pair is left out of pair accuracy).

Intervals, when users repeat (some user has two pairs or more): over users, for user accuracy and for pair
accuracy alike (prbj.analysis.clusters.accuracy_intervals: Korn–Graubard on the jackknife's variance over users
with t over K − 1, Clopper–Pearson on the effective size at 0% and 100%, none under 2 decided users). When no
user repeats, every user has one pair and the user figures are the pair figures: the same numbers, given once.

Groups: every `group:<key>` column (a user's age band, a pair's tier, …) gives accuracy per value; a
`user_seen` column gives seen and unseen users apart. These rows are summary.json's `users` section. A row of
fewer than FEW_USERS users with a decided judgment is marked (`few_users`), and every value is tested against
the rest of the key's users (prbj.analysis.group_contrasts: a permutation test keeping users' pairs together,
Holm-adjusted across the key's values), so that groups are compared through a test, not by eye.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import polars as pl

from prbj.analysis.group_contrasts import FEW_USERS, Contrast, contrasts
from prbj.analysis.stats import CONFIDENCE, accuracy_interval
from prbj.analysis.user_counts import (
    USER_KEY,
    Interval,
    UserFigures,
    group_columns,
    user_expr,
    user_figures,
    users_repeat,
)
from prbj.data.user_columns import GROUP_PREFIX, USER_SEEN

# How summary.json's `users` section names the resampling unit when users repeat.
RESAMPLED_USERS = "users"


@dataclass(frozen=True, slots=True)
class UserSlice:
    """Accuracy of one judge × context on the judgments of one group value (or of seen or unseen users)."""

    judge: str
    context: str
    group: str
    value: str
    n: int
    n_ok: int
    accuracy: float | None
    ci_low: float | None
    ci_high: float | None
    n_users: int
    n_users_decided: int
    user_accuracy: float | None
    user_ci_low: float | None
    user_ci_high: float | None
    # Fewer than FEW_USERS users with a decided judgment: a wide interval, a rank that is noise.
    few_users: bool = False
    # The value against the rest of the key's users (group_contrasts): which figure, the difference (value
    # minus rest), its permutation p-value and Holm's across the key's values; None with a single value.
    vs_rest_figure: str | None = None
    vs_rest: float | None = None
    vs_rest_p: float | None = None
    vs_rest_p_holm: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def slice_figures(
    part: pl.DataFrame, *, judge: str, context: str, group: str, value: str, seed: int, repeat: bool
) -> UserSlice:
    ok = part.filter(pl.col("status") == "ok")
    correct = int(ok["correct"].sum())
    accuracy = correct / ok.height if ok.height else None
    interval: Interval = accuracy_interval(ok["correct"].cast(pl.Float64).to_numpy(), seed=seed)
    figures = (
        user_figures(part, accuracy=accuracy, pair_interval=interval, confidence=CONFIDENCE)
        if repeat
        else _one_pair_each(part, accuracy, interval)
    )
    return UserSlice(
        judge=judge,
        context=context,
        group=group,
        value=value,
        n=part.height,
        n_ok=ok.height,
        accuracy=accuracy,
        ci_low=figures.ci_low,
        ci_high=figures.ci_high,
        n_users=figures.n_users,
        n_users_decided=figures.n_users_decided,
        user_accuracy=figures.user_accuracy,
        user_ci_low=figures.user_ci_low,
        user_ci_high=figures.user_ci_high,
        few_users=figures.n_users_decided < FEW_USERS,
    )


def _one_pair_each(part: pl.DataFrame, accuracy: float | None, interval: Interval) -> UserFigures:
    users = part.select(user_expr(part)).n_unique()
    decided = part.filter(pl.col("status") == "ok").select(user_expr(part)).n_unique()
    return UserFigures(users, decided, accuracy, *interval, *interval)


def _values(part: pl.DataFrame, column: str) -> list[tuple[str, pl.Expr]]:
    if column == USER_SEEN:
        present = set(part[column].drop_nulls().to_list())
        return [
            (name, pl.col(column) == flag)
            for flag, name in ((True, "seen"), (False, "unseen"))
            if flag in present
        ]
    values = sorted(str(v) for v in part[column].drop_nulls().unique().to_list())
    return [(value, pl.col(column).cast(pl.String) == value) for value in values]


def group_slices(
    judgments: pl.DataFrame, columns: Sequence[str], *, seed: int, repeat: bool
) -> list[UserSlice]:
    """Rows per judge × context × column × value (over every subset), in a stable order."""
    rows: list[UserSlice] = []
    for judge, context in judgments.select("judge", "context").unique(maintain_order=True).iter_rows():
        mine = judgments.filter(pl.col("judge") == judge, pl.col("context") == context)
        for column in columns:
            name = column.removeprefix(GROUP_PREFIX)
            values = _values(mine, column)
            tests = _against_the_rest(mine, [condition for _, condition in values], seed=seed)
            for (value, condition), test in zip(values, tests, strict=True):
                row = slice_figures(
                    mine.filter(condition),
                    judge=judge,
                    context=context,
                    group=name,
                    value=value,
                    seed=seed,
                    repeat=repeat,
                )
                if test is not None:
                    row = replace(
                        row,
                        vs_rest_figure=test.figure,
                        vs_rest=test.difference,
                        vs_rest_p=test.p_value,
                        vs_rest_p_holm=test.p_holm,
                    )
                rows.append(row)
    return rows


def _against_the_rest(mine: pl.DataFrame, conditions: list[pl.Expr], *, seed: int) -> list[Contrast | None]:
    """Each value's contrast with the rest, over the decided judgments with a value."""
    if len(conditions) < 2:
        return [None] * len(conditions)
    # Each judgment's value code (conditions of distinct values never overlap).
    code = pl.coalesce([pl.when(condition).then(pl.lit(i)) for i, condition in enumerate(conditions)])
    decided = mine.filter(pl.col("status") == "ok").select(
        code.alias("_value"), pl.col("correct").fill_null(False).cast(pl.Float64), user_expr(mine)
    )
    decided = decided.drop_nulls("_value")
    if decided.height == 0:
        return [None] * len(conditions)
    _, users = np.unique(decided[USER_KEY].to_numpy(), return_inverse=True)
    found = contrasts(decided["_value"].to_numpy(), decided["correct"].to_numpy(), users, seed=seed)
    return found + [None] * (len(conditions) - len(found))


def users_section(judgments: pl.DataFrame, *, seed: int) -> dict[str, Any] | None:
    """summary.json's `users` section: how many users and pairs per user, and accuracy per group value
    (`groups`) and for seen and unseen users (`seen`). None when no user repeats and the run has no group and no
    seen column, so that such a run's summary.json is what it always was."""
    repeat = users_repeat(judgments)
    groups = group_columns(judgments)
    seen = USER_SEEN in judgments.columns and judgments[USER_SEEN].drop_nulls().len() > 0
    if not (repeat or groups or seen) or judgments.height == 0:
        return None
    per_user = judgments.select(user_expr(judgments), pl.col("pair_id")).unique().group_by(USER_KEY).len()
    section: dict[str, Any] = {
        "n_users": per_user.height,
        "max_pairs_per_user": int(per_user["len"].max() or 0),  # type: ignore[arg-type]  # a count column
        "resampled": RESAMPLED_USERS if repeat else "pairs",
    }
    if groups:
        section["groups"] = [
            row.as_dict() for row in group_slices(judgments, groups, seed=seed, repeat=repeat)
        ]
    if seen:
        section["seen"] = [
            row.as_dict() for row in group_slices(judgments, [USER_SEEN], seed=seed, repeat=repeat)
        ]
    return section
