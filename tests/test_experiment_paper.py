"""experiments/paper.toml declares the paper's grid; its dry run works offline with no key: it names the missing
keys and still counts calls and cost (scaled from the bundled sample when the benchmark is not downloaded)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes

PAPER = Path(__file__).resolve().parent.parent / "experiments" / "paper.toml"


def test_the_paper_dry_run_works_offline_without_keys(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub"), "PRBJ_CACHE_DIR": str(tmp_path / "cache"),
            "COLUMNS": "200"}  # fmt: skip
    command = [sys.executable, "-m", "prbj", "run", str(PAPER), "--dry-run", "--no-progress"]
    done = subprocess.run(
        [*command, "--out", str(tmp_path / "paper")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = " ".join(done.stdout.split())
    for key in ("ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY"):
        assert key in out
    assert "planned on the bundled sample (60 pairs) scaled to 2,830" in out
    total = next(line for line in done.stdout.splitlines() if line.strip().startswith("total"))
    cells = total.split()
    # calls (an upper bound: best-of-N picks are not made yet), cached, tokens, USD live, USD batch, time
    assert cells[1].startswith("≤") and int(cells[1].lstrip("≤").replace(",", "")) > 100_000
    live, batch = float(cells[5]), float(cells[6])
    assert live > 0 and batch == pytest.approx(live / 2, rel=0.01)
    assert not (tmp_path / "paper").exists(), "a dry run writes nothing"
