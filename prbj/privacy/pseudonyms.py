"""Consistent per-user pseudonyms: each personal entity in one user's texts becomes the same placeholder
everywhere that user's texts mention it ("my son Tom" → "my son PERSON_1" in every post), so a judge still
reads "the same person" across posts; another user's PERSON_1 is someone else.

How one user's texts are rewritten:
1. Presidio's analyzer (prbj.privacy.detect) finds entities in each of the user's texts, in a fixed order: the
   profile of every kind as `UserProfile.map_texts` walks it (posts, earlier choices with their prompts and both
   answers, persona, stated facts), then narrative and rubric, then question, answers and conversation turns
   when they are pseudonymized too (`--pseudonymize-answers`).
2. Each distinct entity text gets a placeholder in the order first found, numbered per kind: EMAIL_1, PHONE_1,
   PERSON_1, PERSON_2, ...; the numbering follows from the texts alone, so a rerun sends the same prompts and
   finds its answers in the cache.
3. Presidio's anonymizer replaces every whole-word occurrence of those entity texts in all of the user's
   texts (not only where the analyzer fired: an email its context scoring missed in one post is replaced
   there too), overlaps resolved by its conflict rules.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, partial
from typing import Any, Protocol, Self, TypeVar

from prbj.data.schema import RubricAspect, UserProfile
from prbj.privacy.detect import Detector

# The placeholder's stem per Presidio entity type: short words a judge reads as "some email", "some person".
LABELS = {
    "EMAIL_ADDRESS": "EMAIL",
    "PHONE_NUMBER": "PHONE",
    "URL": "URL",
    "IP_ADDRESS": "IP",
    "CREDIT_CARD": "CARD",
    "IBAN_CODE": "IBAN",
    "US_BANK_NUMBER": "ACCOUNT",
    "US_SSN": "SSN",
    "CRYPTO": "WALLET",
    "PERSON": "PERSON",
    "LOCATION": "LOCATION",
}


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


@dataclass(frozen=True, slots=True)
class Entry:
    kind: str
    original: str
    pseudonym: str


@dataclass
class UserTable:
    """One user's pseudonyms, each entity text named once, in the order it was first met."""

    by_original: dict[str, Entry] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)

    def name(self, kind: str, original: str) -> str:
        known = self.by_original.get(original)
        if known is not None:
            return known.pseudonym
        label = LABELS.get(kind, kind)
        self.counts[label] += 1
        entry = Entry(kind, original, f"{label}_{self.counts[label]}")
        self.by_original[original] = entry
        return entry.pseudonym

    def entries(self) -> tuple[Entry, ...]:
        return tuple(self.by_original.values())


def user_key(record: Record) -> str:
    """Whose texts a record holds: a pair's `user_id` (on Personalized RewardBench each pair is its own user); a
    record to build pairs from is its own user."""
    user = getattr(record, "user_id", None)
    return str(user) if user else record.id


class Pseudonymizer:
    """Rewrites pairs user by user; `answers` pseudonymizes questions and answers too."""

    def __init__(self, detector: Detector, *, answers: bool = False) -> None:
        from presidio_anonymizer import AnonymizerEngine

        self.detector = detector
        self.answers = answers
        self._anonymizer: Any = AnonymizerEngine()
        self._found: dict[str, list[tuple[str, str]]] = {}

    def records(self, pairs: Sequence[R]) -> tuple[list[R], dict[str, tuple[Entry, ...]]]:
        """The records rewritten, in their order, and each user's table."""
        by_user: dict[str, list[R]] = {}
        for pair in pairs:
            by_user.setdefault(user_key(pair), []).append(pair)
        tables: dict[str, UserTable] = {}
        rewritten: dict[str, R] = {}
        for user, own in by_user.items():
            table = tables[user] = UserTable()
            for text in (text for pair in own for text in self._texts(pair)):
                for kind, original in self._entities(text):
                    table.name(kind, original)
            # A user's earlier choices come back in each of their pairs' histories: each text is rewritten once.
            named = cache(partial(self.text, table))
            for pair in own:
                rewritten[pair.id] = rewrite(pair, named, answers=self.answers)
        return [rewritten[p.id] for p in pairs], {user: t.entries() for user, t in tables.items() if t.counts}

    def text(self, table: UserTable, text: str) -> str:
        """`text` with every whole-word occurrence of the table's entity texts replaced by its placeholder."""
        from presidio_anonymizer.entities import OperatorConfig, RecognizerResult

        spans = [
            RecognizerResult(entry.kind, match.start(), match.end(), 1.0)
            for entry in table.entries()
            for match in _whole_word(entry.original).finditer(text)
        ]
        if not spans:
            return text
        operators = {
            kind: OperatorConfig("custom", {"lambda": partial(table.name, kind)})
            for kind in {span.entity_type for span in spans}
        }
        # Adjacent names stay apart ("Tom Ana" is two people), as the table knows them.
        result = self._anonymizer.anonymize(
            text, spans, operators=operators, merge_entities_with_spaces=False
        )
        return str(result.text)

    def _entities(self, text: str) -> list[tuple[str, str]]:
        """(kind, text) of the entities in `text`, in reading order; a text met before is not analysed again."""
        found = self._found.get(text)
        if found is None:
            found = self._found[text] = []
            end = -1
            for hit in sorted(self.detector.find(text), key=lambda f: (f.start, -(f.end - f.start))):
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

    def _texts(self, record: Record) -> list[str]:
        """The texts of a record that are pseudonymized, in the order their entities are numbered."""
        texts: list[str] = []

        def collect(text: str) -> str:
            texts.append(text)
            return text

        rewrite(record, collect, answers=self.answers)
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
    # Both kinds of record are frozen dataclasses.
    rewritten: R = replace(changed, **changes)  # type: ignore[type-var]
    return rewritten


_WORD = re.compile(r"\w")


def _stands_alone(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] is whole, as _whole_word matches: no word character right before or after it."""
    return not ((start > 0 and _WORD.match(text[start - 1])) or (end < len(text) and _WORD.match(text[end])))


def _whole_word(original: str) -> re.Pattern[str]:
    """`original` where it stands as a whole: not inside a longer word ("Tom" never matches in "Tomato")."""
    return re.compile(rf"(?<!\w){re.escape(original)}(?!\w)")
