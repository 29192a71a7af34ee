"""Runs are found wherever they were written (issue 35): `--out reports/sure` (the docs' own example), a
`--seed 7` run in reports/seed7, and `prbj run`'s reports/experiments/<name>/judges/<judge>/<run-id>, by
`prbj report reports/*/` and `prbj view`; a folder that holds no run is one line and exit 2, as in `prbj show`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from prbj.cli import main
from prbj.runs import rundir


def _judge(out: Path, *options: str) -> Path:
    result = CliRunner().invoke(main, ["judge", "-p", "length", "--no-progress", "--out", str(out), *options])
    assert result.exit_code == 0, result.output
    (run,) = [path for path in out.iterdir() if rundir.is_run_dir(path)]
    return run


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A reports/ folder as a user's first hour leaves it."""
    root = tmp_path_factory.mktemp("discovery") / "reports"
    made = {
        "top": _judge(root),
        "sure": _judge(root / "sure"),
        "seed7": _judge(root / "seed7", "--seed", "7"),
    }
    # What `prbj run` writes: the experiment's own figures and manifest at the top, each judge's run below.
    experiment = root / "experiments" / "demo"
    made["experiment"] = _judge(experiment / "judges" / "length")
    (experiment / "manifest.json").write_text(json.dumps({"experiment": {"name": "demo"}, "stages": {}}))
    (experiment / "summary.json").write_text(json.dumps({"experiment": {"name": "demo"}, "accuracy": []}))
    (root / "baselines").mkdir()
    (root / "baselines" / "sample-offline.json").write_text("{}")
    (root / "notes").mkdir()
    return made


def test_runs_are_found_at_any_depth(reports: dict[str, Path]) -> None:
    root = reports["top"].parent
    assert rundir.find_run_dirs(root) == sorted(reports.values())
    assert rundir.run_kind(root / "experiments" / "demo") == "experiment"


def test_report_over_a_glob_takes_the_runs_under_each_folder(
    reports: dict[str, Path], tmp_path: Path
) -> None:
    root = reports["top"].parent
    folders = sorted(
        str(path) + "/" for path in root.iterdir() if path.is_dir()
    )  # what reports/*/ expands to
    out = tmp_path / "board"
    result = CliRunner().invoke(main, ["report", *folders, "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    markdown = (out / "report.md").read_text()
    for run in reports.values():
        assert run.name in markdown, run
    skipped = re.findall(r"skipped (\S+): ", " ".join(result.output.split()))
    assert sorted(skipped) == [str(root / "baselines"), str(root / "notes")]


def test_report_on_an_experiment_directory_takes_its_judge_runs(reports: dict[str, Path]) -> None:
    experiment = reports["experiment"].parents[2]
    result = CliRunner().invoke(main, ["report", str(experiment), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "report:" in result.output


def test_view_bundle_holds_the_runs_at_any_depth(reports: dict[str, Path], tmp_path: Path) -> None:
    root = reports["top"].parent
    site = tmp_path / "site"
    result = CliRunner().invoke(main, ["view", "--bundle", str(site), str(root)])
    assert result.exit_code == 0, result.output
    listing = (site / "index.html").read_text()
    for run in reports.values():
        assert run.name in listing, run


def test_view_bundle_of_the_experiments_folder_shows_its_runs_not_an_error_page(
    reports: dict[str, Path], tmp_path: Path
) -> None:
    site = tmp_path / "site"
    result = CliRunner().invoke(
        main, ["view", "--bundle", str(site), str(reports["top"].parent / "experiments")]
    )
    assert result.exit_code == 0, result.output
    pages = "".join(page.read_text() for page in site.rglob("*.html"))
    assert reports["experiment"].name in pages
    assert "cannot be read" not in pages


@pytest.mark.parametrize("command", [["view", "--bundle", "SITE"], ["show"], ["report"]])
def test_a_folder_holding_no_run_is_one_line_and_exit_2(
    reports: dict[str, Path], tmp_path: Path, command: list[str]
) -> None:
    notes = reports["top"].parent / "notes"
    site = tmp_path / "site"
    args = [str(site) if word == "SITE" else word for word in command]
    result = CliRunner().invoke(main, [*args, str(notes)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "not a run directory" in lines[0], lines
    assert not site.exists()
