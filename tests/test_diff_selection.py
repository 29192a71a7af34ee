"""`prbj diff` between two selections of one dataset (issue 35): a full-sample run and a `--subset` run of the
same sample are compared on the pairs they share, and the runs are named by their ids, not "A" and "B"."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from prbj.cli import main
from prbj.runs import rundir


def _judge(out: Path, *options: str) -> Path:
    result = CliRunner().invoke(main, ["judge", "-p", "length", "--no-progress", "--out", str(out), *options])
    assert result.exit_code == 0, result.output
    (run,) = [path for path in out.iterdir() if rundir.is_run_dir(path)]
    return run


def test_diff_compares_a_full_run_with_a_subset_run_on_the_pairs_they_share(tmp_path: Path) -> None:
    """Issue 35: a full-sample run and a `--subset` run of the same sample were "different datasets" (exit 2)."""
    full = _judge(tmp_path / "full", "-p", "random")
    subset = _judge(tmp_path / "art", "-p", "random", "--subset", "art", "--seed", "3")
    result = CliRunner().invoke(main, ["diff", str(full), str(subset)])
    assert result.exit_code == 0, result.output + result.stderr
    note = " ".join(result.stderr.split())
    assert (
        f"{full.name} judged 60 pairs and {subset.name} 20" in note and "comparing the 20 they share" in note
    )
    summary = " ".join(result.stdout.split())
    assert (
        f"of 40 shared judgments changed from {full.name} to {subset.name}" in summary
    )  # 20 pairs × 2 judges
    assert "A =" not in summary and "[bold]" not in result.stdout


def test_diff_of_two_limits_compares_the_shared_pairs_and_records_the_source(tmp_path: Path) -> None:
    first = _judge(tmp_path / "five", "--limit", "5")
    second = _judge(tmp_path / "three", "--limit", "3", "--subset", "life")
    records = [rundir.load_run(run).dataset for run in (first, second)]
    assert records[0]["fingerprint"] != records[1]["fingerprint"]
    assert records[0]["source_fingerprint"] == records[1]["source_fingerprint"]
    result = CliRunner().invoke(main, ["diff", str(first), str(second)])
    assert result.exit_code == 0, result.output
    assert "comparing the 3 they share" in " ".join(result.stderr.split())
