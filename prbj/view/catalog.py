"""What the viewer shows: the run directories (and build annotation folders) it was given, each under a short
URL key, read through runs.rundir once and kept in memory. A folder that cannot be read is kept too, with the
reason, so that its page says what is wrong instead of failing."""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from prbj.analysis.headline import headline_of
from prbj.analysis.run_data import RunData
from prbj.data.schema import Pair
from prbj.errors import DataError, PrbjError
from prbj.privacy.guard import shown_pairs, with_private_texts
from prbj.privacy.store import PrivateStore
from prbj.runs import rundir
from prbj.runs.collector import kept_for_the_run
from prbj.runs.run_pairs import RunPairs, read_run_pairs

ANNOTATION_DIR = "annotation"
SHEET_GLOB = "sheet-*.csv"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class RunEntry:
    key: str
    path: Path
    header: rundir.RunHeader | None
    error: str | None = None

    @property
    def run_id(self) -> str:
        return self.header.run_id if self.header is not None else self.path.name

    @property
    def fingerprint(self) -> str:
        dataset = self.header.dataset if self.header is not None else {}
        return str(dataset.get("fingerprint") or dataset.get("source") or "?")

    def cost(self) -> tuple[float, float] | None:
        """USD spent by the run, and what its answers cost when first bought, from run.json usage."""
        usage = self.header.run.get("usage") if self.header is not None else None
        if not isinstance(usage, list) or not usage:
            return None
        spent = saved = 0.0
        for row in usage:
            if isinstance(row, dict):
                spent += _number(row.get("cost_usd"))
                saved += _number(row.get("saved_usd"))
        return spent, spent + saved


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0


@dataclass(frozen=True)
class BuildEntry:
    key: str
    path: Path
    sheets: list[Path]


@dataclass
class LoadedRun:
    entry: RunEntry
    data: RunData
    pairs: RunPairs
    # pair_id, text: lower-cased question, profile posts and answers, for the text search.
    texts: pl.DataFrame | None
    planner: dict[str, list[str]]

    def pair(self, pair_id: str) -> Pair | None:
        return self.pairs.pairs.get(pair_id)


def _search_texts(pairs: dict[str, Pair]) -> pl.DataFrame | None:
    if not pairs:
        return None
    rows = [
        (
            pair.id,
            "\n".join([pair.question, *(p.text for p in pair.profile), pair.chosen, pair.rejected]).lower(),
        )
        for pair in pairs.values()
    ]
    return pl.DataFrame(rows, schema={"pair_id": pl.String, "text": pl.String}, orient="row")


def _private_planner(store: PrivateStore, run_id: str) -> dict[str, list[str]]:
    frame = store.load_texts(run_id, "planner")
    if frame is None or "aspects" not in frame.columns:
        return {}
    return {
        str(p): [str(a) for a in aspects or []]
        for p, aspects in frame.select("pair_id", "aspects").iter_rows()
    }


def is_build(path: Path) -> bool:
    return any((path / ANNOTATION_DIR).glob(SHEET_GLOB))


@dataclass
class Catalog:
    runs: dict[str, RunEntry] = field(default_factory=dict)
    builds: dict[str, BuildEntry] = field(default_factory=dict)
    dataset: str | None = None
    # Guarded runs (--personal-data other than any): `private` when the viewer serves this machine (not a bundle
    # to share), so the private store's texts are shown; `reveal` shows pseudonymized pairs in clear.
    private: bool = True
    reveal: bool = False
    private_dir: Path | None = None
    _loaded: dict[str, LoadedRun] = field(default_factory=dict)
    _datasets: dict[tuple[str, str], RunPairs] = field(default_factory=dict)
    # Runs load on a worker thread (the server's warm-up, or a request that arrives first): one at a time.
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(
        cls,
        paths: Sequence[Path],
        *,
        note: Callable[[str], None] | None = None,
        dataset: str | None = None,
        **privacy: Any,
    ) -> Catalog:
        """The runs and builds the paths name, each a folder of its own or found under one at any depth
        (rundir.select_run_dirs: a named folder that holds none is an error, or with several a `note`). `privacy`:
        the fields private, reveal and private_dir (how guarded runs are shown)."""
        catalog = cls(dataset=dataset, **privacy)
        for path in rundir.select_run_dirs(paths, note or (lambda _message: None), also=is_build):
            catalog._add(path)
        return catalog

    def _key(self, name: str, taken: dict[str, Any]) -> str:
        base = _UNSAFE.sub("_", name).strip("._") or "run"
        key, n = base, 1
        while key in taken:
            n += 1
            key = f"{base}-{n}"
        return key

    def _add(self, path: Path) -> None:
        if is_build(path) and not rundir.is_run_dir(path):
            key = self._key(path.resolve().name, self.builds)
            sheets = sorted((path / ANNOTATION_DIR).glob(SHEET_GLOB))
            self.builds[key] = BuildEntry(key, path, sheets)
            return
        key = self._key(path.resolve().name, self.runs)
        try:
            self.runs[key] = RunEntry(key, path, rundir.load_run_header(path))
        except PrbjError as err:
            self.runs[key] = RunEntry(key, path, None, str(err))

    def load(self, key: str) -> LoadedRun:
        """The run with its judgments, pairs and planner outputs, read once; a DataError says why not."""
        # A run's tables and pairs live as long as the viewer (a big run: ~a million Python objects): made with
        # the cyclic collector paused and frozen out of it after, so its full collections never walk them again
        # in the middle of serving a page.
        with self._lock, kept_for_the_run():
            return self._load(key)

    def _load(self, key: str) -> LoadedRun:
        if key in self._loaded:
            return self._loaded[key]
        entry = self.runs.get(key)
        if entry is None:
            raise KeyError(key)
        if entry.error is not None:
            raise DataError(entry.error)
        data = rundir.load_run(entry.path)
        pairs = self._pairs(data)
        planner = rundir.read_planner_outputs(entry.path)
        shown = shown_pairs(
            data.run_id,
            data.run.get("privacy"),
            pairs.pairs,
            reveal=self.reveal,
            private=self.private,
            store=PrivateStore(self.private_dir),
        )
        if shown.note is not None:
            pairs = RunPairs(shown.pairs, shown.note)
            data = replace(data, judgments=with_private_texts(data.judgments, shown.texts))
            if shown.texts is not None:
                planner = _private_planner(PrivateStore(self.private_dir), data.run_id) or planner
        loaded = LoadedRun(entry, data, pairs, _search_texts(pairs.pairs), planner)
        self._loaded[key] = loaded
        return loaded

    def _pairs(self, data: RunData) -> RunPairs:
        dataset = data.dataset
        cache_key = (str(self.dataset or dataset.get("source")), str(dataset.get("fingerprint")))
        if cache_key not in self._datasets:
            self._datasets[cache_key] = read_run_pairs(
                dataset, data.run.get("config"), source=self.dataset, run_dir=data.run_dir
            )
        return self._datasets[cache_key]

    def groups(self) -> list[list[RunEntry]]:
        """Readable runs grouped by dataset fingerprint, as `prbj report` ranks them: runs under --protocol
        official apart (prbj.analysis.selection.group_by_dataset)."""
        grouped: dict[str, list[RunEntry]] = {}
        for entry in self.runs.values():
            if entry.header is not None:
                official = headline_of(entry.header.summary).protocol == "official"
                grouped.setdefault(entry.fingerprint + ("-official" if official else ""), []).append(entry)
        return list(grouped.values())

    @property
    def broken(self) -> list[RunEntry]:
        return [entry for entry in self.runs.values() if entry.error is not None]
