"""How the keys of an experiment entry become the options of an existing prbj command.

An entry's keys are the command's own options, named as on its command line (`reasoning_effort` or
`reasoning-effort` for `--reasoning-effort`, `context` for `--context`): whatever option a command has, an
experiment can set, including options added after this module was written. The options themselves are
described by the CLI (prbj.cli.run builds `CommandLine` from the click commands), which sits above this
package; this module only turns TOML values into arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

# A command by its words after `prbj`: ("judge",), ("bon", "sample"), ...
CommandPath = tuple[str, ...]


@dataclass(frozen=True)
class OptionInfo:
    """One option of a command, as its command line defines it."""

    name: str  # the keyword the command body receives (click's dest), e.g. "contexts" for --context
    flag: str  # the long option, e.g. "--context"
    off_flag: str | None = None  # "--no-repair" for --repair/--no-repair
    is_flag: bool = False  # takes no value (--batch)
    takes_optional_value: bool = False  # --ray [ADDRESS]: alone, or with a value
    multiple: bool = False
    is_path: bool = False

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys an experiment entry may use for it: the long option without dashes (either separator)
        and the keyword name."""
        bare = self.flag.lstrip("-")
        return tuple(dict.fromkeys((bare.replace("-", "_"), bare, self.name)))


class CommandLine(Protocol):
    """prbj's commands as an experiment uses them: their options, a check of arguments without running
    anything, and running one."""

    def options(self, command: CommandPath) -> Sequence[OptionInfo]: ...

    def check(self, command: CommandPath, argv: Sequence[str]) -> str | None:
        """None when `argv` parses; else click's message for what is wrong."""
        ...

    def run(self, command: CommandPath, argv: Sequence[str]) -> int:
        """Run the command as `prbj <command> <argv>` would; its exit code."""
        ...


def option_index(options: Sequence[OptionInfo]) -> dict[str, OptionInfo]:
    return {key: option for option in options for key in option.keys}


def resolve_path(value: str, base: Path) -> str:
    """A relative path in an experiment file is relative to the file's folder."""
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else (base / path).resolve())


def option_argv(option: OptionInfo, value: Any, *, base: Path) -> list[str]:
    """The arguments that give `option` the TOML `value`. Booleans switch flags on (or off, where the option
    has an off form); lists repeat a repeatable option; paths are made absolute against `base`."""
    if isinstance(value, bool):
        if option.is_flag or option.takes_optional_value:
            if value:
                return [option.flag]
            return [option.off_flag] if option.off_flag else []
        return [option.flag, "true" if value else "false"]
    values = value if isinstance(value, list) else [value]
    argv: list[str] = []
    for item in values:
        text = str(item)
        if option.is_path:
            text = resolve_path(text, base)
        argv += [option.flag, text]
    return argv


def entry_argv(options: Mapping[str, OptionInfo], entry: Mapping[str, Any], *, base: Path) -> list[str]:
    """Arguments for every key of `entry` (keys already checked to name options), in the entry's order."""
    argv: list[str] = []
    for key, value in entry.items():
        argv += option_argv(options[key], value, base=base)
    return argv
