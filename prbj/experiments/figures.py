"""The paper's figures from an experiment's judge runs: accuracy against parameter count with Spearman's ρ,
and the effect of each context against `none` as paired differences. Pure functions over tables already
loaded; every interval is a 95% percentile bootstrap with the experiment's seed."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl

from prbj.analysis.correlate import bootstrap_over_rms, spearman
from prbj.analysis.stats import ALL_SUBSETS, BOOTSTRAP_RESAMPLES, CONFIDENCE

NONE = "none"
# Contexts whose effect is measured against `none`, in the order the paper discusses them.
EFFECT_CONTEXTS = ("profile", "planner", "synthesized", "swapped-profile", "oracle")


@dataclass(frozen=True)
class Outcomes:
    """One judge entry in one context: pair id → correct, over judgments that ended ok."""

    entry: str
    context: str
    correct: Mapping[str, bool]


def entry_outcomes(entry: str, judgments: pl.DataFrame) -> list[Outcomes]:
    ok = judgments.filter(pl.col("status") == "ok")
    found: dict[str, dict[str, bool]] = {}
    for context, pair_id, correct in ok.select("context", "pair_id", "correct").iter_rows():
        found.setdefault(str(context), {})[str(pair_id)] = bool(correct)
    return [Outcomes(entry, context, correct) for context, correct in found.items()]


def paired(first: Mapping[str, bool], second: Mapping[str, bool]) -> tuple[np.ndarray, np.ndarray]:
    shared = sorted(first.keys() & second.keys())
    return (
        np.array([first[k] for k in shared], dtype=np.float64),
        np.array([second[k] for k in shared], dtype=np.float64),
    )


def mean_difference_ci(
    first: np.ndarray, second: np.ndarray, *, seed: int, resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of mean(first − second), resampling rows (pairs) with replacement."""
    diff = np.asarray(first, dtype=np.float64) - np.asarray(second, dtype=np.float64)
    if diff.size == 0:
        return None, None
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, diff.size, size=(resamples, diff.size))].mean(axis=1)
    alpha = (1.0 - CONFIDENCE) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


@dataclass(frozen=True)
class Difference:
    """Paired accuracy difference first − second on the pairs both answered."""

    n: int
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    # Share of pairs on which exactly one side is right (ψ of `prbj power`).
    discordance: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def difference(first: np.ndarray, second: np.ndarray, *, seed: int) -> Difference:
    n = int(first.size)
    if n == 0:
        return Difference(0, None, None, None, None)
    low, high = mean_difference_ci(first, second, seed=seed)
    return Difference(
        n=n,
        difference=float(np.mean(first - second)),
        ci_low=low,
        ci_high=high,
        discordance=float(np.mean(np.abs(first - second) > 0.5)) if _binary(first, second) else None,
    )


def _binary(*arrays: np.ndarray) -> bool:
    return all(bool(np.isin(a, (0.0, 1.0)).all()) for a in arrays)


@dataclass(frozen=True)
class ContextEffect:
    entry: str
    context: str
    against: str
    effect: Difference

    def as_dict(self) -> dict[str, object]:
        return {
            "entry": self.entry,
            "context": self.context,
            "against": self.against,
            **self.effect.as_dict(),
        }


def context_effects(outcomes: Sequence[Outcomes], *, seed: int) -> list[ContextEffect]:
    """Per judge entry that ran in `none` and another context: accuracy(context) − accuracy(none), paired."""
    by_entry: dict[str, dict[str, Mapping[str, bool]]] = {}
    for o in outcomes:
        by_entry.setdefault(o.entry, {})[o.context] = o.correct
    effects = []
    for entry, contexts in by_entry.items():
        if NONE not in contexts:
            continue
        for context in EFFECT_CONTEXTS:
            if context in contexts:
                first, second = paired(contexts[context], contexts[NONE])
                effects.append(ContextEffect(entry, context, NONE, difference(first, second, seed=seed)))
    return effects


@dataclass(frozen=True)
class SizePoint:
    entry: str
    context: str
    params_b: float
    accuracy: float


@dataclass(frozen=True)
class SizeFigure:
    points: list[SizePoint]
    spearman: float | None
    ci_low: float | None
    ci_high: float | None

    def as_dict(self) -> dict[str, object]:
        return {
            "points": [asdict(p) for p in self.points],
            "n": len(self.points),
            "spearman": self.spearman,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "interval": f"{CONFIDENCE:.0%} bootstrap over reward models",
        }


def size_figure(points: Sequence[SizePoint], *, seed: int) -> SizeFigure:
    """Spearman's ρ between parameter count and accuracy (a rank statistic: the log scale of the chart does
    not change it), with a bootstrap interval over reward models."""
    points = list(points)
    if len(points) < 3:
        return SizeFigure(points, None, None, None)
    x = np.array([math.log10(p.params_b) for p in points])
    y = np.array([p.accuracy for p in points])
    rho = float(spearman(x, y))
    interval = bootstrap_over_rms(x, y, {"spearman": spearman}, seed=seed)["spearman"]
    return SizeFigure(points, rho if math.isfinite(rho) else None, interval.low, interval.high)


def overall_accuracy(results: Sequence[object], judge: str, context: str) -> float | None:
    """The accuracy over all subsets of one judge in one context from a run's summary rows."""
    for row in results:
        if (
            getattr(row, "judge", None) == judge
            and getattr(row, "context", None) == context
            and getattr(row, "subset", None) == ALL_SUBSETS
        ):
            return getattr(row, "accuracy", None)
    return None
