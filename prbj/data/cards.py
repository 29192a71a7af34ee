"""Benchmark cards: what a benchmark is, in one TOML file (docs/benchmarks.md has the full reference).

    [benchmark]  name, version, title, paper, source (where the full data lives), license, notes
    [data]       loader (prb | per-user | prism | persona-feedback), sample (a folder of sample files),
                 tie_margin (prism: two ratings this many points apart or closer are a tie and make no pair)
    [columns]    the per-user layout's fields read from other columns: field = "column" (a dotted path reads
                 inside nested objects: "meta.uid")
    [groups]     group name = "column": the user's groups for per-group statistics
    [facts]      fact name = "column": stated preferences and demographics a judge is shown
    [profile]    kinds (posts, history, persona, facts: what the profile holds), k (how many posts or
                 earlier choices a judge sees), order (similar | newest: which earlier choices come first)
    [protocol]   how the benchmark's authors score: order, unit, failures, ties, interval, source, notes
                 (prbj.data.card_protocol)

`--benchmark NAME` names a card shipped with prbj (prb, personal-reward-bench, prism, persona-feedback);
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
from prbj.data.names import did_you_mean
from prbj.data.toml_lines import TomlFields, key_lines, read_toml
from prbj.errors import ConfigError

PRB = "prb"
LOADERS = ("prb", "per-user", "prism", "persona-feedback")
PROFILE_KINDS = ("posts", "history", "persona", "facts")
PROFILE_ORDERS = ("similar", "newest")
# The per-user layout's fields a card may read from other columns (prbj.data.per_user).
MAPPABLE = ("user_id", "id", "prompt", "context", "chosen", "rejected", "split", "subset", "persona", "seen")
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
    # PRISM: ratings within this many points of each other are a tie (no pair); 0 = only equal scores.
    tie_margin: float = 0.0
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
    fields.keys(data, "data", ("loader", "sample", "tie_margin"))
    loader = str(fields.string(data, "loader", "data", required=True))
    if loader not in LOADERS:
        raise fields.error(
            "data.loader",
            f"unknown loader {loader!r};{did_you_mean(loader, LOADERS)} expected one of {', '.join(LOADERS)}",
        )
    tie_margin = fields.number(data, "tie_margin", "data")
    if tie_margin is not None and loader != "prism":
        raise fields.error(
            "data.tie_margin", f"only the prism loader rates answers; the {loader} loader has no ties"
        )
    if user_file:
        sample = _user_sample(fields, data, path)
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
    """A table of name = "column" strings."""
    table = fields.table(doc, section, section)
    for key, value in table.items():
        if not isinstance(value, str) or not value.strip():
            raise fields.error(f"{section}.{key}", f"expected a column name (a string), got {value!r}")
    return {key: value.strip() for key, value in table.items()}


def _user_sample(fields: TomlFields, data: Mapping[str, Any], path: Path) -> Traversable | None:
    value = fields.string(data, "sample", "data")
    if value is None:
        return None
    folder = (path.parent / value).resolve()
    if not folder.exists():
        raise fields.error("data.sample", f"{value}: no such file or folder (relative to the card)")
    return folder
