"""Options shared by every command that calls models (judge, build, bon, serve): one definition, one meaning."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

_GATEWAY_OPTIONS = [
    click.option(
        "--max-cost", type=click.FloatRange(min=0), default=None, metavar="USD", help="Hard cap on spend."
    ),
    click.option("--dry-run", is_flag=True, help="Print calls needed, cached, tokens and USD; send nothing."),
    click.option(
        "--cache-only", is_flag=True, help="Send nothing: answer from the cache, report what is missing."
    ),
    click.option(
        "--cache-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Response cache folder [default: $PRBJ_CACHE_DIR or ./cache].",
    ),
    click.option("--api-base", metavar="URL", help="Send the provider's requests to this base URL instead."),
    click.option(
        "--providers-dir",
        type=click.Path(file_okay=False, path_type=Path),
        envvar="PRBJ_PROVIDERS_DIR",
        help="Folder of provider profiles that override/add to the bundled ones [env: PRBJ_PROVIDERS_DIR].",
    ),
    click.option(
        "--env-file",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        help="Read API keys from this .env file (variables already set win).",
    ),
]


def gateway_options(command: F) -> F:
    """Adds --max-cost, --dry-run, --cache-only, --cache-dir, --api-base, --providers-dir, --env-file; the
    command receives them as keyword arguments and hands them to prbj.llm.setup.GatewayOptions."""
    for option in reversed(_GATEWAY_OPTIONS):
        command = option(command)
    return command
