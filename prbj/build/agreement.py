"""Read filled annotation sheets back, undo the blind A/B order with the key, and compute the human evaluation
of a build: mean ratings of chosen and rejected answers per dimension, and Cohen's κ between annotators and
between each annotator and the check model."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prbj.build.agreement_report import agreement_markdown
from prbj.build.annotate import ANNOTATION_DIR, KEY_COLUMNS, KEY_FILE, read_build_pairs
from prbj.build.checks import CHECK_JUDGE, DIMENSIONS
from prbj.build.kappa import cohen_kappa
from prbj.build.output import write_json
from prbj.data.annotation import read_csv
from prbj.errors import DataError

SCORES = (1, 2, 3, 4, 5)
PREFERENCE_LABELS = ("chosen", "rejected", "tie")
ANSWERS = ("chosen", "rejected")


@dataclass(frozen=True)
class Rating:
    """One rater's view of one pair, in chosen/rejected terms."""

    pair_id: str
    scores: dict[str, dict[str, float]]  # {"chosen": {dimension: score}, "rejected": {...}}
    preference: str  # chosen | rejected | tie


@dataclass(frozen=True)
class Annotations:
    by_rater: dict[str, dict[str, Rating]]  # rater → pair id → rating
    files: dict[str, str]


def _read_key(out_dir: Path) -> dict[tuple[str, str], tuple[str, str]]:
    path = out_dir / ANNOTATION_DIR / KEY_FILE
    if not path.is_file():
        raise DataError(f"{path}: no key file; write the sheets with `prbj build annotate {out_dir}` first")
    key: dict[tuple[str, str], tuple[str, str]] = {}
    header, rows = read_csv(path)
    missing = [c for c in KEY_COLUMNS if c not in header]
    if missing:
        raise DataError(f"{path}: row 1: field '{missing[0]}': missing column")
    for row_number, row in enumerate(rows, start=2):
        if row["answer_a"] not in ANSWERS:
            raise DataError(f"{path}: row {row_number}: field 'answer_a': expected chosen or rejected")
        key[(row["sheet"], row["item"])] = (row["pair_id"], row["answer_a"])
    return key


def _score(path: Path, row_number: int, field: str, raw: str | None) -> float:
    text = (raw or "").strip()
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not text or value != value or value not in SCORES:
        shown = repr(text) if text else "nothing"
        raise DataError(
            f"{path}: row {row_number}: field '{field}': expected an integer from 1 to 5, got {shown}"
        )
    return value


def _preference(path: Path, row_number: int, raw: str | None, answer_a: str) -> str:
    text = (raw or "").strip().lower()
    if text == "a":
        return answer_a
    if text == "b":
        return "rejected" if answer_a == "chosen" else "chosen"
    if text == "tie":
        return "tie"
    shown = repr((raw or "").strip()) if (raw or "").strip() else "nothing"
    raise DataError(f"{path}: row {row_number}: field 'preference': expected A, B or tie, got {shown}")


def read_sheet(path: Path, key: dict[tuple[str, str], tuple[str, str]]) -> tuple[str, dict[str, Rating]]:
    """One filled sheet → (its sheet id, ratings by pair id). Errors name the file, the spreadsheet row (the
    header is row 1) and the field."""
    header, rows = read_csv(path)
    needed = ["sheet", "item", *(f"{s}_{d}" for s in ("a", "b") for d in DIMENSIONS), "preference"]
    if not rows:
        raise DataError(f"{path}: row 2: no rows (expected a filled annotation sheet)")
    missing = [c for c in needed if c not in header]
    if missing:
        raise DataError(f"{path}: row 1: field '{missing[0]}': missing column")
    sheet: str | None = None
    ratings: dict[str, Rating] = {}
    for row_number, row in enumerate(rows, start=2):
        name = (row.get("sheet") or "").strip()
        item = (row.get("item") or "").strip()
        if sheet is None:
            sheet = name
        elif name != sheet:
            raise DataError(f"{path}: row {row_number}: field 'sheet': {name!r} differs from {sheet!r} above")
        if (name, item) not in key:
            field = "sheet" if all(s != name for s, _ in key) else "item"
            raise DataError(
                f"{path}: row {row_number}: field '{field}': {name} item {item!r} is not in the key"
            )
        pair_id, answer_a = key[(name, item)]
        if pair_id in ratings:
            raise DataError(f"{path}: row {row_number}: field 'item': item {item} appears twice")
        answer_b = "rejected" if answer_a == "chosen" else "chosen"
        scores = {
            answer_a: {d: _score(path, row_number, f"a_{d}", row.get(f"a_{d}")) for d in DIMENSIONS},
            answer_b: {d: _score(path, row_number, f"b_{d}", row.get(f"b_{d}")) for d in DIMENSIONS},
        }
        ratings[pair_id] = Rating(
            pair_id, scores, _preference(path, row_number, row.get("preference"), answer_a)
        )
    expected = sum(1 for s, _ in key if s == sheet)
    if len(ratings) != expected:
        present = {item for (s, item), (pid, _) in key.items() if s == sheet and pid in ratings}
        absent = sorted((item for s, item in key if s == sheet and item not in present), key=int)
        raise DataError(
            f"{path}: row {len(rows) + 2}: field 'item': item {absent[0]} is missing "
            f"({len(ratings)} of {expected} rows)"
        )
    assert sheet is not None
    return sheet, ratings


def read_sheets(out_dir: Path, paths: Sequence[Path]) -> Annotations:
    key = _read_key(out_dir)
    by_rater: dict[str, dict[str, Rating]] = {}
    files: dict[str, str] = {}
    for path in paths:
        sheet, ratings = read_sheet(path, key)
        if sheet in by_rater:
            raise DataError(f"{path}: row 2: field 'sheet': {sheet} was already read from {files[sheet]}")
        by_rater[sheet] = ratings
        files[sheet] = str(path)
    return Annotations(by_rater, files)


def judge_ratings(out_dir: Path, pair_ids: Sequence[str]) -> dict[str, Rating]:
    """The check model's ratings of the same pairs, from provenance.jsonl; its preference follows adherence."""
    _, provenance = read_build_pairs(out_dir)
    ratings: dict[str, Rating] = {}
    for pair_id in pair_ids:
        checks = provenance.get(pair_id, {}).get("checks") or {}
        if not all(answer in checks for answer in ANSWERS):
            continue
        scores = {a: {d: float(checks[a][d]) for d in DIMENSIONS} for a in ANSWERS}
        gap = scores["chosen"]["adherence"] - scores["rejected"]["adherence"]
        preference = "chosen" if gap > 0 else "rejected" if gap < 0 else "tie"
        ratings[pair_id] = Rating(pair_id, scores, preference)
    return ratings


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def means(ratings: Sequence[Rating]) -> dict[str, Any]:
    document: dict[str, Any] = {
        answer: {d: _mean([r.scores[answer][d] for r in ratings]) for d in DIMENSIONS} for answer in ANSWERS
    }
    document["preference"] = {
        label: _mean([1.0 if r.preference == label else 0.0 for r in ratings]) for label in PREFERENCE_LABELS
    }
    document["n"] = len(ratings)
    return document


def kappas(first: dict[str, Rating], second: dict[str, Rating]) -> dict[str, Any]:
    """κ per dimension (quadratic-weighted, over both answers of every shared pair) and for the preference."""
    shared = sorted(set(first) & set(second))
    result: dict[str, Any] = {"n_pairs": len(shared)}
    for dimension in DIMENSIONS:
        a = [first[p].scores[answer][dimension] for p in shared for answer in ANSWERS]
        b = [second[p].scores[answer][dimension] for p in shared for answer in ANSWERS]
        value = cohen_kappa(a, b, categories=[float(s) for s in SCORES], weights="quadratic")
        result[dimension] = None if value is None else round(value, 4)
    value = cohen_kappa(
        [first[p].preference for p in shared],
        [second[p].preference for p in shared],
        categories=PREFERENCE_LABELS,
    )
    result["preference"] = None if value is None else round(value, 4)
    return result


def agreement_report(out_dir: Path, annotations: Annotations) -> dict[str, Any]:
    raters = sorted(annotations.by_rater)
    pair_ids = sorted({p for ratings in annotations.by_rater.values() for p in ratings})
    judge = judge_ratings(out_dir, pair_ids)
    all_human = [r for rater in raters for r in annotations.by_rater[rater].values()]
    between = [
        {"a": a, "b": b, **kappas(annotations.by_rater[a], annotations.by_rater[b])}
        for a, b in itertools.combinations(raters, 2)
    ]
    with_judge = [
        {"a": rater, "b": CHECK_JUDGE, **kappas(annotations.by_rater[rater], judge)} for rater in raters
    ]
    return {
        "sheets": annotations.files,
        "n_pairs": len(pair_ids),
        "means": {
            "annotators": means(all_human),
            **{rater: means(list(annotations.by_rater[rater].values())) for rater in raters},
            CHECK_JUDGE: means([judge[p] for p in pair_ids if p in judge]),
        },
        "kappa": {
            "weights": {"dimensions": "quadratic", "preference": "none"},
            "between_annotators": between,
            "annotator_vs_check_model": with_judge,
        },
    }


def write_agreement(out_dir: Path, report: dict[str, Any]) -> tuple[Path, Path]:
    folder = out_dir / ANNOTATION_DIR
    json_path, md_path = folder / "agreement.json", folder / "agreement.md"
    write_json(json_path, report)
    md_path.write_text(agreement_markdown(report), encoding="utf-8")
    return json_path, md_path
