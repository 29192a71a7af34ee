"""Personal data planted for the privacy tests (issue 42), and the spaCy pipeline that stands in for an NER model.

No spaCy model can be downloaded here. `ner_pipeline` writes a blank English pipeline with an entity ruler whose
patterns are the test's own names, places and employers (PERSON, GPE, ORG), saved to disk: prbj loads it with
spacy.load like any installed model and Presidio reads its entities through the same SpacyRecognizer, so the
whole NER path runs, only the model's knowledge is replaced by a list. Which marker kinds each mechanism covers
is stated in COVERED_BY (docs/privacy.md says the same for real runs).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

# Marker kind → the planted strings. Every one must be absent wherever a pseudonymized run's data may land.
MARKERS: dict[str, tuple[str, ...]] = {
    # Several scripts; "jane doe" and "J. Doe" are variants of one person linked to "Jane Doe".
    "name": (
        "Siobhán Ní Bhriain", "Jane Doe", "jane doe", "J. Doe", "Иван Петров", "王芳", "محمد علي",
        "Αλέξανδρος Παπαδόπουλος",
    ),
    "place": ("Galway", "Kraków", "Nairobi", "Connemara"),
    "employer": ("Acme Robotics", "Globex Corporation", "Initech"),
    "condition": ("type 1 diabetes", "asthma", "epilepsy"),
    "email": ("Siobhan.NiBhriain@Example.ie", "siobhan.nibhriain@example.ie", "ivan.petrov@example.com"),
    # Twelve national formats (GB, US, FR, DE, IN, BR, JP, AU, ES, IT, MX, NL) and one international.
    "phone": (
        "020 7946 0958", "(415) 555-0132", "06 12 34 56 78", "030 12345678", "098765 43210", "(11) 91234-5678",
        "03-1234-5678", "(02) 9876 5432", "612 34 56 78", "06 6982 1234", "55 1234 5678", "020 123 4567",
        "+44 20 7946 0958",
    ),
    "address": ("12 Quay Street", "Hauptstraße 5", "3 rue de la Paix"),
    "handle": ("@siobhan_nb", "u/ivan_petrov", "@wang_fang88"),
    "passport": ("C03005988",),
    "card": ("4111 1111 1111 1111", "5555 5555 5555 4444", "3782 822463 10005"),
    "iban": ("IE29 AIBK 9311 5212 3456 78", "DE89 3704 0044 0532 0130 00", "GB82 WEST 1234 5698 7654 32"),
    "ssn": ("219-09-9999", "536-90-4399"),
    "url": ("https://siobhan-nb.example.ie/blog",),
    "ip": ("203.0.113.42",),
    "date of birth": ("1990-05-12",),
}  # fmt: skip
# What finds each kind in these tests. "patterns": Presidio's and prbj's recognizers, no model (as in a real run);
# "test NER pipeline": the entity ruler below, standing in for a real model, which a real run needs to find them;
# "--pseudonymize-terms": only because the test lists the terms; no recognizer or spaCy model finds a condition.
COVERED_BY = {
    "name": "test NER pipeline",
    "place": "test NER pipeline",
    "employer": "test NER pipeline",
    "condition": "--pseudonymize-terms",
    **{
        kind: "patterns"
        for kind in (
            "email", "phone", "address", "handle", "passport", "card", "iban", "ssn", "url", "ip", "date of birth",
        )
    },
}  # fmt: skip
NER_PATTERNS = {
    "PERSON": (
        "Siobhán Ní Bhriain", "Jane Doe", "J. Doe", "Иван Петров", "王芳", "محمد علي", "Αλέξανδρος Παπαδόπουλος",
    ),
    "GPE": ("Galway", "Kraków", "Nairobi"),
    "LOC": ("Connemara",),
    "ORG": ("Acme Robotics", "Globex Corporation", "Initech"),
}  # fmt: skip
TERMS = "# no recognizer finds these\nCONDITION: type 1 diabetes\nCONDITION: asthma\nCONDITION: epilepsy\n"


def every_marker() -> list[str]:
    return [marker for markers in MARKERS.values() for marker in markers]


@functools.cache
def _pipeline_bytes(patterns: tuple[tuple[str, str], ...]) -> dict[str, bytes]:
    """The files of a saved pipeline (made once per test process: importing spaCy costs seconds)."""
    import tempfile

    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": label, "pattern": text} for label, text in patterns])
    with tempfile.TemporaryDirectory() as folder:
        nlp.to_disk(folder)
        return {str(p.relative_to(folder)): p.read_bytes() for p in Path(folder).rglob("*") if p.is_file()}


def ner_pipeline(folder: Path, patterns: dict[str, tuple[str, ...]] | None = None) -> Path:
    """A spaCy pipeline in `folder` whose entity ruler finds `patterns` (label → texts; default NER_PATTERNS)."""
    chosen = patterns if patterns is not None else NER_PATTERNS
    flat = tuple((label, text) for label, texts in chosen.items() for text in texts)
    for name, data in _pipeline_bytes(flat).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def terms_file(folder: Path) -> Path:
    path = folder / "terms.txt"
    path.write_text(TERMS)
    return path


def _history(user: str, n: int, prompt: str, chosen: str, rejected: str, **more: Any) -> dict[str, Any]:
    return {"user_id": user, "id": f"{user}-h{n}", "prompt": prompt, "chosen": chosen, "rejected": rejected,
            "split": "train", **more}  # fmt: skip


def _judged(user: str, n: int, opening: str, question: str, chosen: str, rejected: str) -> dict[str, Any]:
    return {
        "user_id": user,
        "id": f"{user}-t{n}",
        "context": [
            {"role": "user", "content": opening},
            {"role": "assistant", "content": "Tell me more."},
            {"role": "user", "content": question},
        ],
        "chosen": chosen,
        "rejected": rejected,
        "split": "test",
        "groups": {"region": "west" if user != "ivan" else "east"},
    }


def leak_records() -> list[dict[str, Any]]:
    """Three users in the per-user layout with every marker planted in every kind of text a judge may be shown:
    earlier choices (prompt and both answers), persona, stated facts, and the judged conversations and answers."""
    siobhan = "siobhan"
    ivan = "ivan"
    wang = "wang"
    return [
        _history(
            siobhan, 1, "Ask Jane Doe whether Galway has a good climbing wall? Mail Siobhan.NiBhriain@Example.ie.",
            "Sure, jane doe climbs at the wall near 12 Quay Street; ring 020 7946 0958.",
            "J. Doe would know; call +44 20 7946 0958 or (415) 555-0132.",
            persona="Siobhán Ní Bhriain, an engineer at Acme Robotics in Galway, lives with type 1 diabetes.",
            facts={"contact": "siobhan.nibhriain@example.ie", "born": "1990-05-12"},
        ),
        _history(
            siobhan, 2, "Is my card 4111 1111 1111 1111 safe to use abroad with IBAN IE29 AIBK 9311 5212 3456 78?",
            "Follow @siobhan_nb on instagram for the trip to Connemara; my blog is https://siobhan-nb.example.ie/blog.",
            "Your passport C03005988 and SSN 219-09-9999 are needed; my server is 203.0.113.42.",
        ),
        _judged(
            siobhan, 1, "I'm Siobhán Ní Bhriain from Galway, reach me on 06 12 34 56 78.",
            "Which insulin pen suits type 1 diabetes when travelling with Jane Doe?",
            "For type 1 diabetes, ask Jane Doe to carry a spare pen; text 020 7946 0958 if lost.",
            "Any pen works; call (415) 555-0132 or mail Siobhan.NiBhriain@Example.ie.",
        ),
        _judged(
            siobhan, 2, "My employer Acme Robotics pays for travel.",
            "Can I claim it on card 4111 1111 1111 1111?",
            "Yes, and keep IBAN IE29 AIBK 9311 5212 3456 78 for the refund to Siobhán Ní Bhriain.",
            "No; J. Doe at 12 Quay Street says so.",
        ),
        _history(
            ivan, 1, "Иван Петров here, at Globex Corporation in Kraków. Is Hauptstraße 5 far from the office?",
            "Ten minutes; call 030 12345678 or 098765 43210.",
            "Far; write to ivan.petrov@example.com or ring (11) 91234-5678.",
            persona="Иван Петров, an analyst at Globex Corporation, manages asthma.",
            facts={"reddit": "u/ivan_petrov"},
        ),
        _judged(
            ivan, 1, "Иван Петров again; my mobile is 03-1234-5678.",
            "Which inhaler for asthma should I pack for Kraków?",
            "For asthma in Kraków, pack your usual inhaler; card 5555 5555 5555 4444 covers a spare.",
            "Ask u/ivan_petrov's doctor; IBAN DE89 3704 0044 0532 0130 00 pays, SSN 536-90-4399.",
        ),
        _judged(
            ivan, 2, "Globex Corporation moved me to Hauptstraße 5.",
            "Is 030 12345678 still my number there?",
            "Yes, 030 12345678 moves with Иван Петров.",
            "No, use 098765 43210 at Globex Corporation.",
        ),
        _history(
            wang, 1, "My friends 王芳 and محمد علي want to visit Nairobi; call (02) 9876 5432.",
            "Αλέξανδρος Παπαδόπουλος knows Nairobi; ring 612 34 56 78 or 06 6982 1234.",
            "Stay at 3 rue de la Paix; phone 55 1234 5678.",
            persona="Works at Initech, has epilepsy, posts as @wang_fang88.",
            facts={"office": "020 123 4567"},
        ),
        _judged(
            wang, 1, "王芳 here, from Initech.",
            "Is Nairobi safe with epilepsy? Ask محمد علي.",
            "Yes; Αλέξανδρος Παπαδόπουλος went with epilepsy, card 3782 822463 10005 worked.",
            "Stay home at 3 rue de la Paix; IBAN GB82 WEST 1234 5698 7654 32.",
        ),
        _judged(
            wang, 2, "Call me on (02) 9876 5432.",
            "Should 王芳 take 612 34 56 78 abroad?",
            "Yes, keep 612 34 56 78 and 55 1234 5678.",
            "No, @wang_fang88 should switch to 020 123 4567.",
        ),
    ]  # fmt: skip
