"""The two ways prbj prints a line it must not cut: errors (one line at any width, escaped) and lines that name
files (wrapped between words only)."""

from __future__ import annotations

import io

from rich.console import Console

from prbj.display.width import print_error, print_whole


def _console(width: int) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=width, color_system=None), out


def test_an_error_is_one_line_at_any_width_and_keeps_its_brackets() -> None:
    console, out = _console(30)
    print_error(console, "no price known for litellm:x; set [price] in a profile of your own")
    assert out.getvalue() == "error: no price known for litellm:x; set [price] in a profile of your own\n"


def test_a_line_naming_files_wraps_between_words_and_never_inside_a_path() -> None:
    console, out = _console(30)
    path = "/tmp/a-rather-long-folder-name/of/a/run/report.html"
    print_whole(console, f"report: {path} [see it]")
    lines = out.getvalue().splitlines()
    assert path in lines and "[see it]" in lines[-1]
    assert all(len(line) <= 30 for line in lines if path not in line)
