"""`prbj judge --help` in sections (issue 35: 250 lines in one list): the options most runs use on the first
screen, every option listed once, under a heading, and the examples after the options."""

from __future__ import annotations

import re

from click.testing import CliRunner

from prbj.cli import main
from prbj.cli.sections import OTHER

FIRST_SCREEN = 50  # lines of an ordinary terminal


def _help(width: int = 100) -> list[str]:
    result = CliRunner(env={"COLUMNS": str(width)}).invoke(main, ["judge", "--help"], terminal_width=width)
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def _options_by_section(lines: list[str]) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in lines:
        if re.fullmatch(r"[A-Z][^:]*:", line):
            current = line[:-1]
            sections[current] = []
        elif current is not None and (found := re.match(r"\s{2}(?:-\w, )?(--[a-z][a-z-]*)", line)):
            sections[current].append(found.group(1))
    return sections


def test_the_first_screen_shows_the_options_most_runs_use() -> None:
    lines = _help()
    screen = "\n".join(lines[:FIRST_SCREEN])
    assert lines[lines.index("Common options:") - 1] == ""
    for option in (
        "--provider",
        "--dataset",
        "--subset",
        "--limit",
        "--context",
        "--max-cost",
        "--dry-run",
        "--out",
    ):
        assert option in screen, option
    assert "Examples:" not in screen  # the examples follow the options


def test_every_option_is_listed_once_under_a_heading() -> None:
    lines = _help(200)
    sections = _options_by_section(lines)
    assert next(iter(sections)) == "Common options"
    listed = [option for options in sections.values() for option in options]
    command = main.commands["judge"]
    declared = [opt for param in command.params for opt in param.opts if opt.startswith("--")]
    assert sorted(listed) == sorted([*declared, "--help"])
    assert len(listed) == len(set(listed))
    assert "--help" in sections[OTHER]


def test_an_option_in_no_section_is_listed_under_other_options() -> None:
    import click

    from prbj.cli.sections import SectionedCommand

    @click.command(cls=SectionedCommand, sections=[("Main", ["first"])], examples=["prbj demo --second 2"])
    @click.option("--first")
    @click.option("--second")
    def demo(first: str, second: str) -> None:
        """A demo."""

    text = CliRunner().invoke(demo, ["--help"]).output
    assert text.index("Main:") < text.index("--first") < text.index("Other options:") < text.index("--second")
    assert text.rstrip().endswith("prbj demo --second 2") and "Examples:" in text


def test_the_examples_come_after_the_options_and_are_still_run() -> None:
    from doc_examples import help_examples

    lines = _help()
    assert lines.index("Examples:") > max(i for i, line in enumerate(lines) if line.strip().startswith("--"))
    shown = {line.split("  #")[0].strip() for line in lines[lines.index("Examples:") + 1 :]}
    collected = [e.command for e in help_examples() if e.where.startswith("prbj judge --help")]
    assert len(collected) >= 10
    assert all(command in shown for command in collected), (collected, shown)
