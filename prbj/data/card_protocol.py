"""A benchmark card's `[protocol]`: how the benchmark's authors score a judge, so that prbj can report the figure
they compare (docs/benchmarks.md, "A card's protocol").

    [protocol]
    order    = "one" | "both"          each pair shown in one order (drawn per pair from --seed) or in both
    unit     = "judgments" | "pairs" | "users"
                                       what the headline averages over: each shown order, each pair, or each
                                       user's own accuracy (a macro mean over users)
    failures = "wrong" | "excluded" | "half"
                                       what an unreadable or failed judgment counts: 0, nothing, or 1/2
    ties     = "wrong" | "excluded" | "half"
                                       what a tie counts
    interval = "cluster-users" | "basic-bootstrap" | "percentile-bootstrap"
                                       prbj's interval over users, or the authors' bootstrap over the unit
                                       (scipy.stats.bootstrap with method "basic" or "percentile")
    source   = "..."                   where the authors' scoring was read (file and function, or paper);
                                       `--protocol official` reproduces only a protocol that says where it
                                       comes from
    notes    = "..."                   what could not be confirmed

Every field is optional: a missing one keeps prbj's default (order: `--order`'s; unit users; failures excluded;
ties wrong; interval cluster-users), so a card without `[protocol]` scores as prbj always has. A value given
wrong is one line naming the file, the line and the field, with the nearest valid value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from prbj.data.names import did_you_mean
from prbj.data.toml_lines import TomlFields, kind

CardOrder = Literal["one", "both"]
Unit = Literal["judgments", "pairs", "users"]
Counting = Literal["wrong", "excluded", "half"]
IntervalMethod = Literal["cluster-users", "basic-bootstrap", "percentile-bootstrap"]

ORDERS: tuple[CardOrder, ...] = ("one", "both")
UNITS: tuple[Unit, ...] = ("judgments", "pairs", "users")
COUNTINGS: tuple[Counting, ...] = ("wrong", "excluded", "half")
INTERVALS: tuple[IntervalMethod, ...] = ("cluster-users", "basic-bootstrap", "percentile-bootstrap")
PROTOCOL_FIELDS = ("order", "unit", "failures", "ties", "interval", "source", "notes")
_CHOICES: dict[str, tuple[str, ...]] = {
    "order": ORDERS,
    "unit": UNITS,
    "failures": COUNTINGS,
    "ties": COUNTINGS,
    "interval": INTERVALS,
}


@dataclass(frozen=True)
class ScoringProtocol:
    """How a figure is scored. The defaults are prbj's own rules: a failure is counted apart (left out of the
    figure), a tie is decided and never correct, intervals are over users."""

    # None: the run's --order decides (a pair's position drawn from --seed unless --order both).
    order: CardOrder | None = None
    unit: Unit = "users"
    failures: Counting = "excluded"
    ties: Counting = "wrong"
    interval: IntervalMethod = "cluster-users"
    source: str | None = None
    notes: str | None = None

    @property
    def reproducible(self) -> bool:
        """Whether `--protocol official` may claim it: it says where the authors' scoring was read."""
        return self.source is not None

    def with_prbj_rules(self) -> ScoringProtocol:
        """The card's order and unit scored by prbj's rules (failures apart, ties wrong, intervals over users):
        the headline of `--protocol prbj`."""
        return replace(
            self, failures="excluded", ties="wrong", interval="cluster-users", source=None, notes=None
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "order": self.order,
            "unit": self.unit,
            "failures": self.failures,
            "ties": self.ties,
            "interval": self.interval,
            **({"source": self.source} if self.source else {}),
        }


PRBJ_RULES = ScoringProtocol()


def parse_protocol(fields: TomlFields, doc: Mapping[str, Any]) -> ScoringProtocol | None:
    """The card's `[protocol]`, or None when it has none."""
    if "protocol" not in doc:
        return None
    table = fields.table(doc, "protocol", "protocol")
    fields.keys(table, "protocol", PROTOCOL_FIELDS)
    values: dict[str, Any] = {}
    for name, choices in _CHOICES.items():
        value = table.get(name)
        if value is None:
            continue
        where = f"protocol.{name}"
        if not isinstance(value, str):
            raise fields.error(where, f"expected one of {', '.join(choices)}, got {kind(value)}")
        if value not in choices:
            raise fields.error(
                where,
                f"unknown value {value!r};{did_you_mean(value, choices)} expected one of {', '.join(choices)}",
            )
        values[name] = value
    for name in ("source", "notes"):
        text = fields.string(table, name, "protocol")
        if text is not None:
            values[name] = text.strip()
    return ScoringProtocol(**values)
