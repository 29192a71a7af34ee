"""What every prbj command shares: expected failures become one line and a meaningful exit code."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from rich.console import Console
from rich.markup import escape

from prbj.display.width import print_error
from prbj.errors import PrbjError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_INTERRUPTED = 130


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def _first(group: BaseExceptionGroup) -> PrbjError:
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            return _first(error)
        if isinstance(error, PrbjError):
            return error
    raise group


def friendly_errors(command: F) -> F:
    """Expected failures become one line on stderr and their exit code; Ctrl-C exits 130 quietly."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except PrbjError as err:
            if err.exit_code == 0:  # a planned stop (--batch --no-wait): its message is the outcome, not an error
                stderr_console().print(escape(str(err)), soft_wrap=True)
                sys.exit(0)
            print_error(stderr_console(), str(err))
            sys.exit(err.exit_code)
        except BaseExceptionGroup as group:
            # Raised inside the engine's task group (e.g. a model that fails to load mid-run): same one line.
            first = _first(group)
            print_error(stderr_console(), str(first))
            sys.exit(first.exit_code)
        except KeyboardInterrupt:
            stderr_console().print(
                "interrupted: finished calls are cached; rerun the same command to resume."
            )
            sys.exit(EXIT_INTERRUPTED)

    # functools.wraps keeps the command's signature for click; mypy cannot see that wrapper is an F.
    return wrapper  # type: ignore[return-value]
