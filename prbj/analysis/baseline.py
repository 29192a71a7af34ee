"""Baseline files for `prbj check`: what a run scored, per group and per item, frozen in one JSON file.

A baseline holds the summary rows of the run it was made from (accuracy per judge × context × subset) and,
for the paired test, every item's outcome per judge × context: 1 correct, 0 wrong or tie, null failed.
Items are keyed by pair id (plus the answer order when a judge saw the same pair more than once), and
`items` maps each key to its subset. The layout, with indent=2 so that a changed outcome is a one-line diff:

    {
      "format": "prbj-baseline", "version": 1,
      "source_run": "20250101-120000-abc123", "prbj_version": "0.1.0",
      "dataset": {"source": "sample", "fingerprint": "...", "n_pairs": 60, "subsets": [...]},
      "seed": 42,
      "cost_usd": null,
      "results": [ {summary.json result row}, ... ],
      "items": {"<item key>": "<subset>", ...},
      "outcomes": [ {"judge": "length", "context": "none", "items": {"<item key>": 1, ...}}, ... ]
    }
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from prbj import __version__
from prbj.analysis.headline import DEFAULT_HEADLINE, Headline, headline_of, scores_by_group
from prbj.analysis.run_data import RunData, result_rows
from prbj.analysis.stats import GroupStats
from prbj.data.files import read_json, write_json
from prbj.errors import DataError

BASELINE_FORMAT = "prbj-baseline"
BASELINE_VERSION = 1
COST_COLUMN = "cost_usd"
CACHED_COLUMN = "cached"

GroupKey = tuple[str, str]
# Item outcome: True correct, False wrong or tie, None failed (parse/API error, skipped).
Outcomes = dict[str, bool | None]


@dataclass(frozen=True)
class Baseline:
    source_run: str
    dataset: dict[str, Any]
    seed: Any
    results: list[GroupStats]
    items: dict[str, str]
    outcomes: dict[GroupKey, Outcomes]
    cost_usd: float | None = None
    # The figure the run ranked by (prbj.analysis.headline), and, where it is not accuracy or user accuracy
    # (which the outcomes above give), each item's score under it: 1, 0.5, 0 or None (left out).
    headline: Headline = DEFAULT_HEADLINE
    headline_outcomes: dict[GroupKey, dict[str, float | None]] = field(default_factory=dict)

    def scores(self, group: GroupKey) -> dict[str, float | None]:
        """Each item's headline score for one judge × context."""
        if not self.headline.native:
            return self.headline_outcomes.get(group, {})
        return {
            key: None if value is None else float(value)
            for key, value in self.outcomes.get(group, {}).items()
        }


def item_outcomes(judgments: pl.DataFrame) -> tuple[dict[GroupKey, Outcomes], dict[str, str]]:
    """Per judge × context, each item's outcome; and each item's subset."""
    outcomes: dict[GroupKey, Outcomes] = {}
    items: dict[str, str] = {}
    has_position = "chosen_position" in judgments.columns
    columns = ["judge", "context", "pair_id", "subset", "status", "correct"]
    columns += ["chosen_position"] if has_position else []
    for row in judgments.select(columns).iter_rows(named=True):
        mine = outcomes.setdefault((row["judge"], row["context"]), {})
        key = _unique_key(mine, row["pair_id"], row.get("chosen_position"))
        mine[key] = bool(row["correct"]) if row["status"] == "ok" else None
        items[key] = row["subset"]
    return outcomes, items


def _unique_key(taken: Outcomes, pair_id: str, position: str | None) -> str:
    """The pair id; when the same judge saw the pair again (both answer orders, repeated samples), the order
    and then an occurrence number tell the rows apart, the same way in every run."""
    if pair_id not in taken:
        return pair_id
    key = f"{pair_id}#{position}" if position else f"{pair_id}#2"
    occurrence = 2
    while key in taken:
        occurrence += 1
        key = f"{pair_id}#{position or ''}{occurrence}"
    return key


def spent_usd(judgments: pl.DataFrame) -> float | None:
    """What the run paid: recorded cost of judgments not served from the cache; None when no cost was
    recorded at all."""
    if COST_COLUMN not in judgments.columns or judgments[COST_COLUMN].drop_nulls().len() == 0:
        return None
    paid = judgments
    if CACHED_COLUMN in judgments.columns:
        paid = judgments.filter(~pl.col(CACHED_COLUMN).fill_null(False))
    return float(paid[COST_COLUMN].drop_nulls().sum())


def baseline_from_run(run: RunData) -> Baseline:
    outcomes, items = item_outcomes(run.judgments)
    headline = headline_of(run.summary)
    scored = {} if headline.native else scores_by_group(run.judgments, headline.rules)
    return Baseline(
        source_run=run.run_id,
        dataset=dict(run.dataset),
        seed=run.summary.get("seed"),
        results=run.results,
        items=items,
        outcomes=outcomes,
        cost_usd=spent_usd(run.judgments),
        headline=headline,
        headline_outcomes=scored,
    )


def baseline_document(baseline: Baseline) -> dict[str, Any]:
    return {
        "format": BASELINE_FORMAT,
        "version": BASELINE_VERSION,
        "source_run": baseline.source_run,
        "prbj_version": __version__,
        "dataset": baseline.dataset,
        "seed": baseline.seed,
        "cost_usd": baseline.cost_usd,
        "results": [row.as_dict() for row in baseline.results],
        "items": dict(sorted(baseline.items.items())),
        "outcomes": [
            {
                "judge": judge,
                "context": context,
                "items": {key: None if value is None else int(value) for key, value in sorted(items.items())},
            }
            for (judge, context), items in baseline.outcomes.items()
        ],
        **_headline_part(baseline),
    }


def _headline_part(baseline: Baseline) -> dict[str, Any]:
    """The headline and its item scores, for a baseline whose headline is not the default (a plain baseline's
    file stays what it was)."""
    if baseline.headline == DEFAULT_HEADLINE:
        return {}
    return {
        "headline": baseline.headline.as_dict(),
        "headline_outcomes": [
            {"judge": judge, "context": context, "items": dict(sorted(items.items()))}
            for (judge, context), items in baseline.headline_outcomes.items()
        ],
    }


def write_baseline(baseline: Baseline, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, baseline_document(baseline))


def read_baseline(path: Path) -> Baseline:
    document = read_json(path)
    if not isinstance(document, dict) or document.get("format") != BASELINE_FORMAT:
        raise DataError(
            f"{path}: field 'format': not a prbj baseline (write one with prbj check RUN --baseline "
            f"{path} --update-baseline)"
        )
    if document.get("version") != BASELINE_VERSION:
        raise DataError(f"{path}: field 'version': {document.get('version')!r} is not supported")
    items = document.get("items")
    if not isinstance(items, dict):
        raise DataError(f"{path}: field 'items': missing or not an object")
    outcomes: dict[GroupKey, Outcomes] = {}
    entries = document.get("outcomes")
    if not isinstance(entries, list):
        raise DataError(f"{path}: field 'outcomes': missing or not a list")
    for index, entry in enumerate(entries):
        where = f"{path}: field 'outcomes[{index}]'"
        if not isinstance(entry, dict) or not isinstance(entry.get("items"), dict):
            raise DataError(f"{where}: needs judge, context and items")
        values = {}
        for key, value in entry["items"].items():
            if value not in (0, 1, None):
                raise DataError(f"{where}.items.{key}: {value!r} is not 1, 0 or null")
            values[key] = None if value is None else bool(value)
        outcomes[(str(entry.get("judge")), str(entry.get("context")))] = values
    cost = document.get("cost_usd")
    headline = headline_of(document)
    return Baseline(
        source_run=str(document.get("source_run", "?")),
        dataset=document.get("dataset") or {},
        seed=document.get("seed"),
        results=result_rows(document, path),
        items={str(k): str(v) for k, v in items.items()},
        outcomes=outcomes,
        cost_usd=None if cost is None else float(cost),
        headline=headline,
        headline_outcomes=_headline_outcomes(document, path),
    )


def _headline_outcomes(document: dict[str, Any], path: Path) -> dict[GroupKey, dict[str, float | None]]:
    entries = document.get("headline_outcomes", [])
    if not isinstance(entries, list):
        raise DataError(f"{path}: field 'headline_outcomes': not a list")
    found: dict[GroupKey, dict[str, float | None]] = {}
    for index, entry in enumerate(entries):
        where = f"{path}: field 'headline_outcomes[{index}]'"
        if not isinstance(entry, dict) or not isinstance(entry.get("items"), dict):
            raise DataError(f"{where}: needs judge, context and items")
        scores: dict[str, float | None] = {}
        for key, value in entry["items"].items():
            if value not in (0, 0.5, 1, None) or isinstance(value, bool):
                raise DataError(f"{where}.items.{key}: {value!r} is not 1, 0.5, 0 or null")
            scores[str(key)] = None if value is None else float(value)
        found[(str(entry.get("judge")), str(entry.get("context")))] = scores
    return found
