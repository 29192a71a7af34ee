"""What every prbj command shares: expected failures become one line and a meaningful exit code.

Rich (and the printers built on it) load only when there is something to print: `prbj --help` and every
command's option parsing go without them."""

from __future__ import annotations

import contextlib
import functools
import re
import sys
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

from prbj.errors import PrbjError

if TYPE_CHECKING:
    from rich.console import Console

F = TypeVar("F", bound=Callable[..., Any])

EXIT_INTERRUPTED = 130


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def print_error_line(message: str) -> None:
    """The one `error: …` line on stderr (prbj.display.width.print_error)."""
    from prbj.display.width import print_error

    print_error(stderr_console(), message)


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
            if (
                err.exit_code == 0
            ):  # a planned stop (--batch --no-wait): its message is the outcome, not an error
                from rich.markup import escape

                stderr_console().print(escape(str(err)), soft_wrap=True)
                sys.exit(0)
            print_error_line(str(err))
            sys.exit(err.exit_code)
        except BaseExceptionGroup as group:
            # Raised inside the engine's task group (e.g. a model that fails to load mid-run): same one line.
            first = _first(group)
            print_error_line(str(first))
            sys.exit(first.exit_code)
        except KeyboardInterrupt:
            stderr_console().print(
                "interrupted: finished calls are cached; rerun the same command to resume."
            )
            sys.exit(EXIT_INTERRUPTED)

    # functools.wraps keeps the command's signature for click; mypy cannot see that wrapper is an F.
    return wrapper  # type: ignore[return-value]


class OneLineError(click.ClickException):
    """A mistake click found on the command line (a bad option value, a typo in an option or a command), shown as
    prbj shows every error: one `error: …` line on stderr, with the help to read, instead of click's four-line
    usage block. Exit 2, as for any bad input."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        print_error_line(self.message)


class OneLineFailure(OneLineError):
    """What click reports as a failure rather than a usage mistake (a file it could not open): exit 1."""

    exit_code = 1


def one_line(error: click.ClickException) -> OneLineError:
    """click's message in prbj's words: lower case, no full stops, a did-you-mean after a semicolon, and the
    command whose --help says more."""
    message = error.format_message().strip()
    message = re.sub(r"\.\s*\(?(Did you mean|Possible options)(.*?)\)?$", r"; \1\2", message)
    message = message.rstrip(".").replace("Did you mean", "did you mean")
    message = message[:1].lower() + message[1:]
    context = getattr(error, "ctx", None)
    if context is not None:
        message += f" (see {context.command_path} --help)"
    return OneLineError(message) if error.exit_code == 2 else OneLineFailure(message)


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    try:
        yield
    except (
        OneLineError,
        click.exceptions.NoArgsIsHelpError,
    ):  # already one line; a bare group shows its help
        raise
    except click.ClickException as error:
        raise one_line(error) from None


class PrbjGroup(click.Group):
    """The `prbj` group: every command-line mistake click finds below it, in any subcommand, is one error line."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        with one_line_errors():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with one_line_errors():
            return super().invoke(ctx)
