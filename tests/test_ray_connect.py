"""`--ray` joins (or starts) a cluster only when the run opens its first model: a model given wrong is one line at
once, not after a one-machine cluster was started for nothing (issue 26: docs/cluster.md's example took 10 s to
say "no such folder")."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from prbj.cli import main

ray = pytest.importorskip("ray")


def test_a_missing_model_fails_before_any_ray_cluster_starts(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-rm"
    args = ["judge", "-p", f"hf:{missing}", "--ray", "auto", "--limit", "1", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [f"error: --provider hf:{missing}: no such folder"]
    assert not ray.is_initialized()
