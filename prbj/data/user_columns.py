"""Who each pair's user is, as columns of judgments.parquet: the per-user statistics read them from the run alone.

    user_id        String, on every run written since users were recorded (the pair's own id where a benchmark
                   has no users)
    group:<key>    String, one per group key of the dataset (`groups` of the per-user layout), null where a
                   user has no value for that key
    user_seen      Boolean, only where the benchmark says whether a user appears in its training data
    candidates     Int64, the item's number of answers (2 for a pair), only where some item is best-of-k

A run written before users were recorded has no `user_id`: `with_user_ids` gives each pair its own user, which is
what such a run's benchmark (one pair per user) means.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from prbj.data.schema import Pair

USER_ID = "user_id"
GROUP_PREFIX = "group:"
USER_SEEN = "user_seen"
CANDIDATES = "candidates"


def group_column(key: str) -> str:
    return f"{GROUP_PREFIX}{key}"


def is_user_column(name: str) -> bool:
    """A column that says who a pair's user is (copied as is onto rows derived from that pair's judgments)."""
    return name in (USER_ID, USER_SEEN, CANDIDATES) or name.startswith(GROUP_PREFIX)


def user_columns(pairs: Sequence[Pair]) -> pl.DataFrame:
    """One row per pair: `pair_id`, `user_id`, a `group:<key>` column per group key any pair has, and
    `user_seen` when any pair's benchmark says it; joined onto the judgments once per frame."""
    keys = sorted({key for pair in pairs for key, _ in pair.groups})
    columns: dict[str, list[object]] = {"pair_id": [p.id for p in pairs], USER_ID: [p.user_id for p in pairs]}
    schema: dict[str, pl.DataType | type[pl.DataType]] = {"pair_id": pl.String, USER_ID: pl.String}
    for key in keys:
        columns[group_column(key)] = [dict(p.groups).get(key) for p in pairs]
        schema[group_column(key)] = pl.String
    if any(p.seen is not None for p in pairs):
        columns[USER_SEEN] = [p.seen for p in pairs]
        schema[USER_SEEN] = pl.Boolean
    if any(p.others for p in pairs):
        columns[CANDIDATES] = [p.k for p in pairs]
        schema[CANDIDATES] = pl.Int64
    return pl.DataFrame(columns, schema=schema)


def with_user_ids(judgments: pl.DataFrame) -> pl.DataFrame:
    """The judgments with a `user_id` column: as recorded, or (a run from before users were recorded) each pair
    its own user."""
    if USER_ID in judgments.columns or "pair_id" not in judgments.columns:
        return judgments
    return judgments.with_columns(pl.col("pair_id").cast(pl.String).alias(USER_ID))
