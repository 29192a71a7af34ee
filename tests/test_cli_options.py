"""The shared option decorators keep each command's wording: what --seed seeds is said per command, and only
`prbj judge`, whose A/B draw defaults to the official script's seed, says "as in the official script"."""

from __future__ import annotations

import click

from prbj.cli import main


def _commands(group: click.Group, prefix: str = "prbj") -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}
    for name, command in group.commands.items():
        found[f"{prefix} {name}"] = command
        if isinstance(command, click.Group):
            found.update(_commands(command, f"{prefix} {name}"))
    return found


def _option(command: click.Command, name: str) -> click.Option | None:
    return next((p for p in command.params if isinstance(p, click.Option) and name in p.opts), None)


def _the(command: click.Command, name: str) -> click.Option:
    option = _option(command, name)
    assert option is not None, f"{command.name} has no {name}"
    return option


def test_only_prbj_judge_ties_its_seed_to_the_official_script() -> None:
    seeds = {
        path: option for path, command in _commands(main).items() if (option := _option(command, "--seed"))
    }
    assert {"prbj judge", "prbj serve", "prbj bon sample", "prbj bon score", "prbj build annotate"} <= set(
        seeds
    )
    official = {path for path, option in seeds.items() if "official" in (option.help or "")}
    assert official == {"prbj judge"}
    assert all(option.default == 42 for option in seeds.values())


def test_shared_options_keep_their_per_command_defaults() -> None:
    commands = _commands(main)
    assert _the(commands["prbj build"], "--concurrency").default == 8
    assert _the(commands["prbj judge"], "--concurrency").default == 16
    assert _the(commands["prbj build annotate"], "--profile-k").default == 5
    assert _the(commands["prbj build"], "--out").default is None
    assert _the(commands["prbj serve"], "--context").multiple is False
    assert _the(commands["prbj judge"], "--context").multiple is True
