"""A reward model written in Python on a Ray cluster (`-p py:… --ray`): the one-machine cluster the Ray tests
use, started here. The results are the local run's, each user is fitted once by the actor that scores them (with
two replicas too), the actors log what they were asked (tests/plugin_rms.py), and a cached rerun starts no
actor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from per_user_fixture import HISTORY_ROWS, user_records
from plugin_rms import clear_log, read_log, write_rm

from conftest import write_jsonl
from prbj.cli import main

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow

USERS = ("u1", "u2", "u3", "u4", "u5", "u6")


@pytest.fixture(scope="module")
def cluster() -> Any:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def _judge(tmp_path: Path, dataset: Path, rm: Path, name: str, *extra: str) -> tuple[str, pl.DataFrame]:
    out = tmp_path / name
    args = ["judge", "--dataset", str(dataset), "-p", f"py:{rm}:Logged", "--out", str(out)]
    args += ["--cache-dir", str(tmp_path / f"cache-{name.split('-')[0]}"), "--batch-size", "4", *extra]
    result = CliRunner().invoke(main, args, catch_exceptions=False, env={"COLUMNS": "1000"})
    assert result.exit_code == 0, result.output
    (run_dir,) = out.iterdir()
    frame = pl.read_parquet(run_dir / "judgments.parquet").sort("pair_id")
    return result.output, frame.select("pair_id", "status", "verdict", "score_chosen", "score_rejected")


def _fits(rm: Path) -> list[tuple[str, int]]:
    return sorted((e["user"], len(e["history"])) for e in read_log(rm) if e["method"] == "fit_user")


def test_on_ray_a_python_reward_model_gives_the_local_results(cluster: Any, tmp_path: Path) -> None:
    dataset = write_jsonl(tmp_path / "users.jsonl", user_records(USERS))
    rm = write_rm(tmp_path)
    _, local = _judge(tmp_path, dataset, rm, "local", "--no-progress")
    clear_log(rm)
    output, on_ray = _judge(tmp_path, dataset, rm, "ray-1", "--ray", "--progress", "--gpus-per-model", "0")
    assert on_ray.equals(local)
    assert set(on_ray["status"]) == {"ok"}
    assert f"ray: {rm}:Logged on 1 actor: " in output
    assert f"ray: {rm}:Logged: {2 * len(on_ray)} items sent" in output
    # The actor fitted each user once, with their own rows, and was sent whole batches.
    assert _fits(rm) == [(user, HISTORY_ROWS) for user in USERS]
    assert max(len(e["items"]) for e in read_log(rm) if e["method"] == "score") == 4

    clear_log(rm)
    output, rerun = _judge(tmp_path, dataset, rm, "ray-2", "--ray", "--progress", "--gpus-per-model", "0")
    assert rerun.equals(local)
    assert f"ray: {rm}:Logged: nothing sent (every answer came from the cache)" in output
    assert read_log(rm) == []


def test_with_two_replicas_each_user_is_fitted_once(cluster: Any, tmp_path: Path) -> None:
    dataset = write_jsonl(tmp_path / "users.jsonl", user_records(USERS))
    rm = write_rm(tmp_path)
    # Batches of 3 items: a user's 4 items (two pairs) would straddle two chunks, dealt to different actors.
    args = ("--ray", "--progress", "--gpus-per-model", "0", "--replicas", "2", "--cpus-per-model", "0.5")
    args += ("--batch-size", "3")
    output, frame = _judge(tmp_path, dataset, rm, "replicas", *args)
    assert set(frame["status"]) == {"ok"}
    assert f"ray: {rm}:Logged on 2 actors: " in output
    # Every user's items went to one actor, which fitted them once: no user fitted twice across the actors.
    assert _fits(rm) == [(user, HISTORY_ROWS) for user in USERS]
