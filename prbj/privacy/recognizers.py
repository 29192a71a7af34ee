"""prbj's own recognizers, beside the ones Presidio ships (prbj.privacy.detect builds the registry):

- Phone numbers of every region python-phonenumbers knows (prbj.privacy.phones finds and reads them).
- Street addresses (`12 Quay Street`, `Hauptstraße 5`, `rue de la Paix 3`) and social-media handles
  (`@ana_lima`, `u/ana_lima`): pattern recognizers, regular expressions with context words.

This module imports Presidio: only prbj.privacy.detect imports it, once it has imported Presidio itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from presidio_analyzer import (
    AnalysisExplanation,
    LocalRecognizer,
    Pattern,
    PatternRecognizer,
    RecognizerResult,
)

from prbj.privacy.phones import CANDIDATE, PHONE_CONTEXT, best_reading

PHONE = "PHONE_NUMBER"
STREET_ADDRESS = "STREET_ADDRESS"
HANDLE = "HANDLE"


class AllRegionsPhoneRecognizer(LocalRecognizer):
    """Phone numbers of every region (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__(
            supported_entities=[PHONE], supported_language="en", name="prbj phones", context=PHONE_CONTEXT
        )

    def load(self) -> None:
        """Nothing to load: phonenumbers' metadata is read on first use."""

    def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> list[Any]:
        if PHONE not in entities:
            return []
        found = []
        for match in CANDIDATE.finditer(text):
            start, end, score = best_reading(text, match.start(), match.end())
            if score > 0:
                found.append(
                    RecognizerResult(
                        PHONE, start, end, score,
                        # Presidio's context enhancer writes the context word it found into the explanation.
                        analysis_explanation=AnalysisExplanation(self.name, score, textual_explanation="phone"),
                        recognition_metadata={
                            RecognizerResult.RECOGNIZER_NAME_KEY: self.name,
                            RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id,
                        },
                    )
                )  # fmt: skip
        return found


# --- street addresses and handles -----------------------------------------------------------------------------

_STREET_WORDS = (
    "Street|St|Road|Rd|Avenue|Ave|Lane|Ln|Boulevard|Blvd|Drive|Dr|Way|Court|Ct|Place|Pl|Terrace|Square|Sq|"
    "Crescent|Close|Parkway|Pkwy|Highway|Hwy|Row|Walk|Quay|Gardens|Grove|Hill|Mews"
)
_CONTINENTAL_SUFFIXES = (
    "straße|strasse|str\\.|weg|gasse|platz|allee|laan|straat|gracht|vej|gade|gatan|vägen|veien"
)
_CONTINENTAL_PREFIXES = (
    "rue|avenue|boulevard|chemin|via|viale|piazza|calle|avenida|paseo|plaza|rua|travessa|ulica"
)
_NAME_WORD = r"[A-ZÀ-ÝÄÖÜ][\w'\-.]*"
_PARTICLES = r"(?:(?:de la|de|del|des|della|di|da|do|dos|das|du|la|le|les|d')\s?)?"
# Matched case-sensitively (Presidio matches patterns in any case unless told): a street's name is capitalized,
# so "5 miles the other way" is no address.
ADDRESS_PATTERNS = (
    # 12 Quay Street, 221B Baker St, 1600 Pennsylvania Avenue NW
    (
        r"\b\d{1,5}[A-Za-z]?,? (?:"
        + _NAME_WORD
        + r"\s){1,4}(?:"
        + _STREET_WORDS
        + r")\b\.?(?: [NSEW]{1,2}\b)?",
        0.6,
    ),
    # Hauptstraße 5, Prinsengracht 263
    (r"\b[A-ZÄÖÜ][\w\-]*(?:" + _CONTINENTAL_SUFFIXES + r") \d{1,4}[a-z]?\b", 0.6),
    # 3 rue de la Paix, 12 Via Roma; Via Roma 12, Calle Mayor 10: a number on one side ("via MTP" is English).
    (
        r"\b\d{1,4},? (?i:"
        + _CONTINENTAL_PREFIXES
        + r") "
        + _PARTICLES
        + _NAME_WORD
        + r"(?: "
        + _NAME_WORD
        + r"){0,3}",
        0.5,
    ),
    (
        r"\b(?i:"
        + _CONTINENTAL_PREFIXES
        + r") "
        + _PARTICLES
        + _NAME_WORD
        + r"(?: "
        + _NAME_WORD
        + r"){0,3},? "
        r"\d{1,4}[a-z]?\b",
        0.5,
    ),
)
# Presidio's default flags less IGNORECASE.
CASE_SENSITIVE = re.DOTALL | re.MULTILINE
ADDRESS_CONTEXT = ["live", "address", "street", "moved", "house", "flat", "apartment", "home", "at"]

# Where a handle may start: after a word and a space (not at a line's start, where Python writes decorators, nor
# after indentation), or an opening bracket or quote; never after a word character (an email's @).
_HANDLE_START = r"(?:(?<=\S[ \t])|(?<=[(\[\"']))@"
_HANDLE_REST = r"[A-Za-z0-9_](?:[A-Za-z0-9_.]{0,28}[A-Za-z0-9_])?\b(?![(\w])"
HANDLE_PATTERNS = (
    # @wang_fang88: a digit or an underscore makes it a user name.
    (_HANDLE_START + r"(?=[A-Za-z0-9_.]*[\d_])" + _HANDLE_REST, 0.4),
    # @ana: taken only with a context word ("follow", "instagram"): "the @property decorator" is Python's.
    (_HANDLE_START + _HANDLE_REST, 0.3),
    # u/ana_lima, /u/ana_lima (Reddit)
    (r"(?<![\w/])/?u/[A-Za-z0-9_\-]{3,20}\b", 0.5),
)
HANDLE_CONTEXT = [
    "instagram", "insta", "twitter", "tiktok", "handle", "follow", "username", "user", "account", "mastodon",
    "telegram", "discord", "github", "reddit", "threads", "dm", "ig",
]  # fmt: skip


def pattern_recognizers() -> list[Any]:
    """Street addresses and handles, as Presidio pattern recognizers."""
    return [
        _patterns(STREET_ADDRESS, "prbj street addresses", "address", ADDRESS_PATTERNS, ADDRESS_CONTEXT),
        _patterns(HANDLE, "prbj handles", "handle", HANDLE_PATTERNS, HANDLE_CONTEXT),
    ]


def _patterns(
    entity: str, name: str, kind: str, patterns: Sequence[tuple[str, float]], context: list[str]
) -> Any:
    return PatternRecognizer(
        supported_entity=entity,
        name=name,
        patterns=[Pattern(f"{kind} {i}", regex, score) for i, (regex, score) in enumerate(patterns)],
        context=context,
        supported_language="en",
        global_regex_flags=CASE_SENSITIVE,
    )


def term_recognizers(terms: Sequence[tuple[str, str]]) -> list[Any]:
    """The user's own terms (--pseudonymize-terms), one deny-list recognizer per kind (any case, whole words)."""
    by_kind: dict[str, list[str]] = {}
    for kind, term in terms:
        by_kind.setdefault(kind, []).append(term)
    return [
        PatternRecognizer(
            supported_entity=kind, name=f"prbj terms {kind}", deny_list=listed, supported_language="en"
        )
        for kind, listed in by_kind.items()
    ]
