"""The Judgments page: the run's judgments filtered, sorted and paged on the server, the filter form's choices,
and the export of a whole selection (JSONL or CSV)."""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass
from typing import Any

import polars as pl

from prbj.data.csv_cells import neutralise_frame
from prbj.data.labels import human_preference, latest_labels
from prbj.data.status import STATUSES
from prbj.errors import DataError
from prbj.report.fmt import short_subset
from prbj.runs import rundir
from prbj.runs.show_command import changed_verdicts
from prbj.view.catalog import Catalog, LoadedRun
from prbj.view.links import Links
from prbj.view.query import OUTCOMES, SORTABLE, TABLE_COLUMNS, Query, apply, page_of

# Column headers short enough for the table to fit a laptop's screen.
HEADERS = {
    "pair_id": "pair",
    "chosen_position": "chosen as",
    "prompt_tokens": "in tok",
    "completion_tokens": "out tok",
    "cost_usd": "$",
    "latency_s": "s",
}
# The long texts stay out of CSV exports (JSONL keeps every column).
_LONG = ("reply", "context_block")


@dataclass(frozen=True)
class Selection:
    frame: pl.LazyFrame
    # Why a filter could not be applied as asked (another run on other data); None when all were.
    note: str | None


def changed_keys(catalog: Catalog, run: LoadedRun, other_key: str) -> tuple[pl.DataFrame | None, str | None]:
    other = catalog.runs.get(other_key)
    if other is None or other_key == run.entry.key:
        return None, f"no other run {other_key!r} to compare with"
    if other.fingerprint != run.entry.fingerprint:
        return None, f"{other.run_id} was made on other data: its verdicts cannot be compared pair by pair"
    try:
        theirs = catalog.load(other_key).data.judgments
    except DataError as err:
        return None, str(err)
    return changed_verdicts(run.data.judgments, theirs), None


def select(catalog: Catalog, run: LoadedRun, query: Query) -> Selection:
    changed, note = (None, None)
    if query.changed is not None:
        changed, note = changed_keys(catalog, run, query.changed)
    frame = apply(run.data.judgments, query, texts=run.texts, changed=changed)
    if query.text and run.texts is None:
        note = f"text search needs the run's dataset: {run.pairs.note}"
    return Selection(frame, note)


def _row(row: dict[str, Any], link: str) -> dict[str, Any]:
    return {**row, "_link": link, "_subset": short_subset(str(row.get("subset")), terse=True)}


def _choices(frame: pl.DataFrame, column: str) -> list[str]:
    return sorted(v for v in frame[column].unique().to_list() if v is not None)


def judgments_page(catalog: Catalog, run: LoadedRun, query: Query, links: Links) -> dict[str, Any]:
    judgments = run.data.judgments
    selection = select(catalog, run, query)
    columns = [c for c in TABLE_COLUMNS if c in judgments.columns]
    page = page_of(selection.frame, query.page, columns)
    key = run.entry.key
    statuses = list(dict.fromkeys([*STATUSES, *_choices(judgments, "status")]))
    others = [
        entry
        for entry in catalog.runs.values()
        if entry.key != key and entry.header is not None and entry.fingerprint == run.entry.fingerprint
    ]
    return {
        "title": f"Judgments · {run.entry.run_id}",
        "run": run.entry,
        "query": query,
        "page": page,
        "columns": columns,
        "headers": {column: HEADERS.get(column, column) for column in columns},
        "rows": [_row(row, links.pair(key, row["pair_id"], query)) for row in page.rows],
        "note": selection.note,
        "choices": {
            "judge": _choices(judgments, "judge"),
            "context": _choices(judgments, "context"),
            "subset": _choices(judgments, "subset"),
            "status": statuses,
            "outcome": list(OUTCOMES),
            "sort": [c for c in SORTABLE if c in judgments.columns],
            "changed": others,
        },
        "prev": links.judgments(key, query, page=page.number - 1) if page.number > 1 else None,
        "next": links.judgments(key, query, page=page.number + 1) if page.number < page.pages else None,
        "sort_link": {
            column: links.judgments(
                key, query, sort=column, descending=query.sort == column and not query.descending, page=1
            )
            for column in columns
            if column in SORTABLE
        },
        "exports": {kind: links.export(key, kind, query) for kind in ("jsonl", "csv")},
        "presets": _presets(run, links),
    }


def _presets(run: LoadedRun, links: Links) -> list[dict[str, Any]]:
    """Quick filters per judge (all, wrong, failed): the bundle's only tables, and shortcuts live."""
    key = run.entry.key
    entries = run.data.judgments.select("judge", "context").unique().sort(["judge", "context"]).rows()
    presets = [{"label": "all judges", "links": _outcome_links(links, key, Query())}]
    for judge, context in entries:
        query = Query(judges=(judge,), contexts=(context,))
        presets.append({"label": f"{judge} · {context}", "links": _outcome_links(links, key, query)})
    return presets


def _outcome_links(links: Links, key: str, query: Query) -> list[tuple[str, str | None]]:
    return [(name or "all", links.judgments(key, query, outcome=name)) for name in (None, *OUTCOMES)]


def _with_labels(frame: pl.DataFrame, run: LoadedRun) -> pl.DataFrame:
    """The reviewers' verdict on each pair (human_label: chosen, rejected or cant_tell; human_labels: how many
    reviewers), when the run has labels."""
    labels = rundir.read_labels(run.entry.path)
    if not labels:
        return frame
    counts = Counter(pair_id for pair_id, _ in latest_labels(labels))
    rows = [(pair_id, label, counts[pair_id]) for pair_id, label in human_preference(labels).items()]
    human = pl.DataFrame(
        rows, schema={"pair_id": pl.String, "human_label": pl.String, "human_labels": pl.Int64}, orient="row"
    )
    return frame.join(human, on="pair_id", how="left", maintain_order="left")


def export(catalog: Catalog, run: LoadedRun, query: Query, kind: str) -> bytes:
    """Every judgment of the selection, all pages, with the reviewers' labels when there are some: JSONL with
    every column, CSV without the long texts."""
    frame = _with_labels(select(catalog, run, query).frame.collect(), run)
    out = io.BytesIO()
    if kind == "csv":
        # Texts from the dataset and the judges' replies (a pair id may be `=HYPERLINK(...)`): never a formula.
        neutralise_frame(frame.drop([c for c in _LONG if c in frame.columns])).write_csv(out)
    else:
        frame.write_ndjson(out)
    return out.getvalue()
