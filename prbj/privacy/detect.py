"""Finding personal entities in text with Presidio's analyzer, loaded only when a run pseudonymizes.

Two kinds of recognizer find them:
- Pattern recognizers (regular expressions, checksums, context words) need no model and always run: emails,
  phone numbers, URLs, IP addresses, credit-card numbers, IBANs, US bank-account and social-security numbers,
  crypto wallets (PATTERN_ENTITIES).
- Names and places (PERSON, LOCATION) need a named-entity model: a spaCy pipeline, used when one is installed
  (the first of DEFAULT_NER_MODELS found) or named with --ner-model (a package name or a folder). prbj never
  downloads one. Without a model names and places are left as they are; the run says so (`ner: none` in
  run.json, a note on the terminal).

Presidio's own engine downloads en_core_web_lg when it finds no model; here the spaCy pipeline is loaded by
prbj (a blank English tokenizer when there is no model) and handed to it, so nothing is fetched. Its email
recognizer checks top-level domains with tldextract, which fetches the public suffix list on first use: the
list bundled with tldextract is used instead (TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS set empty for this process
unless the user set it), so pseudonymizing makes no network request.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prbj.errors import ConfigError
from prbj.extras import PRIVACY

# What the pattern recognizers find, with no model (Presidio's entity names).
PATTERN_ENTITIES: tuple[str, ...] = (
    "EMAIL_ADDRESS",
    "PHONE_NUMBER",
    "URL",
    "IP_ADDRESS",
    "CREDIT_CARD",
    "IBAN_CODE",
    "US_BANK_NUMBER",
    "US_SSN",
    "CRYPTO",
)
# What a named-entity model adds. Nationality, religion and politics (Presidio's NRP) and dates are left alone:
# they are what a personalized judge needs to read, not who the person is.
NER_ENTITIES: tuple[str, ...] = ("PERSON", "LOCATION")
# spaCy's English pipelines, best first; the first installed one finds names and places.
DEFAULT_NER_MODELS: tuple[str, ...] = (
    "en_core_web_lg",
    "en_core_web_trf",
    "en_core_web_md",
    "en_core_web_sm",
)
# Presidio's scores run 0-1; below this a match is too weak to act on (a bare 8-17 digit number scores 0.05 as
# a bank account, 0.4 once a context word such as "account" stands near it).
SCORE_THRESHOLD = 0.3
LANGUAGE = "en"


@dataclass(frozen=True, slots=True)
class Found:
    kind: str
    start: int
    end: int
    score: float


class Detector:
    """Presidio's AnalyzerEngine over the pattern recognizers, and over a spaCy NER model when there is one."""

    def __init__(self, ner_model: str | None = None) -> None:
        os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")
        # Presidio logs a warning per recognizer of another language it skips: noise on the user's terminal.
        logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)
        PRIVACY.require("--personal-data pseudonymized")
        import spacy
        from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
        from presidio_analyzer.nlp_engine import SpacyNlpEngine

        nlp, self.ner = _pipeline(spacy, ner_model)
        engine = SpacyNlpEngine(models=[{"lang_code": LANGUAGE, "model_name": self.ner or "blank"}])
        # Handed a loaded pipeline, the engine never loads (or downloads) one of its own.
        engine.nlp = {LANGUAGE: nlp}
        registry = RecognizerRegistry(supported_languages=[LANGUAGE])
        registry.load_predefined_recognizers(nlp_engine=engine, languages=[LANGUAGE])
        self._analyzer: Any = AnalyzerEngine(
            registry=registry, nlp_engine=engine, supported_languages=[LANGUAGE]
        )
        self.entities: tuple[str, ...] = PATTERN_ENTITIES + (NER_ENTITIES if self.ner else ())

    def find(self, text: str) -> list[Found]:
        if not text.strip():
            return []
        results = self._analyzer.analyze(
            text, language=LANGUAGE, entities=list(self.entities), score_threshold=SCORE_THRESHOLD
        )
        return [
            Found(r.entity_type, r.start, _trimmed(text, r.start, r.end), float(r.score)) for r in results
        ]


# Punctuation that ends a sentence or clause rather than an entity: Presidio's URL pattern takes the full stop
# after "see https://x.org/a." as part of the URL, so "…/a." and "…/a;" would be two entities (two pseudonyms
# for one address) and the sentence would lose its full stop.
TRAILING = ".,;:!?'\""
CLOSING = {")": "(", "]": "[", "}": "{"}


def _trimmed(text: str, start: int, end: int) -> int:
    """The end of the entity at text[start:end] without trailing punctuation or an unmatched closing bracket."""
    while end > start:
        last = text[end - 1]
        opening = CLOSING.get(last)
        span = text[start:end]
        if last in TRAILING or (opening is not None and span.count(opening) < span.count(last)):
            end -= 1
        else:
            break
    return end


def _pipeline(spacy: Any, ner_model: str | None) -> tuple[Any, str | None]:
    """The spaCy pipeline and the name of the NER model in it (None: a blank tokenizer, patterns only)."""
    if ner_model is not None:
        try:
            return spacy.load(ner_model), ner_model
        except (OSError, ValueError) as err:
            raise ConfigError(
                f"--ner-model {ner_model}: not a spaCy pipeline installed here or a folder holding one "
                f"({one_line(err)})"
            ) from None
    for name in DEFAULT_NER_MODELS:
        if spacy.util.is_package(name):
            return spacy.load(name), name
    return _blank(spacy), None


def _blank(spacy: Any) -> Any:
    """A tokenizer only. Presidio's context words (an "account" near a number) are matched against lemmas,
    which a blank pipeline leaves empty: the lower-cased word stands in for its lemma."""
    from spacy.language import Language

    if not Language.has_factory("prbj_lower_lemmas"):
        Language.component("prbj_lower_lemmas", func=_lower_lemmas)
    nlp = spacy.blank(LANGUAGE)
    nlp.add_pipe("prbj_lower_lemmas")
    return nlp


def _lower_lemmas(doc: Any) -> Any:
    for token in doc:
        token.lemma_ = token.lower_
    return doc


def one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text[:200] if text else type(err).__name__


def describe(entities: Sequence[str], ner: str | None) -> str:
    """What a pseudonymizing run replaced, for its terminal note."""
    found = ", ".join(e.lower().replace("_", " ") for e in entities)
    if ner is None:
        return (
            f"pseudonymized: {found}; names and places are NOT (no spaCy NER model installed: "
            f"install one, e.g. en_core_web_lg, or name one with --ner-model)"
        )
    return f"pseudonymized: {found} (names and places by the spaCy model {ner})"
