"""Placeholders of two users met in one prompt, kept apart.

Pseudonyms are numbered per user: one user's PERSON_1 and another's are different people. The swapped-profile
control shows a pair's judge another user's profile beside the pair's own question and answers (pseudonymized
with their own user's table on per-user data): there the donor's PERSON_1 would read as the asker's PERSON_1.
`apart` renumbers the donor's placeholders of every kind the pair's own texts use past the numbers they use
(the asker's PERSON_1 and PERSON_2 stay; the donor's PERSON_1 reads PERSON_3), so no placeholder stands for two
entities in one prompt, while each user's own numbering (and so the cache) is unchanged everywhere else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from prbj.data.schema import UserProfile

# A placeholder as prbj.privacy.pseudonyms writes them: an upper-case stem, an underscore, a number.
PLACEHOLDER = re.compile(r"(?<!\w)([A-Z][A-Z0-9]*(?:_[A-Z][A-Z0-9]*)*)_([1-9]\d*)(?!\w)")


def highest(texts: Iterable[str]) -> dict[str, int]:
    """The highest number each placeholder stem has in `texts`."""
    top: dict[str, int] = {}
    for text in texts:
        for match in PLACEHOLDER.finditer(text):
            top[match[1]] = max(top.get(match[1], 0), int(match[2]))
    return top


def apart(donor: UserProfile, own_texts: Iterable[str]) -> UserProfile:
    """`donor` with each placeholder whose stem the own texts use numbered past them."""
    taken = highest(own_texts)
    if not taken:
        return donor

    def shifted(text: str) -> str:
        return PLACEHOLDER.sub(lambda m: f"{m[1]}_{int(m[2]) + taken[m[1]]}" if m[1] in taken else m[0], text)

    return donor.map_texts(shifted)
