"""Consistent per-user pseudonyms: each personal entity in one user's texts becomes the same placeholder
everywhere that user's texts mention it ("my son Tom" → "my son PERSON_1" in every post, in the profile and in
the answers alike), so a judge still reads "the same person" across posts; another user's PERSON_1 is someone
else (prbj.context.swap renumbers a donor's placeholders where a control shows one user another's profile).

How one user's texts are rewritten:
1. Presidio's analyzer (prbj.privacy.detect) finds entities in each of the user's texts, in a fixed order: the
   profile of every kind as `UserProfile.map_texts` walks it (posts, earlier choices with their prompts and both
   answers, persona, stated facts), then narrative and rubric, then question, answers and conversation turns
   when they are pseudonymized too (`answers`).
2. The spellings of one entity are linked (prbj.privacy.entities: emails case-folded, phones by E.164, URLs
   normalised, "J. Doe" with "Jane Doe"); each entity gets a placeholder in the order first found, numbered per
   kind: EMAIL_1, PHONE_1, PERSON_1, PERSON_2, ...; the numbering follows from the texts alone, so a rerun sends
   the same prompts and finds its answers in the cache.
3. The user's table (every spelling → its placeholder) rewrites all of the user's texts (`Mapping.apply`: every
   whole-word occurrence of a spelling, not only where the analyzer fired, the longest first). The same
   function rewrites a rerun's texts from the table kept in the private store, with no analysis at all, and
   shows the viewer the pairs as they were sent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from prbj.data.schema import RubricAspect, UserProfile
from prbj.privacy.entities import label, link

if TYPE_CHECKING:
    from prbj.privacy.detect import Detector
    from prbj.privacy.store import Mapping


class Record(Protocol):
    """What holds a user's texts: a benchmark pair (prbj.data.schema.Pair) or a record to build pairs from
    (prbj.data.lamp.LampRecord). Answers (`chosen`, `rejected`) and conversation `turns` where the record has
    them."""

    @property
    def id(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def user_profile(self) -> UserProfile: ...
    def with_user_profile(self, profile: UserProfile) -> Self: ...
    @property
    def narrative(self) -> str: ...
    @property
    def rubric_aspects(self) -> tuple[RubricAspect, ...]: ...


R = TypeVar("R", bound=Record)
# Texts of a record that are the question and answers: pseudonymized only when asked (and the conversation's
# turns, which `question` renders).
QUESTION_AND_ANSWERS = ("question", "chosen", "rejected")
# Of two kinds found on the same span, the one a reader knows best names it (an 11-digit phone number also
# passes the checksum of an Italian VAT code); other kinds by score.
PREFERRED = (
    "EMAIL_ADDRESS",
    "URL",
    "PHONE_NUMBER",
    "CREDIT_CARD",
    "IBAN_CODE",
    "US_SSN",
    "PERSON",
    "LOCATION",
    "ORGANIZATION",
    "STREET_ADDRESS",
)


@dataclass(frozen=True, slots=True)
class Entry:
    kind: str
    original: str
    pseudonym: str


def user_key(record: Record) -> str:
    """Whose texts a record holds: a pair's `user_id` (on Personalized RewardBench each pair is its own user); a
    record to build pairs from is its own user."""
    user = getattr(record, "user_id", None)
    return str(user) if user else record.id


def by_user(records: Sequence[R]) -> dict[str, list[R]]:
    grouped: dict[str, list[R]] = {}
    for record in records:
        grouped.setdefault(user_key(record), []).append(record)
    return grouped


class Pseudonymizer:
    """Builds each user's table from what the detector finds; `answers`: questions and answers too."""

    def __init__(self, detector: Detector, *, answers: bool = False) -> None:
        self.detector = detector
        self.answers = answers
        self._found: dict[str, list[tuple[str, str]]] = {}

    def tables(self, records: Sequence[R]) -> dict[str, tuple[Entry, ...]]:
        """Per user with something to replace: every spelling of every entity, with its placeholder."""
        out: dict[str, tuple[Entry, ...]] = {}
        for user, own in by_user(records).items():
            found = [
                hit
                for record in own
                for text in texts_of(record, self.answers)
                for hit in self._entities(text)
            ]
            entries: list[Entry] = []
            numbers: dict[str, int] = {}
            for entity in link(found):
                stem = label(entity.kind)
                numbers[stem] = numbers.get(stem, 0) + 1
                placeholder = f"{stem}_{numbers[stem]}"
                entries += [Entry(entity.kind, spelling, placeholder) for spelling in entity.spellings]
            if entries:
                out[user] = tuple(entries)
        return out

    def records(self, records: Sequence[R]) -> tuple[list[R], dict[str, tuple[Entry, ...]]]:
        """The records rewritten, in their order, and each user's table."""
        tables = self.tables(records)
        return rewrite_all(records, mappings_of(tables), answers=self.answers), tables

    def _entities(self, text: str) -> list[tuple[str, str]]:
        """(kind, text) of the entities in `text`, in reading order; a text met before is not analysed again."""
        found = self._found.get(text)
        if found is None:
            found = self._found[text] = []
            end = -1
            hits = sorted(
                self.detector.find(text), key=lambda f: (f.start, f.start - f.end, _rank(f.kind), -f.score)
            )
            for hit in hits:
                # A match inside a longer one ("example.com" in an email) is part of it, not an entity of its own.
                if hit.end <= end:
                    continue
                # Part of a longer word is no entity: "items.re" in "items.reverse()" looks like a domain to
                # the URL pattern, and would never be replaced (replacement is by whole words) yet take a number.
                if not _stands_alone(text, hit.start, hit.end):
                    continue
                found.append((hit.kind, text[hit.start : hit.end]))
                end = max(end, hit.end)
        return found


def _rank(kind: str) -> int:
    return PREFERRED.index(kind) if kind in PREFERRED else len(PREFERRED)


def mappings_of(tables: dict[str, tuple[Entry, ...]]) -> dict[str, Mapping]:
    """Each user's table (Pseudonymizer.tables) as the Mapping that rewrites and reveals their texts."""
    from prbj.privacy.store import Mapping

    return {
        user: Mapping(tuple((e.kind, e.original, e.pseudonym) for e in entries))
        for user, entries in tables.items()
    }


def rewrite_all(records: Sequence[R], mappings: dict[str, Mapping], *, answers: bool) -> list[R]:
    """`records` with each user's texts rewritten by that user's mapping (users without one as they are)."""
    rewritten: dict[str, R] = {}
    for user, own in by_user(records).items():
        mapping = mappings.get(user)
        if mapping is None:
            rewritten.update((r.id, r) for r in own)
            continue
        # A user's earlier choices come back in each of their pairs' histories: each text is rewritten once.
        named = cache(mapping.apply)
        rewritten.update((r.id, rewrite(r, named, answers=answers)) for r in own)
    return [rewritten[r.id] for r in records]


def texts_of(record: Record, answers: bool) -> list[str]:
    """The texts of a record that are pseudonymized, in the order their entities are numbered."""
    texts: list[str] = []

    def collect(text: str) -> str:
        texts.append(text)
        return text

    rewrite(record, collect, answers=answers)
    return texts


def rewrite(record: R, transform: Callable[[str], str], *, answers: bool) -> R:
    """`record` with every personal text passed through `transform`, in the order entities are numbered: the
    profile of every kind (through UserProfile.map_texts, the one place that knows its texts), narrative and
    rubric, then (`answers`) question, answers and the conversation's turns. Ids, roles, fact names and groups
    are kept."""
    changed = record.with_user_profile(record.user_profile.map_texts(transform))
    changes: dict[str, Any] = {
        "narrative": transform(record.narrative),
        "rubric_aspects": tuple(
            RubricAspect(transform(a.aspect), transform(a.evidence), transform(a.reason))
            for a in record.rubric_aspects
        ),
    }
    if answers:
        changes |= {
            name: transform(getattr(record, name)) for name in QUESTION_AND_ANSWERS if hasattr(record, name)
        }
        turns = getattr(record, "turns", ())
        if turns:
            changes["turns"] = tuple((role, transform(content)) for role, content in turns)
        # A best-of-k item's other candidates are answers too (prbj.data.schema.Pair.others).
        others = getattr(record, "others", ())
        if others:
            changes["others"] = tuple(transform(text) for text in others)
    # Both kinds of record are frozen dataclasses.
    rewritten: R = replace(changed, **changes)  # type: ignore[type-var]
    return rewritten


_WORD = re.compile(r"\w")


def _stands_alone(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] is whole, as Mapping.apply matches: no word character right before or after."""
    return not ((start > 0 and _WORD.match(text[start - 1])) or (end < len(text) and _WORD.match(text[end])))
