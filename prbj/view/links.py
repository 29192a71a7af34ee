"""Where each page lives. The live server and the static bundle show the same pages under different addresses:
the server takes its state from the URL's query (`/run/KEY/judgments?judge=x&page=2`), the bundle is a folder of
files opened from disk, so its links are relative paths to pages written in advance (the unfiltered table and
one preset per judge and outcome), and a link the bundle has no page for is None (the template leaves it out)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import replace
from urllib.parse import quote, urlencode

from prbj.view.query import OUTCOMES, Query

_SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,80}")
# Path segments a browser resolves away ("/pair/.." is the run's folder), percent-encoded or not: such a pair id
# travels in the query instead.
DOT_SEGMENTS = (".", "..")


def file_slug(name: str) -> str:
    """A file name for a pair id or judge: the id itself when it is a safe name, else its hash."""
    if _SAFE_NAME.fullmatch(name):
        return name
    return "h-" + hashlib.sha256(name.encode()).hexdigest()[:20]


class LiveLinks:
    live = True

    def _q(self, path: str, params: Sequence[tuple[str, str]] = ()) -> str:
        return f"{path}?{urlencode(list(params))}" if params else path

    def runs(self) -> str:
        return "/"

    def run(self, key: str) -> str:
        return f"/run/{quote(key)}"

    def compare(self, keys: Sequence[str]) -> str | None:
        return self._q("/compare", [("run", k) for k in keys])

    def judgments(self, key: str, query: Query, **changes: object) -> str | None:
        return self._q(f"/run/{quote(key)}/judgments", query.params(**changes))

    def _pair_path(self, key: str, pair_id: str) -> tuple[str, list[tuple[str, str]]]:
        if pair_id in DOT_SEGMENTS:
            return f"/run/{quote(key)}/pair", [("id", pair_id)]
        return f"/run/{quote(key)}/pair/{quote(pair_id, safe='')}", []

    def pair_address(self, key: str, pair_id: str, params: Sequence[tuple[str, str]] = ()) -> str:
        path, named = self._pair_path(key, pair_id)
        return self._q(path, [*named, *params])

    def pair(self, key: str, pair_id: str, query: Query | None = None, **extra: str) -> str:
        return self.pair_address(key, pair_id, [*(query.params(page=1) if query else []), *extra.items()])

    def user(self, key: str, user_id: str) -> str:
        if user_id in DOT_SEGMENTS:
            return self._q(f"/run/{quote(key)}/user", [("id", user_id)])
        return f"/run/{quote(key)}/user/{quote(user_id, safe='')}"

    def label(self, key: str, pair_id: str, query: Query | None = None) -> str | None:
        """Where the label form posts (the pair's own address for an id passed in the query); the query brings
        the reviewer back to the same selection."""
        path, named = self._pair_path(key, pair_id)
        return self._q(path if named else f"{path}/label", [*named, *(query.params() if query else [])])

    def export(self, key: str, kind: str, query: Query) -> str | None:
        return self._q(f"/run/{quote(key)}/export.{kind}", query.params(page=1))

    def file(self, key: str, relative: str) -> str | None:
        return f"/run/{quote(key)}/files/{quote(relative)}"

    def build(self, key: str) -> str | None:
        return f"/build/{quote(key)}"

    def sheet(self, key: str, sheet: str, item: int) -> str | None:
        return f"/build/{quote(key)}/sheet/{quote(sheet)}/{item}"

    def static(self, name: str) -> str:
        return f"/static/{name}"


class BundleLinks:
    """Relative links from a page `depth` folders below the bundle's root."""

    live = False

    def __init__(self, depth: int, entries: dict[str, list[tuple[str, str]]]) -> None:
        self.root = "../" * depth
        # Per run key, its (judge, context) entries: the bundle writes one table preset per entry.
        self.entries = entries

    def runs(self) -> str:
        return f"{self.root}index.html"

    def run(self, key: str) -> str:
        return f"{self.root}run/{quote(key)}/index.html"

    def compare(self, keys: Sequence[str]) -> str | None:
        return None

    def preset(self, key: str, query: Query) -> str | None:
        """The file name of a table page the bundle writes, or None when the query is not one of them."""
        if query.subsets or query.statuses or query.inconsistent or query.disagree or query.changed:
            return None
        if query.text or query.sort != "pair_id" or query.descending:
            return None
        if len(query.judges) > 1 or len(query.contexts) > 1 or len(query.judges) != len(query.contexts):
            return None
        entry = "all"
        if query.judges:
            pair = (query.judges[0], query.contexts[0])
            if pair not in self.entries.get(key, []):
                return None
            entry = f"e{self.entries[key].index(pair)}"
        outcome = query.outcome or "all"
        return f"{entry}-{outcome}-{query.page}.html"

    def judgments(self, key: str, query: Query, **changes: object) -> str | None:
        name = self.preset(key, replace(query, **changes) if changes else query)  # type: ignore[arg-type]  # changes are Query fields
        return None if name is None else f"{self.root}run/{quote(key)}/judgments/{name}"

    def pair(self, key: str, pair_id: str, query: Query | None = None, **extra: str) -> str:
        return f"{self.root}run/{quote(key)}/pair/{file_slug(pair_id)}.html"

    def user(self, key: str, user_id: str) -> str:
        return f"{self.root}run/{quote(key)}/user/{file_slug(user_id)}.html"

    def label(self, key: str, pair_id: str, query: Query | None = None) -> str | None:
        return None

    def export(self, key: str, kind: str, query: Query) -> str | None:
        return None

    def file(self, key: str, relative: str) -> str | None:
        return None

    def build(self, key: str) -> str | None:
        return None

    def sheet(self, key: str, sheet: str, item: int) -> str | None:
        return None

    def static(self, name: str) -> str:
        return f"{self.root}static/{name}"


Links = LiveLinks | BundleLinks
BUNDLE_OUTCOMES = (None, *OUTCOMES)
