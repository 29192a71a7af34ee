from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
from click.testing import CliRunner

from conftest import make_record, write_jsonl
from prbj.cli import main


def _judge(*args: str) -> object:
    return CliRunner().invoke(main, ["judge", "--no-progress", *args], catch_exceptions=False)


def _only_run_dir(out: Path) -> Path:
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


def test_judge_writes_a_complete_run_directory(small_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    result = _judge("--dataset", str(small_dataset), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "bm25-profile" in result.output and "embed-profile" in result.output
    run_dir = _only_run_dir(out)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["config"]["seed"] == 42
    assert run["dataset"]["n_pairs"] == 6
    assert [j["name"] for j in run["judges"]] == ["random", "length", "bm25-profile", "embed-profile"]
    judgments = pl.read_parquet(run_dir / "judgments.parquet")
    assert judgments.height == 6 * 4
    assert set(judgments["status"]) == {"ok"}
    summary = json.loads((run_dir / "summary.json").read_text())
    by_key = {(r["judge"], r["subset"]): r for r in summary["results"]}
    length_all = by_key[("length", "all")]
    # Every hand-made pair has a longer chosen answer, so the length judge must be right on all of them.
    assert length_all["accuracy"] == 1.0 and length_all["n"] == 6
    assert ("length", "Society_and_Culture") in by_key


def test_same_seed_gives_identical_summary(small_dataset: Path, tmp_path: Path) -> None:
    for out in ("a", "b"):
        assert _judge("--dataset", str(small_dataset), "--out", str(tmp_path / out)).exit_code == 0
    a, b = (_only_run_dir(tmp_path / out) / "summary.json" for out in ("a", "b"))
    assert a.read_bytes() == b.read_bytes()


def test_subset_limit_and_provider_selection(small_dataset: Path, tmp_path: Path) -> None:
    result = _judge(
        "--dataset",
        str(small_dataset),
        "--out",
        str(tmp_path),
        "-p",
        "length",
        "--subset",
        "art",
        "--limit",
        "1",
    )
    assert result.exit_code == 0, result.output
    judgments = pl.read_parquet(_only_run_dir(tmp_path) / "judgments.parquet")
    assert judgments.select("judge", "subset", "pair_id").rows() == [
        ("length", "Art_and_Entertainment", "t-001")
    ]


def test_bad_data_is_one_line_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    bad = make_record(1)
    del bad["profile"][0]["text"]
    path = write_jsonl(tmp_path / "bad.jsonl", [bad])
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["judge", "--dataset", str(path), "--out", str(out)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [f"error: {path}:1: field 'profile[0]': field 'text': missing"]
    assert not out.exists()


def test_unknown_provider_exits_2() -> None:
    result = CliRunner().invoke(main, ["judge", "-p", "no-such-judge"])
    assert result.exit_code == 2
    assert "unknown judge" in result.output and "bm25-profile" in result.output


def test_help_documents_every_option_with_an_example() -> None:
    text = CliRunner().invoke(main, ["judge", "--help"], terminal_width=200).output
    for option in ("--provider", "--dataset", "--subset", "--limit", "--seed", "--out", "--concurrency"):
        assert option in text
    assert "Examples:" in text and "prbj judge --dataset" in text
    top = CliRunner().invoke(main, ["--help"]).output
    assert "prbj judge" in top


def test_default_run_on_the_bundled_sample(tmp_path: Path) -> None:
    """The README's first command, as a user runs it: a subprocess with no options but the output folder."""
    completed = subprocess.run(
        [sys.executable, "-m", "prbj", "judge", "--no-progress", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr
    assert "demo sample" in completed.stdout
    summary = json.loads((_only_run_dir(tmp_path) / "summary.json").read_text())
    assert summary["dataset"]["n_pairs"] == 60
    assert summary["dataset"]["subsets"] == [
        "Art_and_Entertainment",
        "Lifestyle_and_Personal_Development",
        "Society_and_Culture",
    ]
    overall = {r["judge"]: r for r in summary["results"] if r["subset"] == "all"}
    assert set(overall) == {"random", "length", "bm25-profile", "embed-profile"}
    # The sample is length-balanced by construction: "pick the longer" must sit near chance.
    assert 0.35 <= overall["length"]["accuracy"] <= 0.65


def test_errors_raised_inside_the_engine_are_one_line_too() -> None:
    import asyncio

    import click

    from prbj.cli import friendly_errors
    from prbj.errors import ConfigError

    @click.command()
    @friendly_errors
    def fails_mid_run() -> None:
        async def load() -> None:
            raise ConfigError("hf:/m: weights unreadable (model.safetensors)")

        async def run() -> None:
            async with asyncio.TaskGroup() as group:
                group.create_task(load())

        asyncio.run(run())

    result = CliRunner().invoke(fails_mid_run)
    assert result.exit_code == 2
    assert result.output == "error: hf:/m: weights unreadable (model.safetensors)\n"
