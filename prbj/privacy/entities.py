"""One entity, one pseudonym: the spellings of one user's entity that name the same thing, linked.

A user writes their email as `Ana.Lima@Example.org` in one post and `ana.lima@example.org` in another, their
phone as `+44 20 7946 0958` and `020 7946 0958`, their site with and without `https://www.`, a friend as
"Jane Doe", "jane doe" and "J. Doe". Each is one entity, and gets one placeholder:

- emails: compared case-folded;
- phone numbers: by their E.164 spellings (prbj.privacy.recognizers.phone_readings: a national number valid in
  several regions has several, and is the same number as an international one sharing any of them);
- URLs: scheme, `www.`, a trailing slash and the host's case aside;
- identifiers (cards, IBANs, passports, ...): spaces, dots and hyphens aside, case-folded;
- names, places, organizations: case and punctuation aside; and a person's variants: an initial for the first
  name ("J. Doe" is "Jane Doe" when no other Doe of that user starts with J), and a lone first or last name
  ("Jane", "Doe") is the one full name of that user it belongs to, when it belongs to exactly one.

Linking is per user and never across kinds. Pure: no Presidio (phonenumbers only for phone numbers).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

# The placeholder's stem per Presidio entity type: short words a judge reads as "some email", "some person".
# Other kinds are named as Presidio names them (US_PASSPORT_1, UK_NHS_1).
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
    "ORGANIZATION": "ORGANIZATION",
    "DATE_TIME": "DATE",
    "STREET_ADDRESS": "ADDRESS",
    "HANDLE": "HANDLE",
}
NAME_KINDS = frozenset({"PERSON", "LOCATION", "ORGANIZATION", "NRP"})
_PUNCTUATION = re.compile(r"[^\w\s]", re.UNICODE)
_SEPARATORS = re.compile(r"[\s.\-]+")


def parse_kinds(value: str) -> tuple[str, ...]:
    """Entity kinds as --keep-entities names them ("NRP,date_time", or `none`): upper-cased; `none` is ()."""
    kinds = [kind.strip().upper() for kind in value.split(",") if kind.strip()]
    return () if kinds == ["NONE"] else tuple(kinds)


def label(kind: str) -> str:
    return LABELS.get(kind, kind)


def identity_keys(kind: str, text: str) -> tuple[str, ...]:
    """What `text` of `kind` is the same entity as: another spelling sharing any key is."""
    if kind == "PHONE_NUMBER":
        from prbj.privacy.phones import e164_spellings

        spellings = e164_spellings(text)
        return spellings or (_SEPARATORS.sub("", text),)
    if kind == "EMAIL_ADDRESS":
        return (text.strip().casefold(),)
    if kind == "URL":
        return (normalized_url(text),)
    if kind in NAME_KINDS or kind == "STREET_ADDRESS":
        return (name_key(text),)
    return (_SEPARATORS.sub("", text).casefold(),)


def normalized_url(text: str) -> str:
    """A URL without its scheme, `www.`, trailing slash or default port, its host case-folded."""
    rest = re.sub(r"^[a-zA-Z][\w+.\-]*://", "", text.strip())
    host, slash, path = rest.partition("/")
    host = host.casefold().removeprefix("www.")
    host = re.sub(r":(?:80|443)$", "", host)
    path = path.rstrip("/")
    return host + (slash + path if path else "")


def name_key(text: str) -> str:
    return " ".join(_PUNCTUATION.sub(" ", text).casefold().split())


@dataclass
class Entity:
    """One entity of one user: its kind, and every spelling met, the first as found."""

    kind: str
    spellings: list[str] = field(default_factory=list)


def link(found: Sequence[tuple[str, str]]) -> list[Entity]:
    """One user's (kind, spelling) in reading order → their entities, in the order first met; every spelling
    once, in the entity it names."""
    entities: list[Entity] = []
    by_key: dict[tuple[str, str], Entity] = {}
    by_spelling: dict[tuple[str, str], Entity] = {}
    for kind, spelling in found:
        if (kind, spelling) in by_spelling:
            continue
        keys = [(label(kind), key) for key in identity_keys(kind, spelling)]
        matches: list[Entity] = []
        for key in keys:
            known = by_key.get(key)
            if known is not None and all(known is not m for m in matches):
                matches.append(known)
        if matches:
            entity = matches[0]
            for other in matches[1:]:  # one spelling joining two entities: they were one all along
                entity.spellings += other.spellings
                entities.remove(other)
                for key, value in list(by_key.items()):
                    if value is other:
                        by_key[key] = entity
                for key, value in list(by_spelling.items()):
                    if value is other:
                        by_spelling[key] = entity
        else:
            entity = Entity(kind)
            entities.append(entity)
        entity.spellings.append(spelling)
        by_spelling[(kind, spelling)] = entity
        for key in keys:
            by_key[key] = entity
    return _persons_linked(entities)


def _persons_linked(entities: list[Entity]) -> list[Entity]:
    """ "J. Doe" and a lone "Jane" or "Doe" joined to the one full name of the user they can belong to."""
    persons = [e for e in entities if e.kind == "PERSON"]
    full = [(e, name_key(e.spellings[0]).split()) for e in persons]
    full = [(e, words) for e, words in full if len(words) >= 2 and len(words[0]) > 1]
    merged: set[int] = set()
    for entity in persons:
        words = name_key(entity.spellings[0]).split()
        if not words or any(entity is e for e, _ in full):
            continue
        if len(words) >= 2 and len(words[0]) == 1:
            candidates = [e for e, w in full if w[0].startswith(words[0]) and w[1:] == words[1:]]
        elif len(words) == 1:
            candidates = [e for e, w in full if words[0] in (w[0], w[-1])]
        else:
            continue
        if len(candidates) == 1:
            candidates[0].spellings += entity.spellings
            merged.add(id(entity))
    return [e for e in entities if id(e) not in merged]
