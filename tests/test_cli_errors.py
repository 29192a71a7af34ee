"""One error format (issue 35): every mistake on the command line, whether prbj or click finds it, is one
`error: …` line on stderr and exit 2; click's four-line Usage/Try/Error block is gone, its did-you-mean kept."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from prbj.cli import main


def prbj(*args: str):
    return CliRunner().invoke(main, list(args), prog_name="prbj")


def _one_error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: "), lines[0]
    assert "Usage:" not in result.output and "Try '" not in result.output and "Error:" not in result.output
    return lines[0]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["judge", "--max-cost", "-1"], "invalid value for '--max-cost': -1.0 is not in the range x>=0"),
        (["judge", "--limit", "0"], "invalid value for '--limit': 0 is not in the range x>=1"),
        (["judge", "--limt", "3"], "no such option '--limt'; did you mean one of: '--limit'"),
        (["judgee"], "no such command 'judgee'; did you mean 'judge'?"),
        (["bon", "sampel"], "no such command 'sampel'; did you mean 'sample'?"),
        (["judge", "--context", "profle"], "is not one of 'none', 'profile'"),
        (["cache", "prune"], "missing option '--older-than'"),
        (["cache", "prune", "--older-than", "soon"], "invalid value"),
        (["report"], "missing argument 'RUN_DIRS...'"),
        (["--bogus"], "no such option '--bogus'"),
    ],
)
def test_a_command_line_mistake_is_one_error_line(args: list[str], says: str) -> None:
    line = _one_error_line(prbj(*args))
    assert says in line, line
    assert line.endswith("--help)"), line  # where to read more, in place of click's "Try '… --help'"


def test_the_suggestion_keeps_its_own_words() -> None:
    line = _one_error_line(prbj("judge", "--context", "profle"))
    assert "did you mean 'profile'? (see prbj judge --help)" in line


def test_prbj_own_errors_are_unchanged_and_help_still_shows() -> None:
    line = _one_error_line(prbj("judge", "-p", "lenght", "--no-progress"))
    assert "did you mean 'length'" in line
    help_text = prbj("judge", "--help")
    assert help_text.exit_code == 0 and help_text.output.startswith("Usage: prbj judge")
    bare = prbj("bon")  # a group alone shows its commands, as before
    assert "Commands:" in bare.output


def test_a_real_process_prints_the_same_line_on_stderr() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "prbj", "judge", "--limit", "0"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: invalid value for '--limit'") and done.stderr.count("\n") == 1


def test_a_missing_key_is_one_lower_case_error_line_in_a_real_process() -> None:
    """Issue 35 reported 'Error:' in some missing-key runs; the bytes prbj writes are always 'error: …' (the
    capital came from a display that capitalises the first letter of a command's output)."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    for args in (["judge", "-p", "gemini-3-flash"], ["serve", "-p", "gemini-3-flash", "--port", "0"]):
        done = subprocess.run(
            [sys.executable, "-m", "prbj", *args], capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("error: provider 'gemini-3-flash' needs an API key"), done.stderr
        assert done.stderr.count("\n") == 1 and "Error" not in done.stdout + done.stderr
