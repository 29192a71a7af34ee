"""Errors that the CLI turns into one-line messages and meaningful exit codes."""

from __future__ import annotations

# How much of a message from code prbj does not own (a reward model's, spaCy's) an error line quotes.
QUOTED_CHARS = 200


def one_line(text: object, limit: int = QUOTED_CHARS) -> str:
    """`text` flattened to one line and cut at `limit` characters: a message quoted in an error line never makes
    it a traceback."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class PrbjError(Exception):
    """An expected failure: shown as one line, no traceback."""

    exit_code = 1


class DataError(PrbjError):
    """Bad input data or options: exit code 2. The message names file, line (or row) and field."""

    exit_code = 2


class ConfigError(PrbjError):
    """A provider or option that cannot work as configured: exit code 2."""

    exit_code = 2


class LeakageError(PrbjError):
    """A judge asked for the scoring standard (narrative, rubric aspects) outside the oracle setting."""

    exit_code = 3
