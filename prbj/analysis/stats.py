"""Accuracy, ties, failures, bootstrap intervals and length control, per judge × context × subset."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import polars as pl

from prbj.analysis.small_samples import SMALL_SAMPLE, clopper_pearson
from prbj.analysis.user_counts import user_figures, users_repeat
from prbj.data.status import ABSTAINED
from prbj.data.user_columns import CANDIDATES

ALL_SUBSETS = "all"
BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95


def bootstrap_ci(
    outcomes: np.ndarray,
    *,
    seed: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of 0/1 outcomes, resampling items with replacement."""
    values = np.asarray(outcomes, dtype=np.float64)
    if values.size == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    # Resampling 0/1 outcomes is the same as drawing binomial counts: far cheaper than index matrices.
    means = rng.binomial(values.size, values.mean(), size=resamples) / values.size
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return (float(low), float(high))


def uses_bootstrap(n: int, right: int) -> bool:
    """Whether accuracy_interval draws the percentile bootstrap for `right` of `n` independent outcomes (from
    SMALL_SAMPLE outcomes, strictly between 0% and 100%), not the exact Clopper–Pearson interval."""
    return n >= SMALL_SAMPLE and 0 < right < n


def accuracy_interval(
    outcomes: np.ndarray,
    *,
    seed: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> tuple[float | None, float | None]:
    """The interval of accuracy over independent 0/1 outcomes (pairs, each its own user): none under 2 (one
    outcome has no spread to show); the exact Clopper–Pearson interval at 0%, at 100% (where every resample
    repeats the same figure) and under SMALL_SAMPLE outcomes (where the percentile bootstrap covers too
    rarely); the percentile bootstrap otherwise."""
    values = np.asarray(outcomes, dtype=np.float64)
    n = int(values.size)
    if n < 2:
        return (None, None)
    right = int(values.sum())
    if not uses_bootstrap(n, right):
        return clopper_pearson(float(right), float(n), confidence)
    return bootstrap_ci(values, seed=seed, resamples=resamples, confidence=confidence)


@dataclass(frozen=True, slots=True)
class GroupStats:
    judge: str
    context: str
    subset: str
    n: int
    n_ok: int
    correct: int
    ties: int
    parse_errors: int
    api_errors: int
    skipped_budget: int
    skipped_cache: int
    accuracy: float | None
    ci_low: float | None
    ci_high: float | None
    tie_rate: float | None
    picked_longer: float | None
    length_controlled_accuracy: float | None
    # Pairwise judges only (None otherwise): accuracy with the chosen answer shown as A / as B, the share of
    # "A" verdicts, A-minus-B accuracy (position bias), and for --order both the share of order-consistent pairs.
    accuracy_chosen_a: float | None = None
    accuracy_chosen_b: float | None = None
    share_a: float | None = None
    position_bias: float | None = None
    order_consistency: float | None = None
    # Judgments failed because the planner named no aspect (`planner` context only; they are not parse errors).
    planner_errors: int = 0
    # Scored judges only (None otherwise): decided pairs whose score margin is under TIE_RISK_MARGIN in size.
    # Batching changes a float32 score by up to ~6e-8, so such a verdict could flip with --batch-tokens or a
    # device; exact ties are counted in `ties`, not here.
    tie_risk: int | None = None
    # Verdicts withheld below a --selective threshold: answered, never counted as correct or as failed. None
    # (and left out of summary.json) when no verdict was withheld, so other runs' summaries stay as they were.
    abstained: int | None = None
    # Where users repeat (prbj.analysis.users; None, and left out of summary.json, where each user has one pair,
    # for then they are the pair figures): users with a judgment and with a decided one, the mean of per-user
    # accuracies and its interval. ci_low/ci_high above then resample users too.
    n_users: int | None = None
    n_users_decided: int | None = None
    user_accuracy: float | None = None
    user_ci_low: float | None = None
    user_ci_high: float | None = None
    # The headline where it is none of the figures above (prbj.analysis.headline: a card's unit of judgments,
    # or the card's own rules under --protocol official): the figure and its interval. None, and left out of
    # summary.json, where the headline is accuracy or user accuracy.
    headline: float | None = None
    headline_ci_low: float | None = None
    headline_ci_high: float | None = None

    @property
    def failed(self) -> int:
        """Judgments that did not end ok, and were not withheld on purpose: errors, budget or cache skips, and
        statuses added later alike. (A row read back from an older summary.json may lack counts: those count
        as 0.)"""
        return (self.n or 0) - (self.n_ok or 0) - (self.abstained or 0)

    @property
    def coverage(self) -> float | None:
        """The share of answered judgments whose verdict was kept (--selective); None when none was withheld."""
        if not self.abstained:
            return None
        answered = (self.n_ok or 0) + self.abstained
        return (self.n_ok or 0) / answered if answered else None

    def as_dict(self) -> dict[str, Any]:
        row = asdict(self)
        for name in _ONLY_WHEN_PRESENT:
            if row[name] is None:
                del row[name]
        return row


# Fields summary.json holds only when they have a value, so that runs without them keep the file they had.
_ONLY_WHEN_PRESENT = (
    "abstained",
    "n_users",
    "n_users_decided",
    "user_accuracy",
    "user_ci_low",
    "user_ci_high",
    "headline",
    "headline_ci_low",
    "headline_ci_high",
)


TIE_RISK_MARGIN = 1e-6


def _tie_risk(ok: pl.DataFrame) -> int | None:
    margins = ok["margin"].drop_nulls() if "margin" in ok.columns else None
    if margins is None or margins.len() == 0:
        return None
    size = margins.abs()
    return int(((size > 0) & (size < TIE_RISK_MARGIN)).sum())


def _rate(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def _length_stats(group: pl.DataFrame) -> tuple[float | None, float | None]:
    """How often the judge picked the longer answer, and accuracy with chosen-longer and chosen-shorter pairs
    weighted equally, so that a judge that just prefers length lands near 50%. Pairs only: of a best-of-k item
    the judgment records the words of the preferred answer and of the first other, not of the one picked."""
    if CANDIDATES in group.columns:
        group = group.filter(pl.col(CANDIDATES).fill_null(2) <= 2)
    decided = group.filter(pl.col("status") == "ok", pl.col("chosen_words") != pl.col("rejected_words"))
    if decided.height == 0:
        return None, None
    chosen_longer = decided["chosen_words"] > decided["rejected_words"]
    picked_chosen = decided["verdict"] == "chosen"
    picked_rejected = decided["verdict"] == "rejected"
    picked_longer = int(((chosen_longer & picked_chosen) | (~chosen_longer & picked_rejected)).sum())
    halves = [_share(picked_chosen.filter(mask)) for mask in (chosen_longer, ~chosen_longer) if mask.any()]
    return picked_longer / decided.height, float(np.mean(halves))


def _share(flags: pl.Series) -> float:
    """The share of true values in a non-empty boolean series (polars types `mean()` loosely)."""
    return int(flags.sum()) / flags.len()


def _position_stats(group: pl.DataFrame) -> dict[str, float | None]:
    if "verdict_chosen_a" not in group.columns:
        return {}
    ok = group.filter(pl.col("status") == "ok")
    in_a = ok["verdict_chosen_a"].drop_nulls()
    in_b = ok["verdict_chosen_b"].drop_nulls()
    if in_a.len() + in_b.len() == 0:
        return {}
    acc_a = _share(in_a == "chosen") if in_a.len() else None
    acc_b = _share(in_b == "chosen") if in_b.len() else None
    said_a = int((in_a == "chosen").sum()) + int((in_b == "rejected").sum())
    both = ok.filter(pl.col("chosen_position") == "both")
    return {
        "accuracy_chosen_a": acc_a,
        "accuracy_chosen_b": acc_b,
        "share_a": said_a / (in_a.len() + in_b.len()),
        "position_bias": acc_a - acc_b if acc_a is not None and acc_b is not None else None,
        "order_consistency": _share(both["verdict"] != "inconsistent") if both.height else None,
    }


def group_stats(
    frame: pl.DataFrame, *, judge: str, context: str, subset: str, seed: int, users: bool = False
) -> GroupStats:
    """The figures of one group of judgments; with `users` (users repeat in the run) the user figures too, and
    pair accuracy's interval from resampling users."""
    ok = frame.filter(pl.col("status") == "ok")
    correct = int(ok["correct"].sum())
    ties = int(ok["tie"].sum())
    status_counts = dict(frame.group_by("status").len().iter_rows())
    low, high = accuracy_interval(ok["correct"].cast(pl.Float64).to_numpy(), seed=seed)
    picked_longer, lc_accuracy = _length_stats(frame)
    figures = None
    if users:
        figures = user_figures(
            frame, accuracy=_rate(correct, ok.height), pair_interval=(low, high), confidence=CONFIDENCE
        )
        # Pair accuracy's interval resamples users too.
        low, high = figures.ci_low, figures.ci_high
    return GroupStats(
        judge=judge,
        context=context,
        subset=subset,
        n=frame.height,
        n_ok=ok.height,
        correct=correct,
        ties=ties,
        parse_errors=int(status_counts.get("parse_error", 0)),
        api_errors=int(status_counts.get("api_error", 0)),
        skipped_budget=int(status_counts.get("skipped_budget", 0)),
        skipped_cache=int(status_counts.get("skipped_cache", 0)),
        accuracy=_rate(correct, ok.height),
        ci_low=low,
        ci_high=high,
        tie_rate=_rate(ties, ok.height),
        picked_longer=picked_longer,
        length_controlled_accuracy=lc_accuracy,
        **_position_stats(frame),
        planner_errors=int(status_counts.get("planner_error", 0)),
        tie_risk=_tie_risk(ok),
        abstained=int(status_counts.get(ABSTAINED, 0)) or None,
        n_users=figures.n_users if figures else None,
        n_users_decided=figures.n_users_decided if figures else None,
        user_accuracy=figures.user_accuracy if figures else None,
        user_ci_low=figures.user_ci_low if figures else None,
        user_ci_high=figures.user_ci_high if figures else None,
    )


def summarize(judgments: pl.DataFrame, *, seed: int) -> list[GroupStats]:
    """One row per judge × context for all subsets together, then one per subset, in a stable order; with user
    figures in every row when some user has more than one pair."""
    users = users_repeat(judgments)
    rows: list[GroupStats] = []
    keys = judgments.select("judge", "context").unique(maintain_order=True).iter_rows()
    for judge, context in keys:
        mine = judgments.filter(pl.col("judge") == judge, pl.col("context") == context)
        rows.append(
            group_stats(mine, judge=judge, context=context, subset=ALL_SUBSETS, seed=seed, users=users)
        )
        for subset in sorted(mine["subset"].unique().to_list()):
            part = mine.filter(pl.col("subset") == subset)
            rows.append(
                group_stats(part, judge=judge, context=context, subset=subset, seed=seed, users=users)
            )
    return rows
