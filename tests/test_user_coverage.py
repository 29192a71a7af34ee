"""The coverage simulation of bench/user_coverage.py, smaller: with pairs correlated within users, the cluster
bootstrap's intervals hold the true accuracy at about the nominal 95% where the bootstrap over pairs does not,
and the clustered McNemar test keeps its size where the test on pairs rejects far too often."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.slow


@cache
def simulation() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "bench" / "user_coverage.py"
    spec = importlib.util.spec_from_file_location("user_coverage", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Its dataclasses look their module up while being made.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_cluster_intervals_cover_where_pair_intervals_do_not() -> None:
    found = simulation().accuracy_coverage(sigma=1.5, users=80, reps=300, seed=1)
    # 300 replications: a share's standard error is about 1.3 points at 95%.
    assert 0.91 <= found.cluster_pairs <= 0.99
    assert 0.91 <= found.cluster_users <= 0.99
    assert found.pair_bootstrap <= 0.82


def test_without_correlation_both_intervals_cover() -> None:
    found = simulation().accuracy_coverage(sigma=0.0, users=80, reps=300, seed=2)
    assert found.pair_bootstrap >= 0.91 and found.cluster_pairs >= 0.91


def test_the_clustered_test_keeps_its_size_where_mcnemar_on_pairs_does_not() -> None:
    errors = simulation().paired_errors(sigma=1.0, tau=1.5, users=80, reps=300, seed=3)
    assert errors.clustered_rejects <= 0.08
    assert errors.mcnemar_rejects >= 0.15
    assert errors.cluster_interval_covers >= 0.91 > 0.85 >= errors.pair_interval_covers
