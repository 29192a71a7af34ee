"""Nearest-name suggestions ("did you mean …?") for names a user typed: judges, providers, subsets, contexts."""

from __future__ import annotations

from collections.abc import Iterable
from difflib import SequenceMatcher


def _likeness(typed: str, candidate: str) -> float:
    # Case never matters, and a typo in an unambiguous prefix (lifstyle → Lifestyle_and_Personal_Development)
    # is as near a miss as a typo in a whole name.
    # So is a typo in the first word of a long name, which is how subsets are typed (artt → Art_and_Entertainment).
    typed, candidate = typed.lower(), candidate.lower()
    whole = SequenceMatcher(None, typed, candidate).ratio()
    prefix = SequenceMatcher(None, typed, candidate[: len(typed) + 1]).ratio() if len(typed) >= 4 else 0.0
    first = candidate.split("_", 1)[0]
    word = SequenceMatcher(None, typed, first).ratio() if len(first) >= 3 and first != candidate else 0.0
    return max(whole, prefix, word)


def close_names(name: str, known: Iterable[str], *, limit: int = 3, cutoff: float = 0.7) -> list[str]:
    """The known names nearest to `name`, nearest first (typos, a missing part: gemini-flash → gemini-3-flash)."""
    scored = sorted(((_likeness(name, c), c) for c in dict.fromkeys(known)), key=lambda sc: -sc[0])
    return [candidate for score, candidate in scored if score >= cutoff][:limit]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """' did you mean 'x'?' (leading space, so it follows a clause), or '' when nothing is close."""
    found = close_names(name, known)
    if not found:
        return ""
    return " did you mean " + " or ".join(repr(candidate) for candidate in found) + "?"
