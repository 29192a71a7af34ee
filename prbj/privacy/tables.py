"""A dataset's pseudonym table: made once by analysis, then read back from the private store.

The table depends on the data (its fingerprint) and on how it was made (the NER pipeline's identity, the kinds
left as they are, whether questions and answers are pseudonymized, the detection rules, Presidio's and
phonenumbers' versions), all known before anything is imported: its name in the store is their hash. A rerun
that finds the table rewrites its texts with it (prbj.privacy.store.Mapping.apply, the very function the first
run rewrote them with) and builds no analyzer, imports neither Presidio nor spaCy, and analyses nothing.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prbj.privacy.ner import NerModel
from prbj.privacy.store import FORMAT, PrivateStore, Pseudonyms

if TYPE_CHECKING:
    from prbj.privacy.pseudonyms import R


@dataclass(frozen=True)
class TableSettings:
    """How a table is made, decided before any analysis."""

    ner: NerModel | None
    kept: tuple[str, ...]
    answers: bool
    # --pseudonymize-terms: (kind, term) of the user's own list.
    terms: tuple[tuple[str, str], ...] = ()

    def key(self, fingerprint: str) -> str:
        """The table's name: the data and everything that decides its content (no text of it)."""
        from prbj.privacy.detect import DETECTION_VERSION

        blob = json.dumps(
            [
                FORMAT,
                DETECTION_VERSION,
                fingerprint,
                self.ner.identity if self.ner is not None else None,
                sorted(self.kept),
                self.answers,
                [list(term) for term in self.terms],
                _version("presidio-analyzer"),
                _version("phonenumbers"),
            ]
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def pseudonymized(
    records: Sequence[R],
    fingerprint: str,
    settings: TableSettings,
    store: PrivateStore,
    *,
    note: Callable[[str], None],
) -> tuple[list[R], Pseudonyms]:
    """`records` with per-user pseudonyms, and their table: from the store when it holds the table, else made
    by analysis and saved there."""
    from prbj.privacy.pseudonyms import rewrite_all

    key = settings.key(fingerprint)
    table = store.load_pseudonyms(key)
    if table is None:
        table = _analysed(records, key, settings, note=note)
        store.save_pseudonyms(table)
    else:
        note(f"pseudonymized with the table made before (private store, {key}): nothing analysed again")
    return rewrite_all(records, table.users, answers=settings.answers), table


def _analysed(
    records: Sequence[R], key: str, settings: TableSettings, *, note: Callable[[str], None]
) -> Pseudonyms:
    from prbj.privacy.detect import Detector, describe
    from prbj.privacy.pseudonyms import Pseudonymizer, mappings_of

    detector = Detector(settings.ner, settings.kept, settings.terms)
    tables = Pseudonymizer(detector, answers=settings.answers).tables(records)
    # Entities, not spellings: "Jane Doe" and "J. Doe" are one person replaced.
    counts = Counter(
        kind for entries in tables.values() for kind, _ in {(e.kind, e.pseudonym) for e in entries}
    )
    note(describe(detector.entities, detector.ner))
    return Pseudonyms(
        key=key,
        users=mappings_of(tables),
        entities=detector.entities,
        ner=detector.ner,
        answers=settings.answers,
        counts=dict(counts),
    )
