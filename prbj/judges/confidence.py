"""A pairwise judge's probability for its verdict, from the log-probabilities of the verdict token.

The parser says which letter the judge gave and where it stands in the reply (judges.verdict.verdict_position);
the reply's stored positions (prbj.llm.logprobs) say what the model could have written there. P(A) is the
probability of "A" normalised over the two verdict letters at that position:

    P(A) = p(A) / (p(A) + p(B)),

where p(X) sums the alternatives whose text is the letter X in either case (" A", "A", " a" and "a" are one
letter: the parser reads each of them as that verdict). When only one letter is among the listed
alternatives, the other's probability is not known; it is at most the smallest listed probability and at
most the mass the list leaves over, and that bound is used (P(A) is then as unsure as the listed
alternatives allow, never more sure than they show).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from prbj.judges.verdict import verdict_position
from prbj.llm.logprobs import TokenChoice

LETTERS = ("A", "B")


def probability_of_a(
    reply: str | None, shown: Sequence[str], logprobs: Sequence[TokenChoice] | None
) -> float | None:
    """P(A) at the verdict letter of `reply`; None when the reply has no verdict, no log-probabilities were
    returned, or the token under the verdict is not a lone verdict letter."""
    if not logprobs:
        return None
    found = verdict_position(reply, shown)
    if found is None:
        return None
    _, offset = found
    token = next((t for t in logprobs if t.offset <= offset < t.end), None)
    if token is None:
        return None
    written = token.token.strip()
    if written.upper() not in LETTERS or len(written) != 1:
        return None
    return _normalised(token)


def _normalised(token: TokenChoice) -> float | None:
    listed: dict[str, float] = {alternative: math.exp(lp) for alternative, lp in token.alternatives}
    listed.setdefault(token.token, math.exp(token.logprob))
    mass = {letter: 0.0 for letter in LETTERS}
    for text, probability in listed.items():
        letter = text.strip().upper()
        if letter in mass:
            mass[letter] += probability
    a, b = mass["A"], mass["B"]
    if a > 0 and b > 0:
        return a / (a + b)
    if a == 0 and b == 0:
        return None
    # One letter is missing from the list: bound its probability by what the list leaves room for.
    bound = min(min(listed.values()), max(0.0, 1.0 - sum(listed.values())))
    return a / (a + bound) if a > 0 else bound / (bound + b)
