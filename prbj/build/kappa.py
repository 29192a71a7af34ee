"""Cohen's κ between two raters: unweighted for categories, linear or quadratic weights for ordinal ratings.

κ = 1 − Σ w·O / Σ w·E, where O is the observed joint distribution of the two raters' labels, E the product of
their marginals (agreement expected by chance) and w the disagreement weight of each cell: 0 on the diagonal and
1 elsewhere (unweighted), |i − j| / (k − 1) (linear) or (i − j)² / (k − 1)² (quadratic) for categories at
positions i and j of the ordered scale.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal

import numpy as np

Weights = Literal["none", "linear", "quadratic"]


def cohen_kappa(
    first: Sequence[Hashable],
    second: Sequence[Hashable],
    *,
    categories: Sequence[Hashable] | None = None,
    weights: Weights = "none",
) -> float | None:
    """κ for two equally long label sequences; None when it is undefined (no items, or chance agreement is
    already perfect because both raters gave one and the same label throughout)."""
    if len(first) != len(second):
        raise ValueError(f"the raters labelled different numbers of items ({len(first)} vs {len(second)})")
    if not first:
        return None
    scale = list(categories) if categories is not None else sorted(set(first) | set(second), key=str)
    position = {label: i for i, label in enumerate(scale)}
    unknown = [label for label in (*first, *second) if label not in position]
    if unknown:
        raise ValueError(f"label {unknown[0]!r} is not on the scale {scale}")
    k = len(scale)
    observed = np.zeros((k, k))
    for a, b in zip(first, second, strict=True):
        observed[position[a], position[b]] += 1
    observed /= observed.sum()
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    i, j = np.indices((k, k))
    if weights == "none" or k < 2:
        w = (i != j).astype(float)
    elif weights == "linear":
        w = np.abs(i - j) / (k - 1)
    elif weights == "quadratic":
        w = (i - j) ** 2 / (k - 1) ** 2
    else:
        raise ValueError(f"unknown weights {weights!r}")
    chance = float((w * expected).sum())
    if chance == 0.0:
        return None
    return 1.0 - float((w * observed).sum()) / chance
