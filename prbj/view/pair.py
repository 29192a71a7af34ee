"""The Pair page: one pair as each judge saw it, every judge's reply in each order with its verdict and quoted
passages marked, the reviewers' labels, and the way to the previous and next pair of the current selection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from prbj.context.retrieval import rank_profile
from prbj.data.labels import Label, latest_labels
from prbj.data.schema import Pair
from prbj.judges.positions import seeded_position
from prbj.judges.verdict import REPLY_SEPARATOR
from prbj.view.catalog import Catalog, LoadedRun
from prbj.view.links import Links
from prbj.view.marks import Piece, mark_reply
from prbj.view.query import Query
from prbj.view.table import select
from prbj.view.user import user_of

# Posts an LLM judge sees in the profile context by default (--profile-k); the rest are listed below them.
SHOWN_POSTS = 10
# Columns other parts of prbj add, shown on a judge's card when the run has them.
EXTRA_FIELDS = ("cause", "p_chosen", "confidence", "confidence_source", "sample_verdicts", "sample_index")


@dataclass(frozen=True)
class Call:
    label: str
    pieces: list[Piece]


def display_order(rows: list[dict[str, Any]], pair_id: str, seed: int) -> str:
    """Which answer the page shows as A: as the first judge that saw one order saw it, else a seeded draw."""
    for row in rows:
        if row.get("chosen_position") in ("A", "B"):
            return "chosen" if row["chosen_position"] == "A" else "rejected"
    # The position prbj's own draw gives the pair (prbj.judges.orders.assign_positions).
    return "chosen" if seeded_position(seed, pair_id) == "A" else "rejected"


def _call_labels(row: dict[str, Any], count: int) -> list[str]:
    position = row.get("chosen_position")
    if position == "both" and count == 2:
        return ["chosen shown as A", "chosen shown as B"]
    if position in ("A", "B") and count == 1:
        return [f"chosen shown as {position}"]
    if position is None and count == 2:
        return ["chosen answer scored alone", "rejected answer scored alone"]
    return [f"call {i}" for i in range(1, count + 1)]


def judge_card(row: dict[str, Any], pair: Pair | None) -> dict[str, Any]:
    reply = row.get("reply")
    texts = reply.split(REPLY_SEPARATOR) if reply else []
    shown = list(pair.candidates) if pair is not None else []
    calls = [
        Call(label, mark_reply(text, shown))
        for label, text in zip(_call_labels(row, len(texts)), texts, strict=True)
    ]
    ok = row.get("status") == "ok"
    outcome = "failed" if not ok else "correct" if row.get("correct") else "wrong"
    # A sample index of 0 is every ordinary call's; only a re-asked one (--retry-failed) says something.
    extras = {name: row[name] for name in EXTRA_FIELDS if row.get(name) not in (None, 0)}
    return {"row": row, "outcome": outcome, "calls": calls, "extras": extras}


def best_of_k_answers(pair: Pair) -> list[tuple[str, str, str]]:
    """(slot, which, text) of every candidate of a best-of-k item, numbered from 1 in the benchmark's order with
    the preferred one first (as `score_chosen` and `score_rejected`, the best of the others, refer to them)."""
    return [
        (str(n), "chosen" if n == 1 else "rejected", text) for n, text in enumerate(pair.candidates, start=1)
    ]


def selection_order(catalog: Catalog, run: LoadedRun, query: Query) -> pl.Series:
    """The pair ids of the current selection, in its order, each once."""
    frame = select(catalog, run, query).frame.select("pair_id").unique(maintain_order=True).collect()
    return frame["pair_id"]


def _neighbours(ids: pl.Series, pair_id: str) -> tuple[str | None, str | None, int, int]:
    """Previous and next pair id in the selection's order, this pair's place (1-based) and the count."""
    found = ids.index_of(pair_id)
    if found is None:
        return None, None, 0, len(ids)
    place = int(found)
    before = ids[place - 1] if place > 0 else None
    after = ids[place + 1] if place + 1 < len(ids) else None
    return before, after, place + 1, len(ids)


def pair_page(
    catalog: Catalog,
    run: LoadedRun,
    pair_id: str,
    query: Query,
    links: Links,
    *,
    labels: list[Label],
    blind: bool = False,
    order: pl.Series | None = None,
) -> dict[str, Any] | None:
    """The page's content, or None when the run never judged this pair. `order`: the selection's pair ids when
    the caller has them already (the bundle writes every pair of one selection)."""
    rows = run.data.judgments.filter(pl.col("pair_id") == pair_id).sort(["judge", "context"]).to_dicts()
    if not rows:
        return None
    pair = run.pair(pair_id)
    seed = run.data.summary.get("seed")
    in_a = display_order(rows, pair_id, seed if isinstance(seed, int) else 0)
    answers = []
    if pair is not None and pair.others:
        answers = best_of_k_answers(pair)
    elif pair is not None:
        texts = {"chosen": pair.chosen, "rejected": pair.rejected}
        in_b = "rejected" if in_a == "chosen" else "chosen"
        answers = [("A", in_a, texts[in_a]), ("B", in_b, texts[in_b])]
    ranked = rank_profile(pair.question, pair.profile) if pair is not None else []
    ids = order if order is not None else selection_order(catalog, run, query)
    before, after, place, count = _neighbours(ids, pair_id)
    key = run.entry.key
    mine = [label for label in labels if label.pair_id == pair_id]
    user_id = user_of(run, pair_id)
    return {
        "title": f"{pair_id} · {run.entry.run_id}",
        "run": run.entry,
        "pair_id": pair_id,
        "subset": rows[0]["subset"],
        "user_id": user_id,
        "user_link": links.user(key, user_id) if user_id is not None else None,
        "pair": pair,
        "pairs_note": run.pairs.note,
        "answers": answers,
        "shown_as_a": in_a,
        "profile": [(rank, post, rank <= SHOWN_POSTS) for rank, post in enumerate(ranked, start=1)],
        "aspects": run.planner.get(pair_id, []),
        "judges": [judge_card(row, pair) for row in rows],
        "labels": sorted(latest_labels(mine).values(), key=lambda label: label.time),
        "label_history": len(mine),
        "blind": blind,
        "query": query,
        "place": place,
        "count": count,
        "prev": links.pair(key, before, query, **_flags(blind)) if before else None,
        "next": links.pair(key, after, query, **_flags(blind)) if after else None,
        "back": links.judgments(key, query),
        # A label says which of two answers fits: a best-of-k item has no two to choose between.
        "label_action": links.label(key, pair_id, query) if pair is None or not pair.others else None,
        "best_of": pair.k if pair is not None and pair.others else None,
        "blind_link": links.pair(key, pair_id, query, **_flags(not blind)) if links.live else None,
    }


def _flags(blind: bool) -> dict[str, str]:
    return {"blind": "1"} if blind else {}
