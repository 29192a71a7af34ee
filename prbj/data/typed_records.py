"""Personalized RewardBench files read in one typed pass: the common case of a clean `.jsonl` dataset.

`validate.py` checks a record field by field in Python and names what is wrong. On a full-size dataset
(~2,800 pairs, ~100,000 profile posts) that and `json.loads` were a fifth of a cached rerun. Here msgspec
parses each line straight into the record's types, the posts as `ProfilePost`s and the aspects as
`RubricAspect`s, in C; the rules a type cannot state (a non-blank text, two different answers, unique ids)
are checked after.

Anything this pass does not take (a type it does not expect, an id written as a number, a null category, a
blank field, a duplicate, bytes that are not UTF-8) makes it return None, and the files are read the
field-by-field way from the start. So it yields the very pairs that way would, or nothing: every lenient
reading and every error message (file, line, field) stays `validate.py`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING

import msgspec

from prbj.data.schema import Pair, ProfilePost, RubricAspect
from prbj.data.validate import benchmark_pair

if TYPE_CHECKING:
    from prbj.data.dataset import Blob


class _Record(msgspec.Struct):
    """One line of the benchmark's layout, as validate.parse_pair reads it when nothing needs leniency."""

    id: str
    category: str
    question: str
    profile: list[ProfilePost]
    chosen: str
    rejected: str
    # The scoring standard, shown only in the oracle context: a user's own pairs may have none.
    narrative: str = ""
    rubric_aspects: list[RubricAspect] = msgspec.field(default_factory=list)


_DECODER = msgspec.json.Decoder(_Record)


def _blank(text: str) -> bool:
    # What `not text.strip()` says, without copying the text.
    return not text or text.isspace()


# A record holds ~40 posts: their fields are checked with C-level loops, not a Python call per post.
_POST_ID, _POST_TEXT, _ASPECT = attrgetter("id"), attrgetter("text"), attrgetter("aspect")


def _any_blank(texts: Iterable[str]) -> bool:
    """Whether any of `texts` is empty or only whitespace."""
    listed = list(texts)
    return "" in listed or any(map(str.isspace, listed))


def _pair(record: _Record) -> Pair | None:
    """The Pair parse_pair would build from this record, or None where it would refuse it."""
    if (
        _blank(record.id)
        or _blank(record.category)
        or _blank(record.question)
        or _blank(record.chosen)
        or _blank(record.rejected)
        or record.chosen.strip() == record.rejected.strip()
    ):
        return None
    posts = tuple(record.profile)
    if _any_blank(map(_POST_ID, posts)) or _any_blank(map(_POST_TEXT, posts)):
        return None
    aspects = tuple(record.rubric_aspects)
    if _any_blank(map(_ASPECT, aspects)):
        return None
    return benchmark_pair(
        record.id,
        record.category,
        record.question,
        posts,
        record.narrative,
        aspects,
        record.chosen,
        record.rejected,
    )


def typed_pairs(blobs: Sequence[Blob]) -> list[Pair] | None:
    """Every pair of these files, in order, or None when one is not a `.jsonl` file of the benchmark's layout or
    any line is not taken as it stands."""
    if not blobs or any(blob.suffix != ".jsonl" for blob in blobs):
        return None
    decode = _DECODER.decode
    pairs: list[Pair] = []
    seen: set[str] = set()
    first = True
    try:
        for blob in blobs:
            for line in blob.data.split(b"\n"):
                if not line.strip():
                    continue
                # The per-user layout is told by its first record naming a user (prbj.data.per_user).
                if first and b'"user_id"' in line:
                    return None
                first = False
                pair = _pair(decode(line))
                if pair is None or pair.id in seen:
                    return None
                seen.add(pair.id)
                pairs.append(pair)
    except msgspec.MsgspecError:
        return None
    return pairs
