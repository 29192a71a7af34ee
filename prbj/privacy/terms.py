"""Terms of your own to pseudonymize (`--pseudonymize-terms FILE`): what no recognizer finds and no NER model
names, such as a health condition, a project's code name or a rare employer. One term per line, optionally with
its kind (`CONDITION: type 1 diabetes`; a line without one is a TERM), `#` starts a comment. Each term is found
in any case where it stands as whole words (Presidio's deny-list recognizer) and becomes a per-user placeholder
like any other entity (CONDITION_1)."""

from __future__ import annotations

import re
from pathlib import Path

from prbj.errors import ConfigError

DEFAULT_KIND = "TERM"
_KIND = re.compile(r"([A-Z][A-Z0-9_]*)\s*:\s*(.+)")


def read_terms(path: Path) -> tuple[tuple[str, str], ...]:
    """(kind, term) of every line of `path`, in file order, each once."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(
            f"--pseudonymize-terms {path}: cannot read it ({type(err).__name__}: {err})"
        ) from None
    terms: dict[tuple[str, str], None] = {}
    for line in text.splitlines():
        stripped = line.split("#", 1)[0].strip()
        if not stripped:
            continue
        kinded = _KIND.fullmatch(stripped)
        kind, term = (kinded[1], kinded[2].strip()) if kinded else (DEFAULT_KIND, stripped)
        terms[(kind, term)] = None
    if not terms:
        raise ConfigError(
            f"--pseudonymize-terms {path}: no term in it (one per line, e.g. CONDITION: asthma)"
        )
    return tuple(terms)
