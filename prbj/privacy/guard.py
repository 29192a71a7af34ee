"""The privacy step of a run: pairs pseudonymized before any judge, planner or retrieval reads them (when the
policy says so), and the personal text of its results kept out of the run directory (whenever the policy is
not `any`).

Why here, where the dataset's pairs enter a run, and not in the gateway: the gateway sees finished prompts, in
which template, question, answers and profile are one string and whose user they belong to is lost; here each
text is known by kind and by user, so pseudonyms are per user and the question and answers are left alone
unless asked. Everything downstream (BM25 retrieval, the planner, judge prompts, the cache key, the cache's
stored answers) sees only the pseudonymized text, so nothing needs a second guard. The gateway still checks
every provider against the routing (prbj.llm.routing) before its first request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prbj.data.lamp import LampSet
from prbj.data.loaders import Dataset
from prbj.llm.routing import Routing
from prbj.privacy.store import Mapping, PrivateStore, Pseudonyms, table_key

if TYPE_CHECKING:
    import polars as pl

    from prbj.privacy.pseudonyms import R

# Columns of judgments.parquet that hold text a model was shown or wrote about a user: kept in the private
# store, not in the run directory, when the policy is not `any`.
PRIVATE_COLUMNS = ("reply", "context_block")


@dataclass(frozen=True)
class PrivacyOptions:
    """--pseudonymize-answers, --ner-model, --private-dir: how a pseudonymizing run works, named as on the
    command line."""

    pseudonymize_answers: bool = False
    ner_model: str | None = None
    private_dir: Path | None = None

    @classmethod
    def pop_from(cls, options: dict[str, Any]) -> PrivacyOptions:
        return cls(**{f.name: options.pop(f.name) for f in fields(cls) if f.name in options})

    @property
    def store(self) -> PrivateStore:
        return PrivateStore(self.private_dir)


@dataclass(frozen=True)
class Guard:
    """What a run's privacy step did: its routing, and the pseudonym table when it pseudonymized."""

    routing: Routing
    options: PrivacyOptions = PrivacyOptions()
    pseudonyms: Pseudonyms | None = None

    def record(self) -> dict[str, Any]:
        """run.json's `privacy`: the policy, and what was replaced (never how)."""
        record: dict[str, Any] = self.routing.record()
        if self.pseudonyms is not None:
            record |= self.pseudonyms.record()
        if self.routing.guards:
            record["texts"] = "private store"
        return record

    def keep_private(
        self, run_id: str, frame: pl.DataFrame, planner: list[dict[str, Any]]
    ) -> tuple[pl.DataFrame, list[dict[str, Any]]]:
        """What the run directory may hold of the judgments and the planner's records. Under any policy but
        `any` their texts (replies, context blocks, aspects) go to the private store and the run directory keeps
        pair ids, verdicts and figures; under `any`, both as they are."""
        if not self.routing.guards:
            return frame, planner
        import polars as pl

        present = [c for c in PRIVATE_COLUMNS if c in frame.columns]
        store = self.options.store
        store.save_texts(run_id, "judgments", frame.select("pair_id", "judge", "context", *present))
        if planner:
            store.save_texts(run_id, "planner", pl.DataFrame(planner))
        return (
            frame.with_columns(pl.lit(None, dtype=pl.String).alias(c) for c in present),
            [{**record, "aspects": []} for record in planner],
        )

    def keep_private_personas(self, run_id: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What the run directory may hold of the synthesized personas (one record per user): a persona is
        written from the user's own choices, so it is kept where the profile is. Under any policy but `any` the
        personas go to the private store and the run directory keeps each user's status, without the text."""
        if not self.routing.guards or not records:
            return records
        import polars as pl

        self.options.store.save_texts(run_id, "personas", pl.DataFrame(records).select("user_id", "persona"))
        return [{**record, "persona": None} for record in records]


def note_line(line: str) -> None:
    """A privacy step's note (what was pseudonymized) on stderr, where notes go."""
    from prbj.display.width import output_console, print_whole

    print_whole(output_console(stderr=True, highlight=False), f"note: {line}")


def guard_dataset(
    dataset: Dataset, routing: Routing, options: PrivacyOptions, *, note: Callable[[str], None]
) -> tuple[Dataset, Guard]:
    """The dataset a run may show its models, and its guard. Only `pseudonymized` changes the pairs (and loads
    Presidio); every other policy returns `dataset` itself at the cost of one comparison."""
    if not routing.pseudonymizes:
        return dataset, Guard(routing, options)
    pairs, table = pseudonymize(dataset.pairs, dataset.fingerprint(), options, note=note)
    # The same data as far as reports, baselines and leaderboards go: its fingerprint is the clear data's, and
    # it is the same benchmark (card, version, history read).
    guarded = replace(dataset, pairs=tuple(pairs), content_hash=dataset.fingerprint())
    return guarded, Guard(routing, options, table)


def guard_lamp(
    lamp: LampSet, routing: Routing, options: PrivacyOptions, *, note: Callable[[str], None]
) -> tuple[LampSet, Guard]:
    """guard_dataset for the records `prbj build` makes pairs from: the pairs it builds carry the pseudonyms."""
    if not routing.pseudonymizes:
        return lamp, Guard(routing, options)
    records, table = pseudonymize(lamp.records, lamp.fingerprint(), options, note=note)
    return LampSet(lamp.source, tuple(records)), Guard(routing, options, table)


def pseudonymize(
    records: Sequence[R], fingerprint: str, options: PrivacyOptions, *, note: Callable[[str], None]
) -> tuple[list[R], Pseudonyms]:
    """`records` with per-user pseudonyms, and their table, saved to the private store."""
    from prbj.privacy.detect import Detector, describe
    from prbj.privacy.pseudonyms import Pseudonymizer

    detector = Detector(options.ner_model)
    rewritten, tables = Pseudonymizer(detector, answers=options.pseudonymize_answers).records(records)
    counts = Counter(entry.kind for entries in tables.values() for entry in entries)
    table = Pseudonyms(
        key=table_key(fingerprint, detector.entities, detector.ner, options.pseudonymize_answers),
        users={
            user: Mapping(tuple((e.kind, e.original, e.pseudonym) for e in entries))
            for user, entries in tables.items()
        },
        entities=detector.entities,
        ner=detector.ner,
        answers=options.pseudonymize_answers,
        counts=dict(counts),
    )
    options.store.save_pseudonyms(table)
    note(describe(detector.entities, detector.ner))
    return rewritten, table


@dataclass(frozen=True)
class Shown:
    """What a reader (the viewer, `prbj show`) may show of a run's pairs on this machine."""

    pairs: dict[str, Any]
    # Why the texts are not as the dataset holds them (pseudonymized, hidden), for the page; None when they are.
    note: str | None = None
    # The run's replies and context blocks from the private store, when the reader may show them.
    texts: pl.DataFrame | None = None


def shown_pairs(
    run_id: str, record: Any, pairs: dict[str, Any], *, reveal: bool, private: bool, store: PrivateStore
) -> Shown:
    """A guarded run's pairs as a reader shows them: pseudonymized as they were sent (the table from the private
    store applied to the dataset's text, no Presidio needed), or in clear with `reveal`; with no table on this
    machine, hidden. `private`: the reader runs locally (not a bundle to share), so the run's own texts (replies,
    context blocks) are read from the store and `reveal` may be honoured. A run under `any` is shown as it is."""
    policy = record.get("personal_data") if isinstance(record, dict) else None
    if policy in (None, "any"):
        return Shown(pairs)
    texts = store.load_texts(run_id, "judgments") if private else None
    if not private:
        return Shown(
            {}, f"texts hidden: the run's policy is --personal-data {policy}, and a bundle is shared"
        )
    key = record.get("pseudonyms")
    if policy != "pseudonymized" or reveal:
        return Shown(pairs, None if policy != "pseudonymized" else "revealed: the original text", texts)
    table = store.load_pseudonyms(str(key)) if isinstance(key, str) else None
    if table is None:
        return Shown({}, "texts hidden: this run's pseudonym table is not on this machine", texts)
    return Shown(_applied(pairs, table), "pseudonymized, as the judges saw it (prbj view --reveal)", texts)


def _applied(pairs: dict[str, Any], table: Pseudonyms) -> dict[str, Any]:
    from prbj.privacy.pseudonyms import rewrite, user_key

    return {
        pair_id: rewrite(pair, table.mapping(user_key(pair)).apply, answers=table.answers)
        for pair_id, pair in pairs.items()
    }


def with_private_texts(judgments: pl.DataFrame, texts: pl.DataFrame | None) -> pl.DataFrame:
    """A guarded run's judgments with their replies and context blocks back from the private store."""
    if texts is None:
        return judgments
    keys = ["pair_id", "judge", "context"]
    columns = [c for c in PRIVATE_COLUMNS if c in texts.columns and c in judgments.columns]
    return judgments.drop(columns).join(texts.select(*keys, *columns), on=keys, how="left")
