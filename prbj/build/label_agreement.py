"""Agreement of the labels reviewers gave a run's pairs in `prbj view` (labels.jsonl): with the benchmark's
label and between reviewers, as Cohen's κ.

Against the benchmark, labels are compared by the slot the reviewer saw (A or B): the benchmark's answer is
the slot the chosen answer was shown in, so both raters vary and κ measures agreement beyond chance (in
chosen/rejected terms the benchmark always says "chosen", and κ would be 0 by construction). Between reviewers
they are compared in chosen / rejected / can't-tell terms, over the pairs both labelled."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from rich import box
from rich.table import Table

from prbj.build.kappa import cohen_kappa
from prbj.data.labels import PREFERENCES, Label, latest_labels

SLOTS = ("A", "B", "cant_tell")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _by_reviewer(labels: Sequence[Label]) -> dict[str, dict[str, Label]]:
    reviewers: dict[str, dict[str, Label]] = {}
    for (pair_id, reviewer), label in latest_labels(labels).items():
        reviewers.setdefault(reviewer, {})[pair_id] = label
    return dict(sorted(reviewers.items()))


def _with_benchmark(reviewer: str, labels: dict[str, Label]) -> dict[str, Any]:
    decided = [label for label in labels.values() if label.preference != "cant_tell"]
    placed = [label for label in labels.values() if label.shown_as_a is not None]
    truth = ["A" if label.shown_as_a == "chosen" else "B" for label in placed]
    said = [label.slot or "cant_tell" for label in placed]
    kappa = cohen_kappa(said, truth, categories=SLOTS)
    return {
        "reviewer": reviewer,
        "n_pairs": len(labels),
        "cant_tell": len(labels) - len(decided),
        "agrees_with_benchmark": (
            None if not decided else round(sum(lb.preference == "chosen" for lb in decided) / len(decided), 4)
        ),
        "kappa": _round(kappa),
    }


def _between(a: str, b: str, first: dict[str, Label], second: dict[str, Label]) -> dict[str, Any]:
    shared = sorted(set(first) & set(second))
    value = cohen_kappa(
        [first[p].preference for p in shared], [second[p].preference for p in shared], categories=PREFERENCES
    )
    same = sum(first[p].preference == second[p].preference for p in shared)
    return {
        "a": a,
        "b": b,
        "n_pairs": len(shared),
        "same_label": None if not shared else round(same / len(shared), 4),
        "kappa": _round(value),
    }


def label_agreement(labels: Sequence[Label]) -> dict[str, Any]:
    reviewers = _by_reviewer(labels)
    pairs = {pair_id for mine in reviewers.values() for pair_id in mine}
    return {
        "n_labels": len(labels),
        "n_pairs": len(pairs),
        "reviewers": list(reviewers),
        "with_benchmark": [_with_benchmark(name, mine) for name, mine in reviewers.items()],
        "between_reviewers": [
            _between(a, b, reviewers[a], reviewers[b]) for a, b in itertools.combinations(reviewers, 2)
        ],
    }


def _figure(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def label_tables(report: dict[str, Any]) -> list[Table]:
    benchmark = Table(
        title=f"Reviewers' labels vs the benchmark's ({report['n_pairs']} pairs, {report['n_labels']} labels)",
        box=box.SIMPLE_HEAD,
        show_edge=False,
    )
    for name in ("reviewer", "pairs", "can't tell", "agree", "κ"):
        benchmark.add_column(name, justify="left" if name == "reviewer" else "right")
    for row in report["with_benchmark"]:
        benchmark.add_row(
            row["reviewer"],
            str(row["n_pairs"]),
            str(row["cant_tell"]),
            _figure(row["agrees_with_benchmark"]),
            _figure(row["kappa"]),
        )
    between = Table(title="Between reviewers (Cohen's κ)", box=box.SIMPLE_HEAD, show_edge=False)
    for name in ("reviewers", "pairs", "same label", "κ"):
        between.add_column(name, justify="left" if name == "reviewers" else "right")
    for row in report["between_reviewers"]:
        between.add_row(
            f"{row['a']} vs {row['b']}",
            str(row["n_pairs"]),
            _figure(row["same_label"]),
            _figure(row["kappa"]),
        )
    return [benchmark, between]
