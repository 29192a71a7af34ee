"""Phone numbers of every region python-phonenumbers knows, found and read without Presidio (prbj.privacy.
recognizers wraps them as a Presidio recognizer; prbj.privacy.entities links a user's spellings of one number).

Presidio's own phone recognizer checks eight regions by default and runs one matcher per region over the whole
text: 245 regions would cost a third of a second per text. Here a phone-shaped run of digit groups is found once
and read per region: a number written internationally (`+44 …`, `0044 …`) is taken when valid; a national one
when it is valid in a region and grouped as that region writes its numbers (`020 7946 0958`, `06 12 34 56 78`,
`(11) 91234-5678`), or, grouped otherwise, only with a context word near it ("phone", "call": Presidio's context
enhancer raises its score). A date, a year range or a price is no phone. Each number's E.164 spellings (one per
region it is valid in) say which spellings are one number.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import phonenumbers

# Scores on Presidio's 0-1 scale (prbj.privacy.detect.SCORE_THRESHOLD decides): a valid international number, a
# valid national one grouped as its region writes it, and a valid one grouped otherwise (taken only with a
# context word, which Presidio's context enhancer adds 0.35 for).
INTERNATIONAL_SCORE = 0.75
GROUPED_SCORE = 0.55
UNGROUPED_SCORE = 0.1
PHONE_CONTEXT = [
    "phone", "telephone", "tel", "mobile", "cell", "call", "ring", "text", "sms", "whatsapp", "signal", "fax",
    "reach",
]  # fmt: skip

# Digit groups joined by single separators (or none after a closing parenthesis: "(02)9876 5432"), after an
# optional international prefix; not glued to a word, a sign or another number. The first group may be long: a
# number written without separators ("+14155550132").
CANDIDATE = re.compile(
    r"(?<![\w+.\-/])(?:\+ ?|00 ?)?\(?\d{1,15}\)?(?:(?:[ \u00a0.\-]|(?<=\)))\(?\d{1,10}\)?){0,7}(?!\w)"
)
_DIGIT_GROUP = re.compile(r"\d+")
_DATE = re.compile(r"\d{1,4}([./\-])\d{1,2}\1\d{1,4}")
_YEAR = re.compile(r"(?:1[89]|20)\d\d")
_MIN_DIGITS, _MAX_DIGITS = 7, 15


@lru_cache(maxsize=1)
def _region_patterns() -> tuple[tuple[str, re.Pattern[str], re.Pattern[str] | None], ...]:
    """Per region phonenumbers has metadata for, in a fixed order (the E.164 spellings follow it): the pattern
    every national number of the region matches, and its national (trunk) prefix. A cheap first look: a full
    parse per region costs ~0.4 ms, and python's cache of compiled patterns is too small for all of them."""
    from phonenumbers import PhoneMetadata

    out = []
    for region in sorted(phonenumbers.SUPPORTED_REGIONS):
        metadata = PhoneMetadata.metadata_for_region(region)
        if metadata is None or metadata.general_desc is None:
            continue
        prefix = metadata.national_prefix_for_parsing or metadata.national_prefix
        out.append(
            (
                region,
                re.compile(metadata.general_desc.national_number_pattern or r"\d+"),
                re.compile(prefix) if prefix else None,
            )
        )
    return tuple(out)


def _plausible_regions(digits: str) -> list[str]:
    """The regions whose national numbers `digits` may be (with or without its trunk prefix)."""
    out = []
    for region, pattern, prefix in _region_patterns():
        if pattern.fullmatch(digits):
            out.append(region)
            continue
        cut = prefix.match(digits) if prefix is not None else None
        if cut is not None and cut.end() > 0 and pattern.fullmatch(digits[cut.end() :]):
            out.append(region)
    return out


def _groups(text: str) -> tuple[int, ...]:
    return tuple(len(g) for g in _DIGIT_GROUP.findall(text))


@lru_cache(maxsize=65536)
def phone_readings(text: str) -> tuple[float, tuple[str, ...]]:
    """(score, E.164 spellings) of `text` read as a phone number: 0 and () when it is none. International
    numbers have one spelling; a national one has one per region it is valid in (grouped as written there
    when any region groups it so)."""
    digits = "".join(_DIGIT_GROUP.findall(text))
    if not _MIN_DIGITS <= len(digits) <= _MAX_DIGITS or _looks_like_no_phone(text):
        return 0.0, ()
    stripped = text.strip()
    if stripped.startswith(("+", "00")):
        spelled = "+" + stripped[2:] if stripped.startswith("00") else stripped
        number = _parse(spelled, None)
        if number is None or not phonenumbers.is_valid_number(number):
            return 0.0, ()
        return INTERNATIONAL_SCORE, (phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164),)
    written = _groups(stripped)
    grouped: list[str] = []
    valid: list[str] = []
    for region in _plausible_regions(digits):
        number = _parse(stripped, region)
        if number is None or not phonenumbers.is_valid_number(number):
            continue
        e164 = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
        valid.append(e164)
        national = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL)
        if len(written) > 1 and _groups(national) == written:
            grouped.append(e164)
    if grouped:
        return GROUPED_SCORE, tuple(dict.fromkeys(grouped))
    if valid:
        return UNGROUPED_SCORE, tuple(dict.fromkeys(valid))
    return 0.0, ()


def _parse(text: str, region: str | None) -> Any:
    try:
        return phonenumbers.parse(text, region)
    except phonenumbers.NumberParseException:
        return None


def _looks_like_no_phone(text: str) -> bool:
    """A date (12/05/1990, 1990-05-12), a year range (2019-2020) or a number with a decimal part."""
    stripped = text.strip()
    if _DATE.fullmatch(stripped):
        return True
    groups = _DIGIT_GROUP.findall(stripped)
    if groups and all(_YEAR.fullmatch(g) for g in groups):
        return True
    return bool(re.fullmatch(r"\d{1,3}(?:[.,]\d{3})+(?:[.,]\d{1,2})?", stripped))


def best_reading(text: str, start: int, end: int) -> tuple[int, int, float]:
    """The longest run of whole digit groups within text[start:end] that reads as a phone number: the
    candidate pattern may take a neighbouring number along ("call 020 7946 0958 2 times")."""
    bounds = [(m.start() + start, m.end() + start) for m in _DIGIT_GROUP.finditer(text[start:end])]
    for size in range(len(bounds), 0, -1):
        for first in range(len(bounds) - size + 1):
            left = start if first == 0 else bounds[first][0]
            right = bounds[first + size - 1][1]
            # A closing parenthesis right after the last group belongs to it: "(02)".
            if right < end and text[right] == ")":
                right += 1
            if left > start and text[left - 1] == "(":
                left -= 1
            score, _ = phone_readings(text[left:right])
            if score > 0:
                return left, right, score
    return start, end, 0.0


def e164_spellings(text: str) -> tuple[str, ...]:
    """The E.164 spellings of a phone number as written (none when it reads as no number)."""
    return phone_readings(text)[1]
