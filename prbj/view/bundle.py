"""`prbj view --bundle DIR`: the viewer's pages written as a static, read-only site that opens from disk (a CI
artifact, a folder to share). No server, no labels, no filter form: the runs, each run's report, its judgments
table unfiltered and per judge × outcome (all, correct, wrong, failed), every pair judged, and every user of a
per-user run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from prbj.data.files import write_text
from prbj.errors import DataError
from prbj.view import overview, pair, table, user
from prbj.view.catalog import Catalog, LoadedRun
from prbj.view.links import BUNDLE_OUTCOMES, BundleLinks, file_slug
from prbj.view.query import Query, page_of
from prbj.view.render import STATIC_FILES, render, static_file


class BundleWriter:
    def __init__(self, catalog: Catalog, out: Path) -> None:
        self.catalog = catalog
        self.out = out
        self.entries: dict[str, list[tuple[str, str]]] = {}
        self.pages = 0

    def links(self, depth: int) -> BundleLinks:
        return BundleLinks(depth, self.entries)

    def write(self, relative: str, template: str, context: dict[str, Any], depth: int) -> None:
        path = self.out / relative
        # Names come from run keys and file_slug, which make safe names; a page never lands outside the bundle.
        if not path.resolve().is_relative_to(self.out.resolve()) or ".." in Path(relative).parts:
            raise DataError(f"{self.out}: refusing to write {relative!r} outside the bundle")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, render(template, context, self.links(depth)))
        self.pages += 1

    def run(self, key: str) -> None:
        try:
            loaded = self.catalog.load(key)
        except DataError as err:
            self.write(
                f"run/{key}/index.html",
                "error.html",
                {"title": "This run cannot be read", "message": str(err), "hint": None},
                2,
            )
            return
        judgments = loaded.data.judgments
        self.entries[key] = [
            (str(j), str(c))
            for j, c in judgments.select("judge", "context").unique().sort(["judge", "context"]).rows()
        ]
        report = overview.report_view([loaded.data], self.links(2), [key])
        self.write(f"run/{key}/index.html", "report.html", overview.report_page([loaded.entry], report), 2)
        self.tables(loaded)
        order = pair.selection_order(self.catalog, loaded, Query())
        for pair_id in order.to_list():
            self.pair(loaded, pair_id, order)
        for user_id in user.user_ids(loaded):
            context = user.user_page(loaded, user_id, self.links(3))
            if context is not None:
                self.write(f"run/{key}/user/{file_slug(user_id)}.html", "user.html", context, 3)

    def tables(self, loaded: LoadedRun) -> None:
        key = loaded.entry.key
        queries = [Query()] + [Query(judges=(j,), contexts=(c,)) for j, c in self.entries[key]]
        for base in queries:
            for outcome in BUNDLE_OUTCOMES:
                query = Query(judges=base.judges, contexts=base.contexts, outcome=outcome)
                pages = page_of(table.select(self.catalog, loaded, query).frame, 1, ["pair_id"]).pages
                for number in range(1, pages + 1):
                    paged = Query(judges=base.judges, contexts=base.contexts, outcome=outcome, page=number)
                    links = self.links(3)
                    context = table.judgments_page(self.catalog, loaded, paged, links)
                    name = links.preset(key, paged)
                    assert name is not None
                    self.write(
                        f"run/{key}/judgments/{name}", "judgments.html", {**context, "blank": Query()}, 3
                    )

    def pair(self, loaded: LoadedRun, pair_id: str, order: pl.Series) -> None:
        context = pair.pair_page(
            self.catalog, loaded, pair_id, Query(), self.links(3), labels=[], order=order
        )
        if context is not None:
            self.write(f"run/{loaded.entry.key}/pair/{file_slug(pair_id)}.html", "pair.html", context, 3)


def write_bundle(catalog: Catalog, out: Path) -> int:
    """Write every page into `out` (created; files of an earlier bundle are overwritten); returns the count."""
    out.mkdir(parents=True, exist_ok=True)
    writer = BundleWriter(catalog, out)
    for key in catalog.runs:
        writer.run(key)
    writer.write("index.html", "runs.html", overview.runs_page(catalog, writer.links(0)), 0)
    for name in STATIC_FILES:
        body = static_file(name)
        assert body is not None
        (out / "static").mkdir(exist_ok=True)
        (out / "static" / name).write_bytes(body)
    return writer.pages
