"""The judgments page's state: filters, sort and page, read from a URL's query and written back into links,
and applied to a run's judgments with Polars (server side: a page never ships the whole table).

Each filter narrows the judgments one way; together they are ANDed:
    judge, context, subset, status   the row's value is one of those given (repeatable)
    outcome    correct (status ok and correct), wrong (status ok and not correct: ties too), abstained (a
               verdict withheld by --selective), failed (a failed status of data.status; a dry run is neither)
    inconsistent   the verdict is `inconsistent` (--order both: the two orders picked different answers)
    disagree   the pair's ok judgments among the selected judges and contexts are not all correct or all wrong
    changed    the judgment's status, verdict or correctness differs in the other run named (same dataset)
    q          the text occurs (case-insensitive) in the pair's question, profile posts or either answer
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import polars as pl

from prbj.data.status import ABSTAINED, FAILED_STATUSES

OUTCOMES = ("correct", "wrong", "abstained", "failed")
PAGE_SIZE = 50
# The table's columns, when the run has them; other engineers' columns (cause, p_chosen, confidence) join
# when present.
TABLE_COLUMNS = (
    "pair_id",
    "subset",
    "judge",
    "context",
    "status",
    "cause",
    "verdict",
    "correct",
    "chosen_position",
    "margin",
    "p_chosen",
    "confidence",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "latency_s",
)
# Sortable columns; anything else in a URL falls back to the default order.
SORTABLE = tuple(c for c in TABLE_COLUMNS if c not in ("cause", "chosen_position"))
KEY = ("pair_id", "judge", "context")
_LISTS = {"judge": "judges", "context": "contexts", "subset": "subsets", "status": "statuses"}
MAX_TEXT = 200


@dataclass(frozen=True)
class Query:
    judges: tuple[str, ...] = ()
    contexts: tuple[str, ...] = ()
    subsets: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    outcome: str | None = None
    inconsistent: bool = False
    disagree: bool = False
    changed: str | None = None
    text: str = ""
    sort: str = "pair_id"
    descending: bool = False
    page: int = 1

    @classmethod
    def from_params(cls, params: Mapping[str, Sequence[str]]) -> Query:
        """From a URL query (name → values); values that make no sense are dropped, never an error page."""

        def first(name: str) -> str:
            values = params.get(name) or []
            return values[0] if values else ""

        lists = {
            attr: tuple(dict.fromkeys(v for v in params.get(name) or [] if v))
            for name, attr in _LISTS.items()
        }
        outcome = first("outcome")
        page = first("page")
        sort = first("sort")
        return cls(
            **lists,
            outcome=outcome if outcome in OUTCOMES else None,
            inconsistent=first("inconsistent") == "1",
            disagree=first("disagree") == "1",
            changed=first("changed") or None,
            text=first("q").strip()[:MAX_TEXT],
            sort=sort if sort in SORTABLE else "pair_id",
            descending=first("desc") == "1",
            page=int(page) if page.isdigit() and 0 < int(page) < 1_000_000 else 1,
        )

    def params(self, **changes: Any) -> list[tuple[str, str]]:
        """The query as URL parameters, defaults left out, with `changes` applied (a page number, a sort)."""
        query = replace(self, **changes) if changes else self
        out: list[tuple[str, str]] = []
        for name, attr in _LISTS.items():
            out.extend((name, value) for value in getattr(query, attr))
        if query.outcome:
            out.append(("outcome", query.outcome))
        for name in ("inconsistent", "disagree"):
            if getattr(query, name):
                out.append((name, "1"))
        if query.changed:
            out.append(("changed", query.changed))
        if query.text:
            out.append(("q", query.text))
        if query.sort != "pair_id":
            out.append(("sort", query.sort))
        if query.descending:
            out.append(("desc", "1"))
        if query.page != 1:
            out.append(("page", str(query.page)))
        return out

    @property
    def is_filtered(self) -> bool:
        defaults = Query()
        return any(
            getattr(self, f.name) != getattr(defaults, f.name)
            for f in fields(self)
            if f.name not in ("sort", "descending", "page")
        )


def _is_in(column: str, values: Iterable[str]) -> pl.Expr:
    return pl.col(column).is_in(list(values))


def outcome_expr(outcome: str) -> pl.Expr:
    ok = pl.col("status") == "ok"
    if outcome == "correct":
        return ok & pl.col("correct").fill_null(False)
    if outcome == "wrong":
        return ok & ~pl.col("correct").fill_null(False)
    if outcome == "abstained":
        return pl.col("status") == ABSTAINED
    # Counted as the run's figures count them: an abstention is not a failure.
    return _is_in("status", FAILED_STATUSES)


def disagreeing_pairs(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Pair ids whose ok judgments in `frame` are neither all correct nor all wrong."""
    return (
        frame.filter(pl.col("status") == "ok")
        .group_by("pair_id")
        .agg(pl.col("correct").fill_null(False).n_unique().alias("outcomes"))
        .filter(pl.col("outcomes") > 1)
        .select("pair_id")
    )


def matching_pairs(texts: pl.DataFrame, needle: str) -> pl.LazyFrame:
    """Pair ids whose searchable text (lower-cased question, profile and answers) holds `needle`."""
    return texts.lazy().filter(pl.col("text").str.contains(needle.lower(), literal=True)).select("pair_id")


def apply(
    judgments: pl.DataFrame,
    query: Query,
    *,
    texts: pl.DataFrame | None = None,
    changed: pl.DataFrame | None = None,
) -> pl.LazyFrame:
    """The judgments that pass every filter of `query`, sorted; `texts` (pair_id, text) serves the text
    search and `changed` (pair_id, judge, context) the changed-against-another-run filter."""
    frame = judgments.lazy()
    for column, values in (
        ("judge", query.judges),
        ("context", query.contexts),
        ("subset", query.subsets),
    ):
        if values:
            frame = frame.filter(_is_in(column, values))
    if query.disagree:
        frame = frame.join(disagreeing_pairs(frame), on="pair_id", how="semi")
    if query.statuses:
        frame = frame.filter(_is_in("status", query.statuses))
    if query.outcome:
        frame = frame.filter(outcome_expr(query.outcome))
    if query.inconsistent:
        frame = frame.filter(pl.col("verdict") == "inconsistent")
    if query.changed is not None and changed is not None:
        frame = frame.join(changed.lazy().select(KEY), on=list(KEY), how="semi")
    if query.text:
        if texts is None:
            frame = frame.filter(pl.lit(False))
        else:
            frame = frame.join(matching_pairs(texts, query.text), on="pair_id", how="semi")
    return sort(frame, query, judgments.columns)


def sort(frame: pl.LazyFrame, query: Query, columns: Sequence[str]) -> pl.LazyFrame:
    by = [query.sort] if query.sort in columns else []
    tie_break = [c for c in KEY if c not in by]
    return frame.sort(
        [*by, *tie_break],
        descending=[query.descending] * len(by) + [False] * len(tie_break),
        nulls_last=True,
        maintain_order=True,
    )


@dataclass(frozen=True)
class Page:
    rows: list[dict[str, Any]]
    total: int
    number: int
    pages: int


def page_of(selected: pl.LazyFrame, number: int, columns: Sequence[str]) -> Page:
    """One page of the selection: only its rows (and only `columns`) are collected, plus the count."""
    total = selected.select(pl.len()).collect().item()
    pages = max(1, -(-total // PAGE_SIZE))
    number = min(number, pages)
    rows = selected.slice((number - 1) * PAGE_SIZE, PAGE_SIZE).select(columns).collect().to_dicts()
    return Page(rows, total, number, pages)
