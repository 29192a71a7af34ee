"""Intervals and tests when pairs come in clusters (the pairs of one user): the cluster bootstrap, which
resamples whole clusters with replacement and keeps every pair of each, and Obuchowski's clustered McNemar test.
The intervals prbj reports over users, `accuracy_intervals` and `paired_cluster_interval`, come from effective
sizes and Student's t over clusters instead of the bootstrap, which cannot hold with few clusters or at 0% and
100% (bench/small_users.py measures both; the bootstrap stays for comparison there).

Both work on per-cluster counts, never on pairs. A statistic of resampled clusters depends only on how many
times each *kind* of cluster was drawn, where a kind is a cluster's counts (correct and decided pairs, say), and
drawing G clusters uniformly with replacement puts Multinomial(G, kind shares) draws on the kinds. So the
bootstrap draws one multinomial row per resample over the kinds (a handful: a user with at most 15 pairs has at
most 136 kinds), which is exact, vectorised and cheap at any number of users.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from prbj.analysis.small_samples import at_the_edge, kish_size, korn_graubard, t_quantile

# Cells of one block of multinomial draws (resamples × kinds), so that memory stays flat with many kinds.
_BLOCK_CELLS = 1 << 21

Interval = tuple[float, float]


def _kinds(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of the stacked columns (sorted, so the draws never depend on input order) and how
    many clusters have each."""
    stacked = np.column_stack([np.asarray(c, dtype=np.int64) for c in columns])
    kinds, counts = np.unique(stacked, axis=0, return_counts=True)
    return kinds.astype(np.float64), counts


def _resampled_kind_counts(counts: np.ndarray, *, seed: int, resamples: int) -> list[np.ndarray]:
    """Blocks of Multinomial(G, counts / G) rows, resamples rows in all: how often each kind was drawn."""
    total = int(counts.sum())
    shares = counts / total
    rng = np.random.default_rng(seed)
    step = max(1, _BLOCK_CELLS // max(1, counts.size))
    return [
        rng.multinomial(total, shares, size=min(step, resamples - start)).astype(np.float64)
        for start in range(0, resamples, step)
    ]


def _interval(values: np.ndarray, confidence: float) -> Interval:
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [alpha, 1.0 - alpha])
    return (float(low), float(high))


@dataclass(frozen=True, slots=True)
class ClusterIntervals:
    """Percentile intervals from one set of resamples: of accuracy over pairs (pooled: Σ correct / Σ decided)
    and of the mean of per-cluster accuracies."""

    pooled: Interval
    mean_of_clusters: Interval


def cluster_intervals(
    correct: np.ndarray, decided: np.ndarray, *, seed: int, resamples: int, confidence: float
) -> ClusterIntervals | None:
    """Cluster bootstrap of pair accuracy and of mean per-cluster accuracy; clusters with no decided pair carry
    no outcome and are left out. None when no cluster has one."""
    correct = np.asarray(correct, dtype=np.int64)
    decided = np.asarray(decided, dtype=np.int64)
    keep = decided > 0
    if not keep.any():
        return None
    kinds, counts = _kinds([correct[keep], decided[keep]])
    total = float(counts.sum())
    pooled_parts, mean_parts = [], []
    for draws in _resampled_kind_counts(counts, seed=seed, resamples=resamples):
        pooled_parts.append((draws @ kinds[:, 0]) / (draws @ kinds[:, 1]))
        mean_parts.append((draws @ (kinds[:, 0] / kinds[:, 1])) / total)
    return ClusterIntervals(
        _interval(np.concatenate(pooled_parts), confidence),
        _interval(np.concatenate(mean_parts), confidence),
    )


def _jackknife_variance(leave_one_out: np.ndarray) -> float:
    """The jackknife's variance from the estimates that leave out one cluster each."""
    k = leave_one_out.size
    return float((k - 1) / k * np.sum((leave_one_out - leave_one_out.mean()) ** 2))


def _ratio_variance(numerators: np.ndarray, denominators: np.ndarray) -> float:
    """Jackknife variance over clusters of Σ numerators / Σ denominators (a ratio: the jackknife follows a
    large cluster's pull where the linearized variance understates it)."""
    total, size = float(numerators.sum()), float(denominators.sum())
    return _jackknife_variance((total - numerators) / (size - denominators))


def accuracy_intervals(
    correct: np.ndarray, decided: np.ndarray, *, confidence: float
) -> ClusterIntervals | None:
    """The intervals of pair accuracy (pooled) and of mean per-cluster accuracy that prbj reports where users
    repeat; clusters with no decided pair are left out. None under 2 clusters with a decided pair (one user
    shows no spread between users). At 0% or 100%: Clopper–Pearson on the effective size at the largest
    design effect (kish_size: K for the mean over users, (Σ m)² / Σ m² for pairs). Otherwise Korn–Graubard with
    the jackknife's variance over clusters and t with K − 1 degrees of freedom: in bench/small_users.py it
    holds from 3 users on, where the percentile cluster bootstrap (cluster_intervals) covers 0.43–0.83 under
    10 users and 0.90–0.94 at 50. Counts may be fractional (a tie counted as half right)."""
    correct = np.asarray(correct, dtype=np.float64)
    decided = np.asarray(decided, dtype=np.float64)
    keep = decided > 0
    k = int(keep.sum())
    if k < 2:
        return None
    right, sizes = correct[keep], decided[keep]
    pooled = float(right.sum() / sizes.sum())
    shares = right / sizes
    mean = float(shares.mean())
    edge_pooled = at_the_edge(pooled, kish_size(sizes), confidence)
    edge_mean = at_the_edge(mean, float(k), confidence)
    if edge_pooled is not None and edge_mean is not None:
        return ClusterIntervals(edge_pooled, edge_mean)
    pooled_interval = korn_graubard(
        pooled, _ratio_variance(right, sizes), units=k, most=float(sizes.sum()), confidence=confidence
    )
    # Were every pair independent, the mean of per-user shares would have variance p(1 − p) Σ(1/m) / K².
    mean_interval = korn_graubard(
        mean,
        float(shares.var(ddof=1) / k),
        units=k,
        most=k**2 / float(np.sum(1.0 / sizes)),
        confidence=confidence,
    )
    return ClusterIntervals(pooled_interval, mean_interval)


@dataclass(frozen=True, slots=True)
class PairedClusters:
    """Two judges' outcomes on the same pairs, summed per cluster: pairs `first` and `second` got right, pairs
    exactly one of them got right (`discordant`), and pairs shared (`n`)."""

    first: np.ndarray
    second: np.ndarray
    discordant: np.ndarray
    n: np.ndarray

    @classmethod
    def from_pairs(cls, first: np.ndarray, second: np.ndarray, clusters: np.ndarray) -> PairedClusters:
        """Per-pair 0/1 outcomes and each pair's cluster label, aligned."""
        a = np.asarray(first, dtype=np.float64)
        b = np.asarray(second, dtype=np.float64)
        _, index = np.unique(np.asarray(clusters), return_inverse=True)
        size = int(index.max()) + 1 if index.size else 0

        def per_cluster(weights: np.ndarray | None) -> np.ndarray:
            return np.bincount(index, weights=weights, minlength=size).round().astype(np.int64)

        return cls(per_cluster(a), per_cluster(b), per_cluster(np.abs(a - b)), per_cluster(None))

    @property
    def count(self) -> int:
        return int(self.n.size)

    @property
    def repeat(self) -> bool:
        """Whether any cluster holds more than one pair (else every cluster figure is the pair figure)."""
        return bool(self.n.size) and int(self.n.max()) > 1

    @property
    def differences(self) -> np.ndarray:
        """Per cluster: pairs only the first got right minus pairs only the second got right."""
        return self.first - self.second


def paired_cluster_interval(clusters: PairedClusters, *, confidence: float) -> Interval:
    """Interval of Σ first / Σ n − Σ second / Σ n (accuracy difference over pairs), over clusters: the estimate
    ± t (K − 1 degrees of freedom) times the jackknife's standard error over clusters; with no discordant pair
    at all, ± the Clopper–Pearson upper limit of a discordance of 0 on the effective size (a difference is
    never larger than the discordance). NaN under 2 clusters. With few clusters it is approximate (in
    bench/small_users.py it excludes a true 0 in up to 9% of runs at 5–10 users, the cluster bootstrap in up
    to 15%): the paired test over users (prbj.analysis.mcnemar.clustered_test) is exact and decides."""
    if clusters.count < 2:
        return (float("nan"), float("nan"))
    sizes = clusters.n.astype(np.float64)
    if not clusters.discordant.any():
        edge = at_the_edge(0.0, kish_size(sizes), confidence)
        assert edge is not None
        return (-edge[1], edge[1])
    differences = clusters.differences.astype(np.float64)
    estimate = float(differences.sum() / sizes.sum())
    spread = (
        t_quantile(clusters.count - 1, 0.5 + confidence / 2.0) * _ratio_variance(differences, sizes) ** 0.5
    )
    return (max(-1.0, estimate - spread), min(1.0, estimate + spread))


def paired_cluster_bootstrap(
    clusters: PairedClusters, *, seed: int, resamples: int, confidence: float
) -> Interval:
    """The percentile interval of the accuracy difference over pairs, resampling clusters with all their
    pairs."""
    if clusters.count == 0:
        return (float("nan"), float("nan"))
    kinds, counts = _kinds([clusters.differences, clusters.n])
    parts = [
        (draws @ kinds[:, 0]) / (draws @ kinds[:, 1])
        for draws in _resampled_kind_counts(counts, seed=seed, resamples=resamples)
    ]
    return _interval(np.concatenate(parts), confidence)


@dataclass(frozen=True, slots=True)
class ClusteredMcNemar:
    statistic: float
    p_value: float
    clusters: int


def clustered_mcnemar(clusters: PairedClusters) -> ClusteredMcNemar:
    """Obuchowski's (1998) McNemar test for clustered matched pairs, in Yang, Sun and Hardin's (2010) form:

        X² = (K − 1) / K · (Σ_k D_k)² / Σ_k D_k²,   D_k = b_k − c_k,

    with b_k (c_k) the pairs of cluster k only the first (second) judge got right and K the clusters; X² is
    referred to chi-square with one degree of freedom. It needs no model of the correlation within a cluster
    and tests the difference in accuracy over pairs, the figure `prbj check` gates on. (Durkalski et al.'s
    2003 variant weighs each cluster's proportion equally instead; Yang et al. find Obuchowski's form holds
    its size with 50 clusters and more, the usual size of a per-user benchmark.)"""
    differences = clusters.differences.astype(np.float64)
    spread = float(np.sum(differences**2))
    k = clusters.count
    if spread == 0.0 or k < 2:
        return ClusteredMcNemar(0.0, 1.0, k)
    statistic = (k - 1) / k * float(np.sum(differences)) ** 2 / spread
    return ClusteredMcNemar(statistic, math.erfc(math.sqrt(statistic / 2.0)), k)


# The design effect `prbj power` plans with: this quantile of its values over user resamples (planning with the
# point value fell short of the promised power in half the pilots).
PLANNING_QUANTILE = 0.8


def upper_design_effect(
    clusters: PairedClusters, *, seed: int, resamples: int, quantile: float = PLANNING_QUANTILE
) -> float:
    """The `quantile` of the design effect K / (K − 1) · Σ D_k² / Σ (b_k + c_k) over resamples of the clusters
    (not floored at 1: planning takes its uncertainty, not a floor). 1 when no cluster repeats or no pair is
    discordant."""
    k = clusters.count
    if not clusters.repeat or k < 2 or not clusters.discordant.any():
        return 1.0
    kinds, counts = _kinds([clusters.differences**2, clusters.discordant])
    # A resample of users who never disagree has no design effect (0 / 0): left out.
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.concatenate(
            [
                k / (k - 1) * (draws @ kinds[:, 0]) / (draws @ kinds[:, 1])
                for draws in _resampled_kind_counts(counts, seed=seed, resamples=resamples)
            ]
        )
    finite = values[np.isfinite(values)]
    return float(np.quantile(finite, quantile)) if finite.size else 1.0


def design_effect(clusters: PairedClusters) -> float:
    """How much the clustering inflates the variance of the accuracy difference, against independent pairs:
    K / (K − 1) · Σ_k D_k² (its variance across clusters, as Obuchowski's test estimates it) over Σ_k (b_k + c_k)
    (its variance were the pairs independent). 1 when no cluster repeats. Never below 1: the figure is estimated
    from one run, a smaller one is more often noise than a real gain, and a power figure should not promise
    fewer pairs than independent pairs would need."""
    k = clusters.count
    discordant = float(np.sum(clusters.discordant))
    if not clusters.repeat or k < 2 or discordant == 0.0:
        return 1.0
    spread = float(np.sum(clusters.differences.astype(np.float64) ** 2))
    return max(1.0, k / (k - 1) * spread / discordant)
