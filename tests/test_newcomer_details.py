"""Issue 45 item 10: the small things a newcomer met. A per-user table has no `default` column (the implicit
subset, repeating the overall figure); every missing API key is named at once; `prbj export --format eee` needs
no --out; the option sections of a long --help share one column; errors start `error:` in lower case."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from prbj.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_a_per_user_run_has_no_column_for_its_implicit_subset(tmp_path: Path) -> None:
    result = CliRunner(env={"COLUMNS": "300"}).invoke(
        main,
        ["judge", "--no-progress", "--dataset", str(ROOT / "examples" / "benchmarks" / "users.jsonl"),
         "--out", str(tmp_path / "out")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if line.startswith("judge · context"))
    assert header.split() == [
        "judge",
        "·",
        "context",
        "acc",
        "95%",
        "CI",
        "users",
        "95%",
        "CI",
        "ties",
        "LC",
        "failed",
    ]
    (run_dir,) = (tmp_path / "out").iterdir()
    assert "default" not in (run_dir / "report.md").read_text()


def test_the_sample_keeps_a_column_per_subset(tmp_path: Path) -> None:
    result = CliRunner(env={"COLUMNS": "300"}).invoke(
        main, ["judge", "--no-progress", "-p", "length", "--out", str(tmp_path / "out")]
    )
    header = next(line for line in result.output.splitlines() if line.startswith("judge · context"))
    assert [w for w in header.split() if "&" in w] == ["A&E", "L&PD", "S&C"]


def test_every_missing_api_key_is_named_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("GEMINI_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    providers = ["-p", "gemini-3-flash", "-p", "gpt-5.1", "-p", "claude-sonnet-4-6", "-p", "gemini-3.1-pro"]
    result = CliRunner().invoke(main, ["judge", "--no-progress", *providers, "--out", str(tmp_path / "o")])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith(
        "error: API keys not set: GEMINI_API_KEY (gemini-3-flash, gemini-3.1-pro), OPENAI_API_KEY (gpt-5.1), "
        "ANTHROPIC_API_KEY (claude-sonnet-4-6)"
    )
    assert not (tmp_path / "o").exists()


def test_export_without_out_writes_where_the_docs_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(main, ["judge", "--no-progress", "-p", "length", "--limit", "3"]).exit_code == 0
    (run_dir,) = (tmp_path / "reports").iterdir()
    result = runner.invoke(main, ["export", str(run_dir), "--format", "eee"])
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "exports" / "eee" / "data").rglob("*.json"))
    result = runner.invoke(main, ["export", str(run_dir), "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "exports" / "judgments.csv").is_file()


def test_the_option_sections_of_judge_help_share_one_column() -> None:
    result = CliRunner(env={"COLUMNS": "120"}).invoke(main, ["judge", "--help"])
    assert result.exit_code == 0
    starts = set()
    for line in result.output.splitlines():
        match = re.match(r"^  (-\S.*?\S)  +(\S)", line)  # an option and, on its line, its description
        if match:
            starts.add(match.start(2))
    assert len(starts) == 1, starts


@pytest.mark.parametrize("benchmark", ["nosuch", "nosuch.toml", "prsim"])
def test_an_unknown_benchmark_is_an_error_line_in_lower_case(benchmark: str) -> None:
    result = CliRunner().invoke(main, ["judge", "--benchmark", benchmark])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: --benchmark {benchmark}") or result.output.startswith(
        f"error: --benchmark '{benchmark}'"
    ), result.output
