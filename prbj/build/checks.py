"""The quality checks of a built pair: read the check judge's ratings, then keep or drop the pair with a reason.

A pair enters the benchmark only when both answers are of high general quality (factuality, relevance,
helpfulness) and the chosen answer fits the user's aspects clearly better than the rejected one. Everything that
can be decided without a model (empty, identical or over-long answers) is decided first, so no check is paid for
a pair that would be dropped anyway.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from prbj.data.annotation import DIMENSIONS
from prbj.judges.verdict import final_part

CHECK_PARSER_VERSION = "1"
QUALITY_DIMENSIONS: tuple[str, ...] = ("factuality", "relevance", "helpfulness")
# How the check model is named beside the human annotators in agreement tables.
CHECK_JUDGE = "check model"
__all__ = ["DIMENSIONS"]
SCALE = (1, 5)

# Judges rename keys ("Factual accuracy", "personal_adherence"); a stem identifies the dimension.
_KEY_STEMS = (
    ("fact", "factuality"),
    ("relev", "relevance"),
    ("help", "helpfulness"),
    ("adher", "adherence"),
    ("personal", "adherence"),
    ("aspect", "adherence"),
)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_LINE_SCORE = re.compile(r"\b([A-Za-z][A-Za-z _-]*?)\"?\s*[:=]\s*\**\s*\"?(\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class CheckScores:
    factuality: float
    relevance: float
    helpfulness: float
    adherence: float

    def as_dict(self) -> dict[str, float]:
        return {d: getattr(self, d) for d in DIMENSIONS}

    def lowest_quality(self) -> float:
        return min(getattr(self, d) for d in QUALITY_DIMENSIONS)


def _dimension(key: str) -> str | None:
    flat = re.sub(r"[^a-z]", "", key.lower())
    for stem, dimension in _KEY_STEMS:
        if flat.startswith(stem) or (stem in flat and dimension == "adherence"):
            return dimension
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, dict):  # {"score": 4, "reason": "..."}
        value = value.get("score", value.get("rating"))
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:/\s*5)?\s*", value)
        return float(match.group(1)) if match else None
    return None


def _from_mapping(data: dict[str, Any]) -> dict[str, float]:
    scores: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, dict) and _dimension(str(key)) is None:
            scores.update(_from_mapping(value))  # {"scores": {...}} or {"chosen": {...}}
            continue
        dimension = _dimension(str(key))
        number = _number(value)
        if dimension is not None and number is not None:
            scores.setdefault(dimension, number)
    return scores


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object in the text that parses, in order of appearance."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    index = text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        index = text.find("{", end)
    return found


def parse_check(reply: str | None) -> CheckScores | None:
    """The four ratings from a check reply, or None when they cannot all be read on the 1-5 scale.

    Tried in order: JSON objects inside code fences, JSON objects anywhere in the final answer (the last complete
    one wins), then `name: N` lines. A rating outside 1-5 or a missing dimension makes the reply unreadable:
    guessing would let a broken check keep or drop a pair silently."""
    if not reply:
        return None
    text = final_part(reply)
    candidates: list[dict[str, float]] = []
    for block in [*_FENCE.findall(text), text]:
        candidates.extend(_from_mapping(obj) for obj in _json_objects(block))
    complete = [c for c in candidates if set(DIMENSIONS) <= set(c)]
    if complete:
        scores = complete[-1]
    else:
        scores = {}
        for match in _LINE_SCORE.finditer(text):
            dimension = _dimension(match.group(1))
            if dimension is not None:
                scores[dimension] = float(match.group(2))
        if not set(DIMENSIONS) <= set(scores):
            return None
    if any(not SCALE[0] <= scores[d] <= SCALE[1] for d in DIMENSIONS):
        return None
    return CheckScores(**{d: scores[d] for d in DIMENSIONS})


def word_count(text: str) -> int:
    return len(text.split())


def same_answer(a: str, b: str) -> bool:
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


@dataclass(frozen=True)
class Thresholds:
    max_words: int = 100
    min_quality: float = 4
    min_gap: float = 2


def answer_problems(chosen: str, rejected: str, thresholds: Thresholds) -> list[str]:
    """Reasons to drop a pair that need no model: empty, identical or over-long answers."""
    reasons = []
    if not chosen.strip():
        reasons.append("empty_chosen")
    if not rejected.strip():
        reasons.append("empty_rejected")
    if chosen.strip() and rejected.strip() and same_answer(chosen, rejected):
        reasons.append("identical_answers")
    if word_count(chosen) > thresholds.max_words:
        reasons.append("chosen_too_long")
    if word_count(rejected) > thresholds.max_words:
        reasons.append("rejected_too_long")
    return reasons


def check_problems(chosen: CheckScores, rejected: CheckScores, thresholds: Thresholds) -> list[str]:
    """Reasons the checks give to drop a pair; empty when it is kept."""
    reasons = []
    if chosen.lowest_quality() < thresholds.min_quality:
        reasons.append("low_quality_chosen")
    if rejected.lowest_quality() < thresholds.min_quality:
        reasons.append("low_quality_rejected")
    if chosen.adherence - rejected.adherence < thresholds.min_gap:
        reasons.append("small_adherence_gap")
    return reasons
