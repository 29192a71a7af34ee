"""Benchmark cards: what a benchmark is, in one TOML file (docs/benchmarks.md has the full reference).

    [benchmark]  name, version, title, paper, source (where the full data lives), license, notes
    [data]       loader (prb | per-user | prism | persona-feedback | persona | personamem | personal-llm |
                 pal-tldr),
                 sample (a file or folder of sample files beside the card), tie_margin (two scores this many
                 points apart or closer are a tie: no pair, no clear best), split_map (split values of the
                 source → train | val | test | drop), items (k-way | pairs: how a record of several answers is
                 judged; prbj.data.user_items)
    [columns]    the per-user layout's fields read from other columns: field = "column" (a column path: a dotted
                 path reads inside nested objects, "meta.uid"; an index inside lists, "responses[2].text")
    [groups]     group name = "column": the user's groups for per-group statistics
    [facts]      fact name = "column": stated preferences and demographics a judge is shown
    [profile]    kinds (posts, history, persona, facts: what the profile holds), k (how many posts or
                 earlier choices a judge sees), order (similar | newest: which earlier choices come first)
    [protocol]   how the benchmark's authors score: order, unit, failures, ties, interval, source, notes
                 (prbj.data.card_protocol)

`--benchmark NAME` names a card shipped with prbj (`prbj.data.cards.shipped_cards`: prb, prism, persona-feedback, ...);
`--benchmark FILE.toml` reads a user's own card, validated like any input from elsewhere: an unknown key or a value
of the wrong type is one line naming the file, the line and the field.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

from prbj.data.card_protocol import ScoringProtocol, parse_protocol
from prbj.data.card_sample import user_sample
from prbj.data.column_paths import PathError, parse_path
from prbj.data.names import did_you_mean
from prbj.data.per_user import SPLIT_TARGETS
from prbj.data.toml_lines import TomlFields, key_lines, read_toml
from prbj.data.user_items import ITEM_KINDS, ItemKind
from prbj.errors import ConfigError

PRB = "prb"
LOADERS = (
    "prb",
    "per-user",
    "prism",
    "persona-feedback",
    "persona",
    "personamem",
    "personal-llm",
    "pal-tldr",
)
# Loaders that read a score per answer, and so may set a tie margin.
SCORED_LOADERS = ("per-user", "prism", "personal-llm")
PROFILE_KINDS = ("posts", "history", "persona", "facts")
PROFILE_ORDERS = ("similar", "newest")
# The per-user layout's fields a card may read from other columns (prbj.data.per_user).
MAPPABLE = (
    "user_id",
    "id",
    "prompt",
    "context",
    "chosen",
    "rejected",
    "responses",
    "preferred",
    "ranking",
    "scores",
    "split",
    "subset",
    "persona",
    "posts",
    "seen",
)
SECTIONS = ("benchmark", "data", "columns", "groups", "facts", "profile", "protocol")
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_SHIPPED = "benchmarks"


@dataclass(frozen=True)
class Card:
    name: str
    version: str
    loader: str
    title: str = ""
    paper: str | None = None
    # Where the full data lives (`hf:<repo>` or a description), shown where the sample is judged.
    source: str | None = None
    license: str | None = None
    columns: Mapping[str, str] = field(default_factory=dict)
    groups: Mapping[str, str] = field(default_factory=dict)
    facts: Mapping[str, str] = field(default_factory=dict)
    profile: tuple[str, ...] = ()
    profile_k: int | None = None
    profile_order: str | None = None
    # Scores within this many points of each other are a tie (no pair, no clear best); 0 = only equal scores.
    tie_margin: float = 0.0
    # Split values of the source → train, val, test or drop (prbj.data.per_user).
    split_map: Mapping[str, str] = field(default_factory=dict)
    # How a record of several answers is judged: one best-of-k item, or pairs (prbj.data.user_items).
    items: ItemKind = "k-way"
    # The user's card file; None for a card shipped with prbj.
    path: Path | None = None
    # The sample's folder: shipped with prbj, or beside a user's card.
    sample: Traversable | None = None
    # sha256 of the card's text: a different card on the same files is different data.
    digest: str = ""
    # How the benchmark's authors score ([protocol]); None: prbj's rules (prbj.data.card_protocol).
    protocol: ScoringProtocol | None = None

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"


def shipped_cards() -> list[str]:
    folder = resources.files("prbj.data") / _SHIPPED
    return sorted(f.name.removesuffix(".toml") for f in folder.iterdir() if f.name.endswith(".toml"))


def recorded_own_card(benchmark: Any) -> bool:
    """Whether run.json's `config.benchmark` says the run read its data through a card of the user's own (its
    sample is theirs, not public)."""
    return isinstance(benchmark, dict) and benchmark.get("card") is not None


def recorded_shipped_card(benchmark: Any) -> Card | None:
    """The card shipped with prbj that run.json's `config.benchmark` names (None: Personalized RewardBench, a
    card of the user's own, or a name this version does not ship: run.json is read as untrusted, so a name is
    only looked up, never a path)."""
    name = benchmark.get("name") if isinstance(benchmark, dict) else None
    if (
        recorded_own_card(benchmark)
        or not isinstance(name, str)
        or name == PRB
        or name not in shipped_cards()
    ):
        return None
    return resolve_card(name)


def resolve_card(spec: str) -> Card:
    """`--benchmark`: a shipped card by name, or a card file."""
    if spec in shipped_cards():
        folder = resources.files("prbj.data") / _SHIPPED
        text = (folder / f"{spec}.toml").read_text(encoding="utf-8")
        return parse_card(Path(f"{spec}.toml"), _loads(Path(spec), text), text, sample=folder / spec)
    path = Path(spec)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise ConfigError(f"--benchmark {spec}: no such card file")
        return read_card(path)
    names = shipped_cards()
    raise ConfigError(
        f"--benchmark {spec!r}: unknown benchmark;{did_you_mean(spec, names)} shipped: {', '.join(names)}, "
        "or a card file (FILE.toml)"
    )


def recorded_card(record: Any) -> str | None:
    """The --benchmark that reads a run's data again, from run.json's config.benchmark: its card file, or a
    shipped card's name; None where the layout was read from the data (or the record is not one prbj wrote)."""
    if not isinstance(record, Mapping):
        return None
    card, name = record.get("card"), record.get("name")
    if isinstance(card, str) and card:
        return card
    return name if isinstance(name, str) and name in shipped_cards() else None


def read_card(path: Path) -> Card:
    """A user's card: its sample, if it names one, is relative to the card's folder."""
    doc, text = read_toml(path)
    return parse_card(path, doc, text, sample=None, user_file=True)


def parse_card(
    path: Path, doc: Mapping[str, Any], text: str, *, sample: Traversable | None, user_file: bool = False
) -> Card:
    """The card in `doc` (parsed from `text`, which gives the lines errors name); `sample` for a shipped card."""
    fields = TomlFields(path, key_lines(text))
    fields.keys(doc, "", SECTIONS)
    about = fields.table(doc, "benchmark", "benchmark")
    fields.keys(about, "benchmark", ("name", "version", "title", "paper", "source", "license", "notes"))
    name = str(fields.string(about, "name", "benchmark", required=True))
    if not _NAME.match(name):
        raise fields.error("benchmark.name", f"expected lower-case letters, digits and '-', got {name!r}")
    version = about.get("version")
    if isinstance(version, int) and not isinstance(version, bool):
        version = str(version)
    if not isinstance(version, str) or not version.strip():
        raise fields.error("benchmark.version", f'expected a version string such as "1", got {version!r}')
    for key in ("title", "paper", "source", "license", "notes"):
        fields.string(about, key, "benchmark")
    data = fields.table(doc, "data", "data")
    fields.keys(data, "data", ("loader", "sample", "tie_margin", "split_map", "items"))
    loader = str(fields.string(data, "loader", "data", required=True))
    if loader not in LOADERS:
        raise fields.error(
            "data.loader",
            f"unknown loader {loader!r};{did_you_mean(loader, LOADERS)} expected one of {', '.join(LOADERS)}",
        )
    tie_margin = fields.number(data, "tie_margin", "data")
    if tie_margin is not None and loader not in SCORED_LOADERS:
        raise fields.error(
            "data.tie_margin",
            f"only the {', '.join(SCORED_LOADERS)} loaders read scores; the {loader} loader has no ties",
        )
    items = fields.string(data, "items", "data") or "k-way"
    if items not in ITEM_KINDS:
        raise fields.error("data.items", f"expected one of {', '.join(ITEM_KINDS)}, got {items!r}")
    split_map = _split_map(fields, data)
    if user_file:
        sample = user_sample(fields, data, path)
    columns = _mapping(fields, doc, "columns")
    fields.keys(columns, "columns", MAPPABLE)
    profile = fields.table(doc, "profile", "profile")
    fields.keys(profile, "profile", ("kinds", "k", "order"))
    kinds = fields.strings(profile, "kinds", "profile")
    for kind in kinds:
        if kind not in PROFILE_KINDS:
            raise fields.error(
                "profile.kinds", f"unknown kind {kind!r}; expected some of {', '.join(PROFILE_KINDS)}"
            )
    order = fields.string(profile, "order", "profile")
    if order is not None and order not in PROFILE_ORDERS:
        raise fields.error("profile.order", f"expected one of {', '.join(PROFILE_ORDERS)}, got {order!r}")
    if loader == PRB and (columns or doc.get("groups") or doc.get("facts")):
        raise fields.error(
            "data.loader",
            "the prb loader reads the benchmark's own columns: no [columns], [groups] or [facts]",
        )
    return Card(
        name=name,
        version=version.strip(),
        loader=loader,
        title=str(about.get("title") or name),
        paper=about.get("paper"),
        source=about.get("source"),
        license=about.get("license"),
        columns=columns,
        groups=_mapping(fields, doc, "groups"),
        facts=_mapping(fields, doc, "facts"),
        profile=kinds,
        profile_k=fields.integer(profile, "k", "profile", minimum=1),
        profile_order=order,
        tie_margin=tie_margin or 0.0,
        split_map=split_map,
        items=items,  # type: ignore[arg-type]  # checked against ITEM_KINDS above
        path=path if user_file else None,
        sample=sample,
        digest=hashlib.sha256(text.encode()).hexdigest(),
        protocol=parse_protocol(fields, doc),
    )


def _loads(path: Path, text: str) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: invalid TOML: {err}") from None


def _mapping(fields: TomlFields, doc: Mapping[str, Any], section: str) -> dict[str, str]:
    """A table of name = "column" strings, each a column path (prbj.data.column_paths)."""
    table = fields.table(doc, section, section)
    for key, value in table.items():
        if not isinstance(value, str) or not value.strip():
            raise fields.error(f"{section}.{key}", f"expected a column name (a string), got {value!r}")
        try:
            parse_path(value.strip())
        except PathError as err:
            raise fields.error(f"{section}.{key}", str(err)) from None
    return {key: value.strip() for key, value in table.items()}


def _split_map(fields: TomlFields, data: Mapping[str, Any]) -> dict[str, str]:
    """[data] split_map: the source's split values, each to train, val, test or drop."""
    table = fields.table(data, "split_map", "data.split_map")
    for key, value in table.items():
        if value not in SPLIT_TARGETS:
            raise fields.error(
                f"data.split_map.{key}", f"expected one of {', '.join(SPLIT_TARGETS)}, got {value!r}"
            )
    return dict(table)
