"""Every shell example the project documents, collected automatically: fenced `bash`/`sh`/`shell`/`console`
blocks (and `prbj …` lines of unlabelled blocks) in README.md, docs/*.md and examples/*.md, and the "Example:"
lines of every command's `--help`.

Conventions the collector reads:
- a line ending in `\\` continues on the next one; `  # …` after a command is a comment;
- a comment line `# → TEXT` right after a command is output the command prints, `...` standing for anything
  (tests/test_examples.py checks it);
- in a `console` block, commands start with `$ `.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
OUTPUT_MARK = "# → "
_HELP_COMMAND = re.compile(r"^(\w+=\S+ )*prbj ")
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)


@dataclass
class Example:
    where: str  # "README.md:123" or "prbj judge --help:2"
    command: str
    # The fenced block (or help text) it belongs to: a server an example starts runs until its block ends.
    block: str = ""
    outputs: list[str] = field(default_factory=list)
    # A CI workflow's step: the variables the workflow and the step set (`${{ secrets.X }}` as "secret:X"), and
    # whether it is the first step of a job, which starts from a fresh checkout (only the restored cache kept).
    env: dict[str, str] | None = None
    fresh_checkout: bool = False

    @property
    def words(self) -> list[str]:
        return self.command.split()


def _strip_comment(line: str) -> str:
    """The command without a trailing `  # comment` (a `#` inside quotes stays)."""
    quote: str | None = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return line[:index].rstrip()
    return line.rstrip()


def commands_of(body: str, language: str, where: str, first_line: int) -> Iterator[Example]:
    """The commands of one fenced block (or help text), each with the output lines shown under it."""
    pending = ""
    start = first_line
    last: Example | None = None
    for offset, raw in enumerate(body.splitlines()):
        line = raw.strip()
        if line.startswith(OUTPUT_MARK) and last is not None and not pending:
            last.outputs.append(line[len(OUTPUT_MARK) :])
            continue
        if language == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        elif language not in SHELL_LANGUAGES and not (pending or line.startswith("prbj ")):
            continue
        if not pending:
            start = first_line + offset
        text = _strip_comment(line)
        if text.endswith("\\"):
            pending += text[:-1].rstrip() + " "
            continue
        command = (pending + text).strip()
        pending = ""
        if command:
            last = Example(f"{where}:{start}", command, block=f"{where}@{first_line}")
            yield last


def markdown_examples(path: Path) -> Iterator[Example]:
    text = path.read_text(encoding="utf-8")
    for match in _FENCE.finditer(text):
        language, body = match.group(1).lower(), match.group(2)
        first_line = text.count("\n", 0, match.start(2)) + 1
        yield from commands_of(body, language, str(path.relative_to(ROOT)), first_line)


def help_examples() -> Iterator[Example]:
    """The "Example(s):" lines of every command's help, as `prbj … --help` shows them."""
    import click

    from prbj.cli import main

    def walk(command: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Command]]:
        yield path, command
        if isinstance(command, click.Group):
            for name, sub in sorted(command.commands.items()):
                yield from walk(sub, [*path, name])

    for path, command in walk(main, ["prbj"]):
        # Examples sit in the help's verbatim blocks (click's \b); a line with "→" there is a diagram of steps.
        for block in re.split(r"\n\s*\n", command.help or ""):
            lines = [line.strip() for line in block.strip().splitlines()]
            if lines[:1] != ["\b"]:
                continue
            kept: list[str] = []
            for line in lines[1:]:
                continued = bool(kept) and kept[-1].endswith("\\")
                if continued or (_HELP_COMMAND.match(line) and " → " not in line):
                    kept.append(line)
            body = "\n".join(kept)
            yield from commands_of(body, "bash", " ".join([*path, "--help"]), 1)
        # A command with its options in sections (prbj.cli.sections) shows its examples after them.
        examples = getattr(command, "examples", ())
        if examples:
            yield from commands_of("\n".join(examples), "bash", " ".join([*path, "--help"]), 1)


_SECRET = re.compile(r"^\$\{\{\s*secrets\.(\w+)\s*\}\}$")
# The indented `prbj …` lines of a workflow's header comment: what the reader runs by hand between its jobs.
_COMMENT_COMMAND = re.compile(r"^#\s+(prbj .*)$")


def _workflow_env(raw: dict[str, object] | None) -> dict[str, str]:
    env = {}
    for name, value in (raw or {}).items():
        secret = _SECRET.match(str(value))
        env[name] = f"secret:{secret.group(1)}" if secret else str(value)
    return env


def workflow_examples(path: Path) -> Iterator[Example]:
    """A GitHub Actions workflow's `run:` steps, in the order a reader meets them: the job that makes the cache
    (`workflow_dispatch`), then the commands the header comment tells the reader to run by hand (on their own
    machine: env None), then the job that replays it (`pull_request`). Each job starts from a fresh checkout."""
    import yaml

    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    where = str(path.relative_to(ROOT))
    workflow = yaml.safe_load(text)
    env = _workflow_env(workflow.get("env"))

    def line_of(snippet: str, after: int = 0) -> int:
        return next(number for number, line in enumerate(lines, 1) if number > after and snippet in line)

    def job(name: str) -> Iterator[Example]:
        first = True
        number = line_of(f"  {name}:")
        for step in workflow["jobs"][name]["steps"]:
            if "run" not in step:
                continue
            command = " ".join(step["run"].split())
            number = line_of(step.get("name", command.split()[0]), after=number)
            step_env = {
                **env,
                **_workflow_env(workflow["jobs"][name].get("env")),
                **_workflow_env(step.get("env")),
            }
            yield Example(
                f"{where}:{number}", command, block=f"{where}@{name}", env=step_env, fresh_checkout=first
            )
            first = False

    dispatch = [
        name for name, spec in workflow["jobs"].items() if "workflow_dispatch" in str(spec.get("if", ""))
    ]
    others = [name for name in workflow["jobs"] if name not in dispatch]
    for name in dispatch:
        yield from job(name)
    for number, line in enumerate(lines, 1):
        match = _COMMENT_COMMAND.match(line.strip())
        if match:
            yield Example(f"{where}:{number}", match.group(1).strip(), block=f"{where}@by-hand")
    for name in others:
        yield from job(name)


def all_examples() -> list[Example]:
    documents = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "examples").glob("*.md")),
    ]
    found = [example for document in documents for example in markdown_examples(document)]
    workflows = sorted((ROOT / "examples").glob("*.yml"))
    return (
        found + list(help_examples()) + [example for flow in workflows for example in workflow_examples(flow)]
    )
