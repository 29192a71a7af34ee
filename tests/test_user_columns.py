"""Every pair has a user: PRB pairs are their own users, judgments.parquet names each judgment's user (and the
user's groups and seen flag where a dataset has them), run.json names the benchmark, and runs written before
users were recorded read back with each pair as its own user."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import polars as pl

from conftest import make_record
from prbj.analysis.jury import JurySpec, jury_judgments
from prbj.data import load_dataset
from prbj.data.loaders import Dataset
from prbj.data.user_columns import user_columns, with_user_ids
from prbj.data.validate import parse_pair
from prbj.judges.baselines import make_baseline
from prbj.runs import rundir
from prbj.runs.execute import RunConfig, execute
from run_dirs import outcomes, write_run_dir


def test_a_benchmark_pair_is_its_own_user_with_no_groups() -> None:
    pair = parse_pair(make_record(7))
    assert (pair.user_id, pair.groups, pair.seen) == ("t-007", (), None)
    # Who the user is never reaches a judge.
    fields = {f.name for f in dataclasses.fields(pair.view("profile"))}
    assert not fields & {"user_id", "groups", "seen"}


def _users_pairs() -> list:
    base = [parse_pair(make_record(i)) for i in range(1, 5)]
    groups = [
        (("age", "18-24"), ("region", "EU")),
        (("age", "65+"),),
        (("age", "18-24"), ("region", "US")),
        (),
    ]
    return [
        dataclasses.replace(p, user_id=f"u{(i // 2) + 1}", groups=g, seen=i < 2)
        for i, (p, g) in enumerate(zip(base, groups, strict=True))
    ]


def test_user_columns_hold_the_user_a_column_per_group_key_and_seen() -> None:
    frame = user_columns(_users_pairs())
    assert frame.columns == ["pair_id", "user_id", "group:age", "group:region", "user_seen"]
    assert frame.schema["user_seen"] == pl.Boolean and frame.schema["group:age"] == pl.String
    assert frame["user_id"].to_list() == ["u1", "u1", "u2", "u2"]
    assert frame["group:region"].to_list() == ["EU", None, "US", None]
    assert frame["user_seen"].to_list() == [True, True, False, False]
    # No groups and no seen flag in the data: only the user.
    plain = user_columns([parse_pair(make_record(1))])
    assert plain.columns == ["pair_id", "user_id"]


def test_a_run_on_the_sample_names_every_pairs_user_and_the_benchmark(tmp_path: Path) -> None:
    data = load_dataset("sample").select(limit=2)
    config = RunConfig(dataset="sample", subsets=(), limit=2, seed=42, out_dir=tmp_path, show_progress=False)
    result = execute(data, [make_baseline("length", seed=42)], config)
    assert result.run_dir is not None
    written = pl.read_parquet(result.run_dir / "judgments.parquet")
    assert written["user_id"].to_list() == written["pair_id"].to_list()
    assert not any(c.startswith("group:") or c == "user_seen" for c in written.columns)
    run = json.loads((result.run_dir / "run.json").read_text())
    assert run["config"]["benchmark"] == {"name": "prb", "version": "1"}


def test_a_run_on_users_with_groups_writes_their_columns_and_juries_keep_them(tmp_path: Path) -> None:
    data = Dataset("in-memory", tuple(_users_pairs()))
    config = RunConfig(dataset="mem", subsets=(), limit=None, seed=42, out_dir=tmp_path, show_progress=False)
    judges = [make_baseline("length", seed=42), make_baseline("random", seed=42)]
    result = execute(data, judges, config)
    assert result.run_dir is not None
    written = rundir.load_run(result.run_dir).judgments
    by_pair = {r["pair_id"]: r for r in written.filter(pl.col("judge") == "length").iter_rows(named=True)}
    assert by_pair["t-003"]["user_id"] == "u2" and by_pair["t-003"]["group:region"] == "US"
    assert by_pair["t-001"]["user_seen"] is True and by_pair["t-004"]["group:age"] is None
    # A jury's rows are derived from its members' judgments of the same pairs: same users.
    rows, _ = jury_judgments(written, JurySpec("pair", ("length", "random")))
    assert rows["user_id"].to_list() == written.filter(pl.col("judge") == "length")["user_id"].to_list()
    assert rows["group:age"].to_list() == ["18-24", "65+", "18-24", None]


def test_a_run_from_before_users_reads_back_with_each_pair_its_own_user(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path / "old", outcomes("length", "Art", [True, False, True]))
    assert "user_id" not in pl.read_parquet(run_dir / "judgments.parquet").columns
    loaded = rundir.load_run(run_dir).judgments
    assert loaded["user_id"].to_list() == ["p-000", "p-001", "p-002"]
    # A frame that has users keeps them.
    kept = with_user_ids(loaded.with_columns(pl.lit("someone").alias("user_id")))
    assert set(kept["user_id"].to_list()) == {"someone"}
