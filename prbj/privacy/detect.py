"""Finding personal entities in text with Presidio's analyzer, built only when a run pseudonymizes and its
pseudonym table is not already in the private store.

What is looked for (docs/privacy.md lists it for readers):
- Every pattern recognizer Presidio ships (regular expressions, checksums, context words), each run for English:
  emails, URLs, IP and MAC addresses, credit cards, IBANs, crypto wallets, US bank accounts, SSNs, ITINs,
  passports and driver licences, UK passports, driving licences, NHS and National Insurance numbers, postcodes,
  the identity, passport and tax numbers of India, Australia, Canada, Singapore, South Africa, Nigeria, the
  Philippines, Spain, Italy, Germany, Poland, Finland, Sweden, Korea..., dates (DATE_TIME: written dates, such
  as a date of birth), UUIDs, medical licences; less the few that fire on ordinary prose (NOISY: German and
  Turkish licence plates and Nigerian vehicle registrations took "is a 16" and "30 to 45" for plates on the
  bundled samples).
- prbj's own (prbj.privacy.recognizers): phone numbers of every region phonenumbers knows, street addresses,
  social-media handles.
- Names, places and organizations (PERSON, LOCATION, ORGANIZATION) from a spaCy NER pipeline
  (prbj.privacy.ner: the run refuses to start without one unless `--ner-model none`). spaCy's date and time
  labels are not used ("last spring" is no identifier; written dates are found by the patterns), nor
  nationality, religion and politics (NRP) by default: `--keep-entities` names what stays.

Presidio's own engine downloads en_core_web_lg when it finds no model; here the spaCy pipeline is loaded by
prbj and handed to it, so nothing is fetched. Importing Presidio imports transformers (and spaCy imports torch)
for engines prbj does not use, five to ten seconds: both are hidden from the import unless a transformer
pipeline needs them. Presidio's email recognizer checks top-level domains with tldextract, which fetches the
public suffix list on first use: TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS is set empty for this process (unless the
user set it), so the list bundled with tldextract is used and pseudonymizing makes no network request.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from prbj.errors import ConfigError, one_line
from prbj.extras import PRIVACY
from prbj.privacy.ner import NerModel

# Entity kinds (Presidio's names) a name-finding model adds.
NER_ENTITIES: tuple[str, ...] = ("PERSON", "LOCATION", "ORGANIZATION")
# spaCy label → Presidio entity; what is not here is not used (DATE, TIME, CARDINAL, ...). FAC (buildings,
# airports, bridges) and LOC are places too.
NER_LABELS = {
    "PERSON": "PERSON",
    "PER": "PERSON",
    "GPE": "LOCATION",
    "LOC": "LOCATION",
    "LOCATION": "LOCATION",
    "FAC": "LOCATION",
    "ORG": "ORGANIZATION",
    "NORP": "NRP",
}
# Left as they are unless named otherwise (--keep-entities): nationality, religion and politics are what a
# personalized judge needs to read, not who the person is.
DEFAULT_KEPT: tuple[str, ...] = ("NRP",)
# Presidio's pattern recognizers left out: they took ordinary prose for identifiers on the bundled samples.
NOISY = frozenset({"DeKfzRecognizer", "TrLicensePlateRecognizer", "NgVehicleRegistrationRecognizer"})
# Presidio's scores run 0-1; a match must reach this to count. A bare 8-17 digit number scores 0.05 as a bank
# account and 0.4 once a context word ("account") stands near it; a lone "N4" scores 0.3 as a US driver licence.
SCORE_THRESHOLD = 0.35
LANGUAGE = "en"
# Bumped when what is detected changes, so that a pseudonym table made by older rules is not reused.
DETECTION_VERSION = 2
TLDEXTRACT_URLS = "TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS"
# Imported by Presidio and spaCy for engines prbj does not use (transformer NER, GPU detection).
_UNUSED_HEAVY = ("transformers", "torch")


@dataclass(frozen=True, slots=True)
class Found:
    kind: str
    start: int
    end: int
    score: float


class Detector:
    """Presidio's AnalyzerEngine over its pattern recognizers and prbj's, and over a spaCy NER pipeline when
    the run has one (`ner` None: patterns only). `kept`: entity kinds left as they are; `terms`: (kind, term)
    of the user's own list (prbj.privacy.terms)."""

    def __init__(
        self,
        ner: NerModel | None = None,
        kept: Sequence[str] = DEFAULT_KEPT,
        terms: Sequence[tuple[str, str]] = (),
    ) -> None:
        _offline_public_suffixes()
        # Presidio logs a warning per recognizer of another language it skips: noise on the user's terminal.
        logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)
        PRIVACY.require("--personal-data pseudonymized")
        with _without(_UNUSED_HEAVY if ner is None or not ner.needs_torch else ()):
            import spacy
            from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
            from presidio_analyzer.nlp_engine import NerModelConfiguration, SpacyNlpEngine
            from presidio_analyzer.predefined_recognizers import SpacyRecognizer

            from prbj.privacy.recognizers import (
                AllRegionsPhoneRecognizer,
                pattern_recognizers,
                term_recognizers,
            )
        self.ner = ner.name if ner is not None else None
        nlp = _load(spacy, ner) if ner is not None else _blank(spacy)
        configuration = NerModelConfiguration(
            model_to_presidio_entity_mapping=NER_LABELS,
            labels_to_ignore=[],
            low_score_entity_names=[],
        )
        engine = SpacyNlpEngine(
            models=[{"lang_code": LANGUAGE, "model_name": self.ner or "blank"}],
            ner_model_configuration=configuration,
        )
        # Handed a loaded pipeline, the engine never loads (or downloads) one of its own.
        engine.nlp = {LANGUAGE: nlp}
        recognizers = [
            *_presidio_recognizers(),
            AllRegionsPhoneRecognizer(),
            *pattern_recognizers(),
            *term_recognizers(terms),
        ]
        if ner is not None:
            recognizers.append(
                SpacyRecognizer(supported_language=LANGUAGE, supported_entities=list(NER_ENTITIES))
            )
        registry = RecognizerRegistry(recognizers=recognizers, supported_languages=[LANGUAGE])
        self._analyzer: Any = AnalyzerEngine(
            registry=registry, nlp_engine=engine, supported_languages=[LANGUAGE]
        )
        known = sorted({e for r in recognizers for e in r.supported_entities} | set(NER_LABELS.values()))
        unknown = sorted(set(kept) - set(known))
        if unknown:
            from prbj.data.names import did_you_mean

            raise ConfigError(
                f"--keep-entities {unknown[0]}: not an entity kind;{did_you_mean(unknown[0], known)} known: "
                f"{', '.join(known)}"
            )
        found = {e for r in recognizers for e in r.supported_entities}
        self.entities: tuple[str, ...] = tuple(sorted(found - set(kept)))

    def find(self, text: str) -> list[Found]:
        if not text.strip():
            return []
        results = self._analyzer.analyze(
            text, language=LANGUAGE, entities=list(self.entities), score_threshold=SCORE_THRESHOLD
        )
        found = []
        for result in results:
            start, end = result.start, _trimmed(text, result.start, result.end)
            if result.entity_type in NER_ENTITIES:
                start, end = _without_leading_words(text, start, end)
            if end > start:
                found.append(Found(result.entity_type, start, end, float(result.score)))
        return found


def _offline_public_suffixes() -> None:
    """tldextract reads where to fetch the public suffix list from when its extractor is made (at its import):
    no address, so it uses the snapshot it ships. Set for this process unless the user set it; an extractor
    made before (tldextract imported by something else) is told the same, before its first use."""
    if TLDEXTRACT_URLS in os.environ:
        return
    os.environ[TLDEXTRACT_URLS] = ""
    module = sys.modules.get("tldextract.tldextract")
    extractor = getattr(module, "TLD_EXTRACTOR", None)
    if extractor is not None and getattr(extractor, "_extractor", None) is None:
        extractor.suffix_list_urls = ()


@contextmanager
def _without(modules: Sequence[str]) -> Iterator[None]:
    """Imports inside the block see `modules` as not installed (unless already imported): Presidio and spaCy
    then skip the optional engines that import them."""
    hidden = [name for name in modules if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # the import system's "not installed"
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]


def _presidio_recognizers() -> list[Any]:
    """Every pattern recognizer Presidio ships but the NOISY ones, each for English (the country-specific ones
    default to their country's language, and would not run on English text otherwise)."""
    import inspect

    import presidio_analyzer.predefined_recognizers as shipped
    from presidio_analyzer import PatternRecognizer

    out = []
    for name in sorted(dir(shipped)):
        kind = getattr(shipped, name)
        if inspect.isclass(kind) and issubclass(kind, PatternRecognizer) and name not in NOISY:
            factory: Any = kind  # Presidio is untyped: its classes are `object` to mypy
            out.append(factory(supported_language=LANGUAGE))
    return out


# Punctuation that ends a sentence or clause rather than an entity: Presidio's URL pattern takes the full stop
# after "see https://x.org/a." as part of the URL, so "…/a." and "…/a;" would be two entities (two pseudonyms
# for one address) and the sentence would lose its full stop.
TRAILING = ".,;:!?'\" \t\n\u00a0"
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
    if text[start:end].endswith(("'s", "’s")) and end - start > 2:
        end -= 2
    return end


# Words a name-finding model takes into a name it follows ("Ask Jane Doe" as one PERSON, "Visit Galway" as
# one place): verbs of contact, greetings and titles of address. With spaCy's stop words (a, the, my, call,
# please, ...) they are cut from the front of a name, place or organization.
LEADING_WORDS = frozenset(
    """ask asked call called contact contacted dm email emailed mail mailed meet met message messaged miss
    missed ping pinged see saw tell told text texted thank thanks visit visited hi hello hey dear cc invite
    invited follow followed love loved like liked help helped""".split()
)


def _without_leading_words(text: str, start: int, end: int) -> tuple[int, int]:
    """text[start:end] without the leading words (LEADING_WORDS, spaCy's stop words) a model took into a name;
    the last word always stays."""
    from spacy.lang.en.stop_words import STOP_WORDS

    while True:
        head, space, rest = text[start:end].partition(" ")
        if not space or not rest.strip():
            return start, end
        word = head.strip(".,;:!?'\"()").casefold()
        if word not in LEADING_WORDS and word not in STOP_WORDS:
            return start, end
        start += len(head) + len(space)
        while start < end and text[start] == " ":
            start += 1


def _load(spacy: Any, ner: NerModel) -> Any:
    try:
        nlp = spacy.load(ner.name)
    except (OSError, ValueError, ImportError) as err:
        raise ConfigError(
            f"--ner-model {ner.name}: spaCy could not load this pipeline ({one_line(err) or type(err).__name__})"
        ) from None
    if "lemmatizer" not in nlp.pipe_names:
        _add_lower_lemmas(nlp)
    return nlp


def _blank(spacy: Any) -> Any:
    """A tokenizer only. Presidio's context words (an "account" near a number) are matched against lemmas,
    which a blank pipeline leaves empty: the lower-cased word stands in for its lemma."""
    nlp = spacy.blank(LANGUAGE)
    _add_lower_lemmas(nlp)
    return nlp


def _add_lower_lemmas(nlp: Any) -> None:
    from spacy.language import Language

    if not Language.has_factory("prbj_lower_lemmas"):
        Language.component("prbj_lower_lemmas", func=_lower_lemmas)
    nlp.add_pipe("prbj_lower_lemmas")


def _lower_lemmas(doc: Any) -> Any:
    for token in doc:
        token.lemma_ = token.lower_
    return doc


def describe(entities: Sequence[str], ner: str | None) -> str:
    """What a pseudonymizing run replaced, for its terminal note (docs/privacy.md lists every kind)."""
    patterns = [e for e in entities if e not in NER_ENTITIES]
    found = (
        f"{len(patterns)} kinds found by patterns (emails, phone numbers, URLs, street addresses, handles, "
        f"cards, IBANs, passports, licences, national and tax numbers, dates, ...)"
    )
    if ner is None:
        return f"pseudonymized: {found}; names, places and organizations are NOT (--ner-model none)"
    return f"pseudonymized: {found}, and names, places and organizations found by the spaCy pipeline {ner}"
