"""What keeps a user's profile out of an export: the texts that describe the user, and a scrubber that cuts
verbatim quotes of them out of what a judge wrote (LLM judges often quote the posts they were shown)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from prbj.data.schema import Pair

# A quote is this many consecutive words of the user's texts: short enough to catch a quoted sentence, long
# enough not to cut common phrases ("on a budget").
QUOTE_WORDS = 4
REMOVED = "[profile text removed]"

_WORD = re.compile(r"\w+", re.UNICODE)


def personal_texts(pair: Pair) -> list[str]:
    """Everything a pair says about its user: the profile of every kind (posts, earlier choices, persona, stated
    facts), the narrative, the rubric's evidence and reasons."""
    texts = pair.user_profile.texts()
    texts.append(pair.narrative)
    for aspect in pair.rubric_aspects:
        texts += [aspect.aspect, aspect.evidence, aspect.reason]
    return [t for t in texts if t]


def _shingles(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + QUOTE_WORDS]) for i in range(len(words) - QUOTE_WORDS + 1)}


class ProfileScrubber:
    """Cuts out of a text every run of QUOTE_WORDS or more words (case and punctuation aside) that also occurs in
    a user's personal texts. A paraphrase is not caught: docs/export.md says so."""

    def __init__(self, pairs: Iterable[Pair], also: Iterable[str] = ()) -> None:
        """`also`: texts about users that are not in the data, e.g. the personas a synthesizer wrote."""
        # Quotes of any user's texts are cut, not only of the pair's own: a swapped-profile judge saw another's.
        self._quotes: set[tuple[str, ...]] = set()
        for text in [t for pair in pairs for t in personal_texts(pair)] + list(also):
            self._quotes |= _shingles(_WORD.findall(text.lower()))

    def scrub(self, text: str | None) -> str | None:
        if not text:
            return text
        matches = list(_WORD.finditer(text))
        words = [m.group(0).lower() for m in matches]
        cut = [False] * len(words)
        for start in range(len(words) - QUOTE_WORDS + 1):
            if tuple(words[start : start + QUOTE_WORDS]) in self._quotes:
                for index in range(start, start + QUOTE_WORDS):
                    cut[index] = True
        if not any(cut):
            return text
        pieces: list[str] = []
        position = 0
        index = 0
        while index < len(words):
            if not cut[index]:
                index += 1
                continue
            end = index
            while end + 1 < len(words) and cut[end + 1]:
                end += 1
            pieces += [text[position : matches[index].start()], REMOVED]
            position = matches[end].end()
            index = end + 1
        pieces.append(text[position:])
        return "".join(pieces)
