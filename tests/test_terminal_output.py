"""What a first hour reads at the terminal (issue 35): long model paths wrap inside one table, `report --slice`
prints its slices, a --selective run says what it withheld, wrapped lines keep their indent at 60 columns, and
every column of `check` has a label."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.cells import cell_len
from rich.console import Console

from prbj.bon.command import curve_table
from prbj.bon.evaluate import CurvePoint
from prbj.cli import main
from prbj.display.fit import FittingTable

ROOT = Path(__file__).resolve().parents[1]
SUBSETS = ("Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture")
MODELS = [f"hf:/home/someone/experiments/prbj/models/tiny-rm-{size}" for size in ("s", "m", "l")]


def _point(rm: str, subset: str, k: int) -> CurvePoint:
    return CurvePoint(rm, subset, k, 60, 60, 0.3, 0.1, 0.0, 1.0, 0.25, 0.35, 0, 0)


def _render(renderable: object, width: int) -> str:
    console = Console(width=width, record=True, force_terminal=False)
    console.print(renderable)
    return console.export_text()


def test_long_model_paths_wrap_inside_one_best_of_k_table_at_100_columns() -> None:
    rms = ["random", "length", "bm25-profile", "embed-profile", *MODELS]
    points = [_point(rm, subset, k) for rm in rms for subset in ("all", *SUBSETS) for k in (1, 2, 4, 8)]
    text = _render(FittingTable(curve_table(points)), 100)
    lines = text.splitlines()
    assert all(cell_len(line.rstrip()) <= 100 for line in lines)
    # One table: a header with every column, one line of figures per RM (no "  k=1  0.300" block lines).
    assert any(line.split()[:3] == ["rm", "k=1", "k=2"] for line in lines), text
    assert not any(line.strip().startswith("k=1 ") for line in lines), text
    rows = [line for line in lines if line.rstrip().endswith("0/60")]
    assert len(rows) == len(rms), text
    # A path breaks only after a "/": its pieces, read down the column, spell it whole.
    body = lines[next(i for i, line in enumerate(lines) if line.startswith("─")) + 1 :]
    names, pending = [], ""
    for line in body[: next(i for i, line in enumerate(body) if line.startswith("subset columns"))]:
        first = line.split()[0]
        pending += first
        if not first.endswith("/"):
            names.append(pending)
            pending = ""
    assert names == rms, text


def test_a_value_is_never_broken_at_a_slash() -> None:
    """Only a row's name may break after a "/": the hostile table of tests/test_widths.py keeps its model id
    whole in the value column (stacked when it cannot)."""
    from test_widths import _hostile_table

    text = _render(FittingTable(_hostile_table()), 60)
    assert "litellm:openai/Qwen/Qwen3-8B-Instruct" in text


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("terminal")
    runner = CliRunner()

    def judge(out: str, *options: str) -> Path:
        result = runner.invoke(main, ["judge", "--no-progress", "--out", str(root / out), *options])
        assert result.exit_code == 0, result.output
        (run,) = list((root / out).iterdir())
        return run

    sure = judge(
        "sure", "-p", "bm25-profile", "--confidence", "available", "--subset", "art", "--subset", "life"
    )
    calibrated = runner.invoke(main, ["calibrate", str(sure), "--target-error", "0.2", "--delta", "0.2"])
    assert calibrated.exit_code == 0, calibrated.output
    selective = judge(
        "all", "-p", "bm25-profile", "-p", "length", "--selective", str(sure / "selective.json")
    )
    return {"sure": sure, "selective": selective, "plain": judge("plain", "-p", "length", "-p", "random")}


def test_report_slice_prints_the_slices_at_the_terminal(runs: dict[str, Path]) -> None:
    args = ["report", str(runs["plain"]), "--slice", "profile-posts"]
    result = CliRunner(env={"COLUMNS": "120"}).invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "Accuracy by slice" in result.output
    rows = [line for line in result.output.splitlines() if re.search(r"length\W+none\W+profile-posts", line)]
    assert len(rows) == 4, result.output  # quartile bins of the profile's posts, for the length judge


def test_a_selective_leaderboard_counts_what_it_withheld(runs: dict[str, Path]) -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["report", str(runs["selective"])])
    assert result.exit_code == 0, result.output
    assert any("failed" in line and "abstained" in line for line in result.output.splitlines()), result.output
    markdown = (runs["selective"] / "report.md").read_text().splitlines()
    header = next(line for line in markdown if line.startswith("| # |"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    row = next(line for line in markdown if line.startswith("| 1 | bm25-profile"))
    values = dict(zip(cells, (c.strip() for c in row.strip("|").split("|")), strict=True))
    assert values["failed"] == "0/60" and values["abstained"] != "0/60", values
    assert re.fullmatch(r"\d+/60", values["abstained"]), values


def test_the_judge_leaderboard_of_a_selective_run_has_an_abstained_column(runs: dict[str, Path]) -> None:
    selective = runs["sure"] / "selective.json"
    out = runs["sure"].parent / "again"
    args = ["judge", "--no-progress", "-p", "bm25-profile", "--selective", str(selective), "--out", str(out)]
    result = CliRunner(env={"COLUMNS": "120"}).invoke(main, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(line for line in lines if line.startswith("judge · context"))
    assert header.split()[-2:] == ["failed", "abstained"], header
    row = next(line for line in lines if line.startswith("bm25-profile"))
    failed, abstained = row.split()[-2:]
    assert failed == "0/60" and re.fullmatch(r"\d+/60", abstained) and abstained != "0/60", row


def _indented_blocks(text: str, label: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(label) + 1
    block = []
    for line in lines[start:]:
        if not line.startswith(" ") or not line.strip():
            break
        block.append(line)
    return block


def test_show_keeps_the_indent_of_wrapped_lines_at_60_columns(runs: dict[str, Path]) -> None:
    args = ["show", str(runs["plain"]), "--limit", "1"]
    result = CliRunner(env={"COLUMNS": "60"}).invoke(main, args)
    assert result.exit_code == 0, result.output
    question = _indented_blocks(result.output, "Question")
    assert len(question) >= 2, result.output  # the question wraps at 60 columns
    assert all(line.startswith("  ") and not line.startswith("   ") for line in question), question
    assert all(cell_len(line.rstrip()) <= 60 for line in result.output.splitlines())


def test_providers_keeps_wrapped_values_under_their_value_at_60_columns() -> None:
    result = CliRunner(env={"COLUMNS": "60"}).invoke(main, ["providers"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  limits  "))
    continued = lines[at + 1]
    assert continued.startswith(" " * 10) and continued[10] != " ", lines[at : at + 2]


def test_check_labels_its_verdict_column(runs: dict[str, Path], tmp_path: Path) -> None:
    baseline = tmp_path / "base.json"
    made = CliRunner().invoke(
        main, ["check", str(runs["plain"]), "--baseline", str(baseline), "--update-baseline"]
    )
    assert made.exit_code == 0, made.output
    wide = CliRunner(env={"COLUMNS": "200"}).invoke(
        main, ["check", str(runs["plain"]), "--baseline", str(baseline)]
    )
    header = next(
        line for line in wide.output.splitlines() if line.split()[:3] == ["judge", "context", "subset"]
    )
    assert header.split()[-1] == "verdict", header
    narrow = CliRunner(env={"COLUMNS": "60"}).invoke(
        main, ["check", str(runs["plain"]), "--baseline", str(baseline)]
    )
    verdicts = [line for line in narrow.output.splitlines() if line.strip().endswith("PASS")]
    assert verdicts and all(line.split()[0] == "verdict" for line in verdicts), narrow.output
