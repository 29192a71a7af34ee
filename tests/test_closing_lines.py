"""Issue 45 items 7, 9 and 10: what `prbj judge` says around its leaderboard fits the data it judged. A dry run
of offline judges says what it would do (not an empty plan table); a card's version does not read like a
count; the closing hints name the data the run read (a card's own full data, the user's own file and the
--personal-data it needs), never the Personalized RewardBench hub id after another benchmark's run."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import make_record, write_jsonl
from prbj.cli import main
from prbj.data import load_dataset


def _judge(tmp_path: Path, *args: str) -> str:
    result = CliRunner(env={"COLUMNS": "400"}).invoke(
        main, ["judge", "--no-progress", "--out", str(tmp_path / "out"), *args]
    )
    assert result.exit_code == 0, result.output
    return result.output


def _next_hint(output: str) -> str:
    (line,) = [line for line in output.splitlines() if line.startswith("Next: ")]
    return line


def test_a_dry_run_of_offline_judges_says_it_costs_nothing_and_what_it_would_judge(tmp_path: Path) -> None:
    data = load_dataset(None, "prism")
    output = _judge(tmp_path, "--benchmark", "prism", "--dry-run")
    assert "Plan (nothing sent)" not in output  # no empty table
    assert (
        "offline judges: 0 calls, $0 (random, length, bm25-profile, embed-profile): would judge "
        f"{len(data.pairs)} pairs of {data.users} users"
    ) in output
    assert f"benchmark prism (version 2): {len(data.pairs)} pairs of {data.users} users to judge" in output
    assert not (tmp_path / "out").exists()


def test_a_dry_run_beside_a_model_judge_lists_the_offline_ones_under_its_plan(tmp_path: Path) -> None:
    output = _judge(tmp_path, "-p", "length", "-p", "gemini-3-flash", "--dry-run")
    assert "Plan (nothing sent)" in output and "gemini-3-flash" in output
    assert "offline judges: 0 calls, $0 (length): would judge 60 pairs (one per user)" in output


def test_after_a_card_run_the_hints_name_that_card_not_the_personalized_rewardbench_hub(
    tmp_path: Path,
) -> None:
    output = _judge(tmp_path, "--benchmark", "prism")
    assert "QiyaoMa" not in output
    assert (
        "PRISM card's demo sample, not the benchmark; the full data: hf:HannahRoseKirk/prism-alignment"
        in output
    )
    assert _next_hint(output).endswith("prbj judge --benchmark prism --provider gemini-3-flash")
    assert "Personalized RewardBench accuracy" not in output


def test_after_own_data_the_title_and_the_next_command_are_about_that_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "mine.jsonl", [make_record(i) for i in range(1, 7)])
    output = _judge(tmp_path, "--dataset", "mine.jsonl")
    assert "Personalized RewardBench accuracy" not in output
    assert "mine.jsonl accuracy" in output
    assert "demo sample" not in output and "QiyaoMa" not in output
    hint = _next_hint(output)
    assert "prbj judge --dataset mine.jsonl --provider gemini-3-flash --personal-data ..." in hint
    # The command it suggests runs as given once the reader fills in the policy (here: a dry run, no key needed).
    command = hint.split("GEMINI_API_KEY=... ", 1)[1].split(" (docs/privacy.md)")[0].replace("...", "any")
    result = CliRunner().invoke(main, [*shlex.split(command)[1:], "--dry-run", "--out", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    # Without the policy the same command is refused: the hint must not leave it out.
    without = command.replace(" --personal-data any", "")
    result = CliRunner().invoke(main, [*shlex.split(without)[1:], "--dry-run", "--out", str(tmp_path / "d")])
    assert result.exit_code == 2, result.output


def test_the_bundled_sample_still_says_it_is_a_demo_and_where_the_benchmark_is(tmp_path: Path) -> None:
    output = _judge(tmp_path)
    assert (
        "This is the bundled demo sample, not the benchmark: use --dataset hf:QiyaoMa/Personalized-RewardBench"
        in output
    )
    assert _next_hint(output).endswith("GEMINI_API_KEY=... prbj judge --provider gemini-3-flash")
