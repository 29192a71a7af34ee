"""The privacy step of a run: pairs pseudonymized before any judge, planner or retrieval reads them (when the
policy says so), and the personal text of its results kept out of the run directory and out of the shared
cache (whenever the policy is not `any`).

Why here, where the dataset's pairs enter a run, and not in the gateway: the gateway sees finished prompts, in
which template, question, answers and profile are one string and whose user they belong to is lost; here each
text is known by kind and by user, so pseudonyms are per user, one table covers a user's profile and answers,
and questions and answers are pseudonymized where they are the user's own (per-user data) or when asked. This
is still before the gateway and its cache key: everything downstream (BM25 retrieval, the planner, judge
prompts, the cache key, the cache's stored answers) sees only the pseudonymized text, so nothing needs a second
guard. The gateway checks every provider against the routing (prbj.llm.routing) before its first request.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prbj.data.lamp import LampSet
from prbj.data.loaders import Dataset
from prbj.data.schema import Pair
from prbj.data.status import STATUS_MEANING
from prbj.data.user_columns import GROUP_PREFIX, group_column
from prbj.llm.routing import Routing
from prbj.privacy.entities import parse_kinds
from prbj.privacy.store import PrivateStore, Pseudonyms
from prbj.privacy.tables import TableSettings, pseudonymized

if TYPE_CHECKING:
    import polars as pl

    from prbj.llm.setup import GatewayOptions

# Columns of judgments.parquet that hold text a model was shown or wrote about a user: kept in the private
# store, not in the run directory, when the policy is not `any`. An error message can quote the reply it could
# not read ("no verdict in reply: '…'") or a provider's echo of the request: the run directory keeps its cause.
PRIVATE_COLUMNS = ("reply", "context_block", "error")
PRIVATE_MESSAGE = "the message is in the private store"
# A group value (age band, region, ...) shared by fewer users than this names too few people to record under a
# guarded policy: it is recorded as RARE_GROUP instead (statistics, run files, reports).
MIN_GROUP_USERS = 5
RARE_GROUP = f"other (fewer than {MIN_GROUP_USERS} users)"


@dataclass(frozen=True)
class PrivacyOptions:
    """--pseudonymize-answers, --ner-model, --keep-entities, --pseudonymize-terms, --private-dir: how a
    pseudonymizing run works, named as on the command line. `pseudonymize_answers` None: yes on per-user data
    (the answers are the user's own conversations), no on data with one pair per user."""

    pseudonymize_answers: bool | None = None
    ner_model: str | None = None
    keep_entities: tuple[str, ...] | None = None
    pseudonymize_terms: Path | None = None
    private_dir: Path | None = None

    @classmethod
    def pop_from(cls, options: dict[str, Any]) -> PrivacyOptions:
        return cls(**{f.name: options.pop(f.name) for f in fields(cls) if f.name in options})

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> PrivacyOptions:
        """From an experiment file's [defaults] (TOML values, named as the options are)."""
        kept = settings.get("keep_entities")
        if isinstance(kept, str):
            kept = parse_kinds(kept)
        terms, private = settings.get("pseudonymize_terms"), settings.get("private_dir")
        return cls(
            pseudonymize_answers=settings.get("pseudonymize_answers"),
            ner_model=settings.get("ner_model"),
            keep_entities=tuple(kept) if kept is not None else None,
            pseudonymize_terms=Path(terms) if terms else None,
            private_dir=Path(private) if private else None,
        )

    @property
    def store(self) -> PrivateStore:
        return PrivateStore(self.private_dir)

    def settings(self, *, per_user: bool) -> TableSettings:
        """How the run's pseudonym table is made; refuses a run with no NER pipeline (fail closed) unless
        `--ner-model none` said names and places may stay."""
        from prbj.privacy.detect import DEFAULT_KEPT
        from prbj.privacy.ner import resolve_ner
        from prbj.privacy.terms import read_terms

        answers = self.pseudonymize_answers if self.pseudonymize_answers is not None else per_user
        kept = self.keep_entities if self.keep_entities is not None else DEFAULT_KEPT
        terms = read_terms(self.pseudonymize_terms) if self.pseudonymize_terms is not None else ()
        return TableSettings(resolve_ner(self.ner_model), tuple(sorted(set(kept))), answers, terms)

    def cache_for(self, shared: GatewayOptions) -> GatewayOptions:
        """`shared` caching its answers in the private store under a guarded policy: a reply can quote whatever
        its request held (a profile in clear under local or zero-retention, a question that was not
        pseudonymized), so it is kept where the run's other texts are. A cache folder the user named
        (--cache-dir, PRBJ_CACHE_DIR) is used as named."""
        from prbj.llm.cache import CACHE_ENV

        if not shared.routed.guards or shared.cache_dir is not None or os.environ.get(CACHE_ENV):
            return shared
        return replace(shared, cache_dir=self.store.cache_directory())


@dataclass(frozen=True)
class Guard:
    """What a run's privacy step did: its routing, and the pseudonym table when it pseudonymized."""

    routing: Routing
    options: PrivacyOptions = PrivacyOptions()
    pseudonyms: Pseudonyms | None = None
    # The group values (name, value) that name too few users to record under this policy (none under `any`).
    rare_groups: frozenset[tuple[str, str]] = frozenset()

    def record(self) -> dict[str, Any]:
        """run.json's `privacy`: the policy, and what was replaced (never how)."""
        record: dict[str, Any] = self.routing.record()
        if self.pseudonyms is not None:
            record |= self.pseudonyms.record()
        if self.routing.guards:
            record["texts"] = "private store"
            record["group_values"] = f"shared by {MIN_GROUP_USERS} users or more"
        return record

    def recorded_groups(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The judgments as a run records them (judgments.parquet, summary.json, the reports): each group value
        held by fewer than MIN_GROUP_USERS users as RARE_GROUP under a guarded policy. Judges saw the values as
        they are: a model run in-process (a py: reward model's ScoreItem.groups) keeps its input."""
        if not self.rare_groups:
            return frame
        import polars as pl

        changed = []
        for column in frame.columns:
            if not column.startswith(GROUP_PREFIX):
                continue
            rare = [value for name, value in self.rare_groups if group_column(name) == column]
            if rare:
                value = pl.col(column)
                changed.append(
                    pl.when(value.is_in(rare)).then(pl.lit(RARE_GROUP)).otherwise(value).alias(column)
                )
        return frame.with_columns(changed) if changed else frame

    def keep_private(
        self, run_id: str, frame: pl.DataFrame, planner: list[dict[str, Any]]
    ) -> tuple[pl.DataFrame, list[dict[str, Any]]]:
        """What the run directory may hold of the judgments and the planner's records. Under any policy but
        `any` their texts (replies, context blocks, error messages, aspects) go to the private store and the
        run directory keeps pair ids, verdicts, figures and each failure's cause; under `any`, both as they
        are."""
        if not self.routing.guards:
            return frame, planner
        import polars as pl

        present = [c for c in PRIVATE_COLUMNS if c in frame.columns]
        store = self.options.store
        store.save_texts(run_id, "judgments", frame.select("pair_id", "judge", "context", *present))
        if planner:
            store.save_texts(run_id, "planner", pl.DataFrame(planner))
        hidden = frame.with_columns(pl.lit(None, dtype=pl.String).alias(c) for c in present if c != "error")
        return public_errors(hidden), [{**record, "aspects": []} for record in planner]

    def keep_private_personas(self, run_id: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What the run directory may hold of the synthesized personas (one record per user): a persona is
        written from the user's own choices, so it is kept where the profile is. Under any policy but `any` the
        personas go to the private store and the run directory keeps each user's status, without the text."""
        if not self.routing.guards or not records:
            return records
        import polars as pl

        self.options.store.save_texts(run_id, "personas", pl.DataFrame(records).select("user_id", "persona"))
        return [{**record, "persona": None} for record in records]


# Statuses in words, looked up by the strings a judgments table holds.
_MEANING: dict[str, str] = {str(status): meaning for status, meaning in STATUS_MEANING.items()}


def public_error(status: str, cause: str | None, *, where: str = PRIVATE_MESSAGE) -> str:
    """What went wrong with a judgment, for a guarded run's files: its status in words and the provider's
    cause, never the message (which may quote the reply it could not read, or the request)."""
    what = _MEANING.get(status, status)
    return f"{what} ({cause}); {where}" if cause else f"{what}; {where}"


def public_errors(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with each failure's `error` as public_error says it."""
    import polars as pl

    if "error" not in frame.columns:
        return frame
    cause = "cause" if "cause" in frame.columns else None
    said = [
        None if error is None else public_error(str(status), reason)
        for status, reason, error in zip(
            frame["status"].to_list(),
            frame[cause].to_list() if cause else [None] * frame.height,
            frame["error"].to_list(),
            strict=True,
        )
    ]
    return frame.with_columns(pl.Series("error", said, dtype=pl.String))


def note_line(line: str) -> None:
    """A privacy step's note (what was pseudonymized) on stderr, where notes go."""
    from prbj.display.width import output_console, print_whole

    print_whole(output_console(stderr=True, highlight=False), f"note: {line}")


def is_per_user(pairs: Sequence[Any]) -> bool:
    """Data whose users have several pairs or more than posts (earlier choices, conversations, a persona):
    the per-user layout, where the questions and answers are the user's own conversations."""
    return any(
        getattr(p, "user_id", p.id) != p.id or getattr(p, "turns", ()) or not p.user_profile.only_posts
        for p in pairs
    )


def guard_dataset(
    dataset: Dataset, routing: Routing, options: PrivacyOptions, *, note: Callable[[str], None]
) -> tuple[Dataset, Guard]:
    """The dataset a run may show its models, and its guard. Under `any` the dataset itself, at the cost of one
    comparison; under `pseudonymized` its texts pseudonymized (Presidio loaded only when its table is not in the
    store). Under every policy but `any` the guard knows the group values too rare to record (MIN_GROUP_USERS):
    the run's records merge them (Guard.recorded_groups), the judges see them as they are."""
    if not routing.guards:
        return dataset, Guard(routing, options)
    rare = _rare_groups(dataset.pairs)
    if not routing.pseudonymizes:
        return dataset, Guard(routing, options, rare_groups=rare)
    settings = options.settings(per_user=is_per_user(dataset.pairs))
    pairs, table = pseudonymized(dataset.pairs, dataset.fingerprint(), settings, options.store, note=note)
    # The same data as far as reports, baselines and leaderboards go: its fingerprint is the clear data's, and
    # it is the same benchmark (card, version, history read).
    guarded = replace(dataset, pairs=tuple(pairs), content_hash=dataset.fingerprint())
    return guarded, Guard(routing, options, table, rare_groups=rare)


def _rare_groups(pairs: Sequence[Pair]) -> frozenset[tuple[str, str]]:
    """The (name, value) groups held by fewer than MIN_GROUP_USERS users."""
    users: dict[tuple[str, str], set[str]] = {}
    for pair in pairs:
        for name, value in pair.groups:
            users.setdefault((name, value), set()).add(pair.user_id)
    return frozenset(group for group, who in users.items() if len(who) < MIN_GROUP_USERS)


def guard_lamp(
    lamp: LampSet, routing: Routing, options: PrivacyOptions, *, note: Callable[[str], None]
) -> tuple[LampSet, Guard]:
    """guard_dataset for the records `prbj build` makes pairs from: the pairs it builds carry the pseudonyms."""
    if not routing.pseudonymizes:
        return lamp, Guard(routing, options)
    settings = options.settings(per_user=False)
    records, table = pseudonymized(lamp.records, lamp.fingerprint(), settings, options.store, note=note)
    return LampSet(lamp.source, tuple(records)), Guard(routing, options, table)


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
    """`pairs` (by id, as given) rewritten by their users' tables: each user's repeated history texts once."""
    from prbj.privacy.pseudonyms import rewrite_all

    return dict(
        zip(pairs, rewrite_all(list(pairs.values()), table.users, answers=table.answers), strict=True)
    )


def with_private_texts(judgments: pl.DataFrame, texts: pl.DataFrame | None) -> pl.DataFrame:
    """A guarded run's judgments with their replies and context blocks back from the private store."""
    if texts is None:
        return judgments
    keys = ["pair_id", "judge", "context"]
    columns = [c for c in PRIVATE_COLUMNS if c in texts.columns and c in judgments.columns]
    return judgments.drop(columns).join(texts.select(*keys, *columns), on=keys, how="left")
