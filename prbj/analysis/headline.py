"""The headline: the one figure a benchmark ranks, bolds, gates and exports by, as its card's `[protocol]` says
(prbj.data.card_protocol), and how it is scored.

Which figure: the card's `unit` (judgments, pairs or users; users where the card says nothing). Scored by whose
rules: under `--protocol prbj` prbj's (a failure left out and counted apart, a tie never correct, an interval
over users: prbj.analysis.clusters.accuracy_intervals); under `--protocol official` the card's own (what a
failure and a tie count, the authors' interval), so that the figure is the one the authors' code would print.

Where a headline is one of summary.json's figures already (prbj's rules over pairs: `accuracy`; over users:
`user_accuracy`, which is `accuracy` where no user repeats) it is read from there, so every reader of a run sees
the same number whatever wrote it. Any other headline is computed here from the judgments and stored in each
results row as `headline`, `headline_ci_low` and `headline_ci_high`.

How each unit is counted, per judge × context (× subset):
- **judgments**: each order a pair was shown in is one judgment (`--order both` gives two per pair, each read on its
  own: an order's pick counts even when the other order failed); a judge that scores each answer alone (no
  order) gives the same outcome in every order the protocol shows, so it counts once per order too;
- **pairs**: each judgment row is one pair (in both orders: right only if both orders picked the chosen answer);
- **users**: each user's mean over their counted pairs, then the mean over users with at least one.
An outcome is right (1), wrong (0), a tie or a failure (a judgment not `ok`, a withheld verdict included): those
count as the rules say, 0 (`wrong`), 1/2 (`half`) or not at all (`excluded`). Means are exact fractions rounded
once, so a hand computation gives the same float.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import polars as pl

from prbj.analysis.clusters import accuracy_intervals
from prbj.analysis.stats import ALL_SUBSETS, CONFIDENCE, GroupStats
from prbj.analysis.user_counts import USER_KEY, user_expr
from prbj.data.card_protocol import COUNTINGS, INTERVALS, ORDERS, PRBJ_RULES, UNITS, Counting, ScoringProtocol
from prbj.data.status import ABSTAINED

RunProtocol = Literal["prbj", "official"]
# scipy.stats.bootstrap's default number of resamples: the authors call it with the default.
AUTHORS_RESAMPLES = 9999
# Values held at once by one batch of scipy's resamples (resamples × values), so memory stays flat at any size.
_BATCH_CELLS = 1 << 22

SCORE = "_score"
# The column item_scores names each scored item by.
ITEM_KEY = "_item"
_NAMES = {
    "judgments": "accuracy over judgments (each order shown counts)",
    "pairs": "accuracy over pairs",
    "users": "user accuracy (each user's accuracy, averaged over users)",
}


@dataclass(frozen=True)
class Headline:
    """The figure a run ranks by: a unit scored by a set of rules, under prbj's protocol or the official one."""

    rules: ScoringProtocol = PRBJ_RULES
    protocol: RunProtocol = "prbj"

    @property
    def unit(self) -> str:
        return self.rules.unit

    @property
    def native(self) -> bool:
        """Whether summary.json's own figures are the headline (prbj's rules over pairs or users)."""
        rules = self.rules
        plain = (rules.failures, rules.ties, rules.interval) == ("excluded", "wrong", "cluster-users")
        return plain and rules.unit in ("pairs", "users")

    @property
    def short(self) -> str:
        """The column header of the headline: `users`, `pairs`, `judgments`, or `official` under the official
        protocol."""
        return "official" if self.protocol == "official" else self.rules.unit

    @property
    def name(self) -> str:
        """What the figure is, in words (report notes, exports)."""
        rules = self.rules
        words = _NAMES[rules.unit]
        if self.native:
            return words
        interval = {
            "cluster-users": "Korn–Graubard interval over users",
            "basic-bootstrap": f"scipy's basic bootstrap over {rules.unit}",
            "percentile-bootstrap": f"percentile bootstrap over {rules.unit}",
        }[rules.interval]
        return f"{words}; a failure counts {_count(rules.failures)}, a tie {_count(rules.ties)}; {interval}"

    def value(self, row: GroupStats | None) -> float | None:
        if row is None:
            return None
        if not self.native:
            return row.headline
        if self.rules.unit == "users" and row.user_accuracy is not None:
            return row.user_accuracy
        return row.accuracy

    def interval(self, row: GroupStats | None) -> tuple[float | None, float | None]:
        if row is None:
            return (None, None)
        if not self.native:
            return (row.headline_ci_low, row.headline_ci_high)
        if self.rules.unit == "users" and row.user_accuracy is not None:
            return (row.user_ci_low, row.user_ci_high)
        return (row.ci_low, row.ci_high)

    def is_users(self, row: GroupStats | None) -> bool:
        """Whether the figure in `row` is a mean over users that differs from pair accuracy."""
        return (
            self.native and self.rules.unit == "users" and row is not None and row.user_accuracy is not None
        )

    def as_dict(self) -> dict[str, Any]:
        return {"protocol": self.protocol, **self.rules.as_dict()}


DEFAULT_HEADLINE = Headline()


def _count(counting: Counting) -> str:
    return {"wrong": "as wrong", "excluded": "not at all", "half": "as half right"}[counting]


def run_headline(rules: ScoringProtocol | None, protocol: RunProtocol) -> Headline:
    """A run's headline: the card's unit (users without a card protocol), by prbj's rules or, under
    `--protocol official` with a protocol that says where it was read, by the card's."""
    if rules is None:
        return DEFAULT_HEADLINE
    if protocol == "official" and rules.reproducible:
        return Headline(rules, "official")
    return Headline(rules.with_prbj_rules(), "prbj")


def headline_of(summary: Mapping[str, Any] | None) -> Headline:
    """The headline a summary.json (or a baseline) records; prbj's default for one that records none (every run
    made before headlines were, and every run without a card protocol). A value this version does not know is
    read as the default, never guessed."""
    recorded = summary.get("headline") if isinstance(summary, Mapping) else None
    if not isinstance(recorded, Mapping):
        return DEFAULT_HEADLINE
    fields: dict[str, Any] = {}
    for key, allowed in (
        ("order", ORDERS),
        ("unit", UNITS),
        ("failures", COUNTINGS),
        ("ties", COUNTINGS),
        ("interval", INTERVALS),
    ):
        value = recorded.get(key)
        if value is None and key == "order":
            continue
        if value not in allowed:
            return DEFAULT_HEADLINE
        fields[key] = value
    source = recorded.get("source")
    protocol: RunProtocol = "official" if recorded.get("protocol") == "official" else "prbj"
    return Headline(ScoringProtocol(**fields, source=source if isinstance(source, str) else None), protocol)


# --- scoring ----------------------------------------------------------------------------------------------------


def _counted(value: Counting) -> pl.Expr:
    return pl.lit({"wrong": 0.0, "excluded": None, "half": 0.5}[value], dtype=pl.Float64)


def _row_score(rules: ScoringProtocol) -> pl.Expr:
    """Each judgment row's outcome as a score: 1 right, 0 wrong; a tie and a failure as the rules count them
    (null: left out)."""
    ok = pl.col("status") == "ok"
    return (
        pl.when(ok & pl.col("tie").fill_null(False))
        .then(_counted(rules.ties))
        .when(ok)
        .then(pl.col("correct").fill_null(False).cast(pl.Float64))
        .otherwise(_counted(rules.failures))
    )


def _order_score(column: str, rules: ScoringProtocol) -> pl.Expr:
    """One shown order's outcome: its own pick, whatever the other order did (a tie where the judge favoured
    neither answer in it: a plugin's `prefer` of exactly 1/2); a withheld verdict fails both."""
    pick = pl.col(column)
    return (
        pl.when(pl.col("status") == ABSTAINED)
        .then(_counted(rules.failures))
        .when(pick == "chosen")
        .then(pl.lit(1.0))
        .when(pick == "rejected")
        .then(pl.lit(0.0))
        .when(pick == "tie")
        .then(_counted(rules.ties))
        .otherwise(_counted(rules.failures))
    )


def item_scores(frame: pl.DataFrame, rules: ScoringProtocol) -> pl.DataFrame:
    """The scored items under the rules: one row per judgment shown (unit `judgments`) or per judgment row
    (`pairs` and `users`), with columns `_user`, `_item` (the pair id; with `#A` / `#B` for an order of a pair
    shown in both, `#1` / `#2` for the copies of an order-free judgment) and `_score` (null: left out)."""
    if "chosen_position" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias("chosen_position"))
    who = user_expr(frame)

    def items(part: pl.DataFrame, score: pl.Expr, suffix: str = "") -> pl.DataFrame:
        key = pl.col("pair_id").cast(pl.String) + pl.lit(suffix)
        return part.select(who, key.alias(ITEM_KEY), score.alias(SCORE))

    if rules.unit != "judgments":
        return items(frame, _row_score(rules))
    position = pl.col("chosen_position")
    both = frame.filter(position == "both")
    placed = frame.filter(position.is_in(["A", "B"]))
    unplaced = frame.filter(position.is_null())
    # A judge that sees no order gives the same outcome in every order the protocol shows a pair in.
    copies = ["#1", "#2"] if rules.order == "both" else [""]
    return pl.concat(
        [
            items(both, _order_score("verdict_chosen_a", rules), "#A"),
            items(both, _order_score("verdict_chosen_b", rules), "#B"),
            items(placed, _row_score(rules)),
            *(items(unplaced, _row_score(rules), suffix) for suffix in copies),
        ]
    )


def scores_by_group(
    judgments: pl.DataFrame, rules: ScoringProtocol
) -> dict[tuple[str, str], dict[str, float | None]]:
    """Per judge × context, each item's score under the rules, by its key (item_scores)."""
    found: dict[tuple[str, str], dict[str, float | None]] = {}
    for (judge, context), part in judgments.group_by("judge", "context", maintain_order=True):
        scored = item_scores(part, rules)
        found[(str(judge), str(context))] = dict(
            zip(scored[ITEM_KEY].to_list(), scored[SCORE].to_list(), strict=True)
        )
    return found


def _per_user(items: pl.DataFrame) -> pl.DataFrame:
    """Per user with a counted item: points (in half-points, whole numbers) and what they could have been."""
    return (
        items.filter(pl.col(SCORE).is_not_null())
        .group_by(USER_KEY, maintain_order=True)
        .agg(
            (pl.col(SCORE) * 2).round().sum().cast(pl.Int64).alias("points"),
            (pl.len() * 2).cast(pl.Int64).alias("possible"),
        )
    )


@dataclass(frozen=True)
class HeadlineFigure:
    value: float | None
    ci_low: float | None
    ci_high: float | None
    # How many items of the unit were counted (judgments, pairs or users).
    n: int


def headline_figure(frame: pl.DataFrame, rules: ScoringProtocol, *, seed: int) -> HeadlineFigure:
    """The rules' figure on one group of judgments, with its interval."""
    items = item_scores(frame, rules)
    users = _per_user(items)
    if users.height == 0:
        return HeadlineFigure(None, None, None, 0)
    points, possible = users["points"].to_list(), users["possible"].to_list()
    if rules.unit == "users":
        shares = [Fraction(p, n) for p, n in zip(points, possible, strict=True)]
        value, count = sum(shares, Fraction(0)) / len(shares), len(shares)
        values = np.array([float(share) for share in shares])
    else:
        value, count = Fraction(sum(points), sum(possible)), sum(possible) // 2
        values = items[SCORE].drop_nulls().to_numpy().astype(np.float64)
    if rules.interval == "cluster-users":
        low, high = _cluster_interval(users, rules, seed=seed)
    else:
        method = "basic" if rules.interval == "basic-bootstrap" else "percentile"
        low, high = _authors_bootstrap(values, method, seed=seed)
    return HeadlineFigure(float(value), low, high, count)


def _authors_bootstrap(values: np.ndarray, method: str, *, seed: int) -> tuple[float | None, float | None]:
    """scipy.stats.bootstrap of the mean over the unit's items, as the authors call it (95%, 9,999 resamples),
    seeded by the run's seed (their call is unseeded). Two items at least; the basic interval may leave [0, 1],
    as theirs does."""
    if values.size < 2:
        return (None, None)
    from scipy.stats import bootstrap

    found = bootstrap(
        (values,),
        np.mean,
        confidence_level=CONFIDENCE,
        method=method,
        n_resamples=AUTHORS_RESAMPLES,
        batch=max(1, _BATCH_CELLS // values.size),
        rng=np.random.default_rng(seed),
    )
    return (float(found.confidence_interval.low), float(found.confidence_interval.high))


def _cluster_interval(
    users: pl.DataFrame, rules: ScoringProtocol, *, seed: int
) -> tuple[float | None, float | None]:
    """prbj's interval over users (prbj.analysis.clusters.accuracy_intervals, which holds with few users) on each
    user's points and possible points, in items (they are counted in half-points: as many again would cap the
    effective size at twice the items scored)."""
    found = accuracy_intervals(
        users["points"].to_numpy() / 2, users["possible"].to_numpy() / 2, confidence=CONFIDENCE
    )
    if found is None:
        return (None, None)
    return found.mean_of_clusters if rules.unit == "users" else found.pooled


def with_headlines(
    rows: Sequence[GroupStats], judgments: pl.DataFrame, headline: Headline, *, seed: int
) -> list[GroupStats]:
    """The results rows with their headline figures where the headline is not one of theirs already."""
    if headline.native:
        return list(rows)
    out = []
    for row in rows:
        mine = judgments.filter(pl.col("judge") == row.judge, pl.col("context") == row.context)
        if row.subset != ALL_SUBSETS:
            mine = mine.filter(pl.col("subset") == row.subset)
        figure = headline_figure(mine, headline.rules, seed=seed)
        out.append(
            replace(
                row,
                headline=figure.value,
                headline_ci_low=figure.ci_low,
                headline_ci_high=figure.ci_high,
            )
        )
    return out
