"""The User page of a per-user run: the user's history as a judge sees it in the `profile` context (through the
pair's guarded judge view, so never the scoring standard), their groups, their test items with each judge's
outcome, and how each judge did for them (their user accuracy, as prbj.analysis.users counts it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from prbj.analysis.user_counts import users_of_pairs, users_repeat
from prbj.data.schema import Context, JudgeView
from prbj.data.user_columns import GROUP_PREFIX, USER_ID, USER_SEEN
from prbj.view.catalog import LoadedRun
from prbj.view.links import Links

# The context whose view of a pair the page shows: what a judge reads about the user.
PROFILE_CONTEXT: Context = "profile"
QUESTION_CHARS = 160


@dataclass(frozen=True)
class JudgeRecord:
    judge: str
    context: str
    n: int
    decided: int
    correct: int

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.decided if self.decided else None


# Per run's judgments frame (by identity, the frame kept alongside): pair id → user, or None when no user has
# two pairs (PRB: the user page would be the pair page again). Computed once, read by every pair page.
_PAIR_USERS: dict[int, tuple[pl.DataFrame, dict[str, str] | None]] = {}


def pair_users(run: LoadedRun) -> dict[str, str] | None:
    frame = run.data.judgments
    found = _PAIR_USERS.get(id(frame))
    if found is None or found[0] is not frame:
        users = users_of_pairs(frame.filter(pl.col(USER_ID).is_not_null())) if users_repeat(frame) else None
        found = _PAIR_USERS[id(frame)] = (frame, users)
    return found[1]


def user_of(run: LoadedRun, pair_id: str) -> str | None:
    """The user of a pair in a run whose users have several pairs; None otherwise."""
    users = pair_users(run)
    return users.get(pair_id) if users is not None else None


def user_ids(run: LoadedRun) -> list[str]:
    users = pair_users(run)
    return sorted(set(users.values())) if users is not None else []


def _outcome(row: dict[str, Any]) -> str:
    if row["status"] != "ok":
        return "abstained" if row["status"] == "abstained" else "failed"
    if row.get("tie"):
        return "tie"
    return "correct" if row.get("correct") else "wrong"


def _records(mine: pl.DataFrame) -> list[JudgeRecord]:
    decided = pl.col("status") == "ok"
    table = (
        mine.group_by("judge", "context", maintain_order=True)
        .agg(
            pl.len().alias("n"),
            decided.sum().alias("decided"),
            (decided & pl.col("correct").fill_null(False)).sum().alias("correct"),
        )
        .sort("judge", "context")
    )
    return [JudgeRecord(j, c, int(n), int(d), int(k)) for j, c, n, d, k in table.iter_rows()]


def _attributes(mine: pl.DataFrame) -> list[tuple[str, str]]:
    """The user's group values and whether they were seen in training, as the judgments record them."""
    out = []
    for column in sorted(c for c in mine.columns if c.startswith(GROUP_PREFIX)):
        values = sorted({str(v) for v in mine[column].drop_nulls().to_list()})
        if values:
            out.append((column.removeprefix(GROUP_PREFIX), ", ".join(values)))
    if USER_SEEN in mine.columns and mine[USER_SEEN].drop_nulls().len():
        out.append(("seen in training", "yes" if bool(mine[USER_SEEN].drop_nulls()[0]) else "no"))
    return out


def _profile_view(run: LoadedRun, pair_ids: list[str]) -> JudgeView | None:
    """What a judge is shown about the user with the first of their pairs the run can read, in the `profile`
    context: the guarded view, which refuses the scoring standard."""
    for pair_id in pair_ids:
        pair = run.pair(pair_id)
        if pair is not None:
            return pair.view(PROFILE_CONTEXT)
    return None


def user_page(run: LoadedRun, user_id: str, links: Links) -> dict[str, Any] | None:
    """The page's content, or None when the run has no such user (or its users have one pair each)."""
    if pair_users(run) is None:
        return None
    mine = run.data.judgments.filter(pl.col(USER_ID) == user_id)
    if mine.height == 0:
        return None
    key = run.entry.key
    entries = sorted(set(mine.select("judge", "context").iter_rows()))
    pair_ids = mine["pair_id"].unique(maintain_order=True).sort().to_list()
    items = []
    for pair_id in pair_ids:
        rows = mine.filter(pl.col("pair_id") == pair_id)
        outcomes = {(r["judge"], r["context"]): _outcome(r) for r in rows.iter_rows(named=True)}
        pair = run.pair(pair_id)
        question = pair.question if pair is not None else ""
        items.append(
            {
                "pair_id": pair_id,
                "link": links.pair(key, pair_id),
                "subset": rows["subset"][0],
                "question": question
                if len(question) <= QUESTION_CHARS
                else question[: QUESTION_CHARS - 1] + "…",
                "outcomes": [outcomes.get(entry, "") for entry in entries],
            }
        )
    view = _profile_view(run, pair_ids)
    return {
        "title": f"user {user_id} · {run.entry.run_id}",
        "run": run.entry,
        "user_id": user_id,
        "attributes": _attributes(mine),
        "profile": view.user_profile if view is not None else None,
        "profile_pair": view.pair_id if view is not None else None,
        "pairs_note": run.pairs.note,
        "entries": [f"{judge} · {context}" for judge, context in entries],
        "items": items,
        "records": _records(mine),
    }
