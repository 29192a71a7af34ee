"""bench/small_users.py, in a few small cells: with few unequal users the intervals prbj reports hold where the
cluster bootstrap's did not, the sign-flip test gains power where Obuchowski's chi-square had almost none, and
Learn-then-Test over users keeps its guarantee where the test on independent judgments broke it. (The full
tables: `python bench/small_users.py`; `--quick` prints all of them in minutes.)"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest


@cache
def bench() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "bench" / "small_users.py"
    spec = importlib.util.spec_from_file_location("small_users", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


def test_few_users_intervals_hold_where_the_bootstrap_did_not() -> None:
    module = bench()
    found = module.accuracy_coverage(module.World(2.5, link=0.6), 5, reps=150, seed=1)
    # 150 runs: a share's standard error is under 2 points near 0.95.
    assert found["users after"] >= 0.95 and found["pairs after"] >= 0.95
    assert found["users before"] <= 0.75 and found["zero width"] >= 0.1


def test_the_sign_flip_test_keeps_its_level_and_gains_power_with_few_users() -> None:
    module = bench()
    null = module.paired_errors(10, 1.0, 0.0, reps=200, seed=2)
    assert null["test after"] <= 0.06
    power = module.paired_errors(20, 1.0, 1.0, reps=200, seed=3)
    assert power["test after"] > power["test before"] + 0.05


def test_the_quick_mode_prints_every_table(capsys: pytest.CaptureFixture[str]) -> None:
    module = bench()
    module.main(["--quick", "--only", "1", "--reps", "20"])
    out = capsys.readouterr().out
    assert "1. 95% intervals holding the truth" in out and "users after" in out
