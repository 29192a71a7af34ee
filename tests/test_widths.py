"""Every command's tables fit the width they are given (60, 80 and 200 columns; on a terminal and piped) and
drop nothing: every word of the 200-column output is in the narrow one, whole (issue 26)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from tty_commands import TtyRun

from prbj.cli import main
from prbj.display.fit import FittingTable
from prbj.display.width import UNKNOWN_WIDTH, output_width
from run_dirs import outcomes, write_run_dir

WIDTHS = (60, 80, 200)
WIDE = 200
ART = "Art_and_Entertainment"
# Run directories are named by time and configuration: two runs of one command differ only there.
_RUN_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}(-\d+)?")
# Lines of box drawing carry no value.
_RULE = re.compile(r"^[\s─━═┃│┏┓┗┛┡┩┣┫╇╈┳┻╋┠┨┯┷┼├┤┬┴└┘┌┐]*$")


def _words(text: str) -> set[str]:
    return {w for line in _RUN_ID.sub("RUN", text).splitlines() for w in line.split() if not _RULE.match(w)}


def assert_fits(reference: str, text: str, width: int, what: object) -> None:
    """No line wider than `width`; every word of `reference` (the same output at 200 columns) in `text`,
    except a word that is itself too long for a line of `width`."""
    wide = [line for line in text.splitlines() if cell_len(line.rstrip()) > width]
    assert not wide, (what, width, wide)
    missing = {w for w in _words(reference) - _words(text) if cell_len(w) < width - 20}
    assert not missing, (what, width, sorted(missing), text)


# --- the renderer on its own ---------------------------------------------------------------------------------


def _hostile_table() -> Table:
    """Long unbreakable names, a long header, many numeric columns, a long title and caption."""
    table = Table(title="A title that is longer than sixty columns, so it must wrap on a narrow terminal")
    table.caption = "a caption: " + "words that go on " * 8
    table.add_column("judge")
    table.add_column("provider model id")
    for name in ("accuracy %", "95% CI", "discordant share %", "pairs needed", "USD", "failed", "ties %"):
        table.add_column(name, justify="right")
    for index in range(4):
        table.add_row(
            f"judge-with-a-long-name-{index}",
            "litellm:openai/Qwen/Qwen3-8B-Instruct",
            f"{70 + index}.5",
            "65.0–86.7",
            "46.7",
            "11117",
            "0.0123",
            f"{index}/60",
            "0.0",
        )
    return table


@pytest.mark.parametrize("width", WIDTHS)
def test_a_hostile_table_fits_every_width_and_keeps_every_value(width: int) -> None:
    wide = Console(width=WIDE, record=True, force_terminal=False)
    wide.print(FittingTable(_hostile_table()))
    narrow = Console(width=width, record=True, force_terminal=False)
    narrow.print(FittingTable(_hostile_table()))
    text = narrow.export_text()
    assert_fits(wide.export_text(), text, width, "hostile table")
    assert "litellm:openai/Qwen/Qwen3-8B-Instruct" in text and "…" not in text


def test_wrapping_breaks_between_words_and_prefers_wrapping_headers() -> None:
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("first judge")
    table.add_column("second judge")
    for name in ("pairs now", "discordant %", "difference (pp)", "pairs needed", "MDE now (pp)"):
        table.add_column(name, justify="right")
    table.add_row("bm25-profile · profile", "embed-profile · profile", "60", "33.3", "-10.0", "6539", "20.5")
    console = Console(width=90, record=True, force_terminal=False)
    console.print(FittingTable(table))
    text = console.export_text()
    # 111 columns whole; at 90 drawn as a table (one row line) with the headers wrapped rather than the names.
    assert "bm25-profile · profile embed-profile · profile" in text, text
    assert "discordant" in text.splitlines()[0] and "%" not in text.splitlines()[0]
    assert all(cell_len(line) <= 90 for line in text.splitlines())


def test_output_width_is_columns_else_the_terminal_else_a_fixed_width(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "73")
    assert output_width() == 73
    monkeypatch.delenv("COLUMNS")
    with open(os.devnull, "rb") as null:  # no terminal anywhere: stdin, stdout and stderr all elsewhere
        saved = [os.dup(fd) for fd in (0, 1, 2)]
        try:
            for fd in (0, 1, 2):
                os.dup2(null.fileno(), fd)
            assert output_width() == UNKNOWN_WIDTH
        finally:
            for fd, copy in zip((0, 1, 2), saved, strict=True):
                os.dup2(copy, fd)
                os.close(copy)


# --- every command ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Two offline judge runs of the sample, a hand-made run with long judge names, a baseline."""
    root = tmp_path_factory.mktemp("widths")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        runner = CliRunner()
        for _ in range(2):
            assert runner.invoke(main, ["judge", "--no-progress", "--limit", "4"]).exit_code == 0
        names = ["a-rather-long-judge-name-for-a-model", "another-judge-with-a-long-name"]
        rows = [r for name in names for r in outcomes(name, ART, [True, False, True], context="profile")]
        write_run_dir(root / "long-names", rows)
        first = sorted((root / "reports").iterdir())[0]
        assert (
            runner.invoke(
                main, ["check", str(first), "--baseline", "base.json", "--update-baseline"]
            ).exit_code
            == 0
        )
        yield root


def _commands(root: Path) -> list[list[str]]:
    first, second = (str(p.relative_to(root)) for p in sorted((root / "reports").iterdir()))
    return [
        ["judge", "--no-progress", "--limit", "4"],
        ["report", first],
        ["report", first, second],
        ["report", "long-names"],
        ["check", first, "--baseline", "base.json"],
        ["power", "--baseline", first, "--delta", "0.02"],
        ["show", first, "--limit", "2"],
        ["diff", first, second],
        ["providers"],
    ]


def _piped(args: Sequence[str], width: int) -> str:
    result = CliRunner(env={"COLUMNS": str(width)}).invoke(main, list(args))
    assert result.exit_code == 0, (args, result.output)
    return result.output


def test_every_command_fits_60_80_and_200_columns_piped_and_on_a_terminal(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workspace)
    commands = _commands(workspace)
    jobs = [(width, args) for width in WIDTHS for args in commands]
    on_tty = TtyRun(jobs, workspace, dict(os.environ))  # in its own process, while the piped runs go here
    references = {i: _piped(args, WIDE) for i, args in enumerate(commands)}
    for width in WIDTHS:
        for i, args in enumerate(commands):
            assert_fits(references[i], _piped(args, width), width, ("piped", args))
    for (width, args), text in zip(jobs, on_tty.outputs(), strict=True):
        assert_fits(references[commands.index(list(args))], text, width, ("terminal", args))
