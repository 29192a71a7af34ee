"""Blind annotation sheets for a build: the same random sample of kept pairs for every annotator, the two
answers shown as A and B in an order drawn per sheet and pair, and the labels in a separate key file."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prbj.build.output import PAIRS_FILE, PROVENANCE_FILE
from prbj.context.retrieval import rank_profile
from prbj.data import Pair, load_dataset
from prbj.data.annotation import SHEET_COLUMNS, write_csv
from prbj.data.loaders import jsonl_records
from prbj.errors import DataError

ANNOTATION_DIR = "annotation"
KEY_FILE = "key.csv"
INSTRUCTIONS_FILE = "instructions.md"
KEY_COLUMNS = ("sheet", "item", "pair_id", "answer_a")
# A list in a cell: "- " would start the cell like a formula, which the sheet then writes with an apostrophe.
BULLET = "• "

INSTRUCTIONS = """# Annotation instructions

Each row of your sheet is one question from one user, with a few of the user's past posts and the aspects this
user is expected to care about, and two answers, A and B. Rate each answer on four dimensions, each an integer
from 1 (very poor) to 5 (excellent):

- factuality: every claim is correct; nothing misleading
- relevance: it answers the question that was asked
- helpfulness: it gives the asker something useful and actionable
- adherence: it satisfies the listed aspects this user expects

Rate factuality, relevance and helpfulness as for any asker. Then write in `preference` which answer fits this
user better: `A`, `B` or `tie`. `comment` is optional. Work alone; do not change the columns `sheet` and `item`.
"""


@dataclass(frozen=True)
class WrittenSheets:
    sheets: list[Path]
    key: Path
    items: int


def sheet_name(index: int) -> str:
    return f"sheet-{index}"


def read_build_pairs(out_dir: Path) -> tuple[list[Pair], dict[str, dict[str, Any]]]:
    """The kept pairs of a build and their provenance, by pair id."""
    pairs_path, provenance_path = out_dir / PAIRS_FILE, out_dir / PROVENANCE_FILE
    for path in (pairs_path, provenance_path):
        if not path.is_file():
            raise DataError(f"{out_dir}: no {path.name}; is this a `prbj build` directory?")
    pairs = list(load_dataset(str(pairs_path)).pairs)
    provenance: dict[str, dict[str, Any]] = {}
    for location, record in jsonl_records(str(provenance_path), provenance_path.read_bytes()):
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            raise DataError(f"{location}: field 'id': missing")
        provenance[record["id"]] = record
    missing = [p.id for p in pairs if p.id not in provenance]
    if missing:
        raise DataError(f"{provenance_path}: no provenance for pair {missing[0]!r}")
    return pairs, provenance


def chosen_in_a(seed: int, sheet: str, pair_id: str) -> bool:
    """The A/B order of one pair on one sheet: its own seeded draw, so orders differ between annotators and do
    not depend on which other pairs were sampled."""
    return random.Random(f"{seed}:{sheet}:{pair_id}").random() < 0.5


def _profile_text(pair: Pair, k: int) -> str:
    return "\n".join(
        f"{BULLET}{' '.join(p.text.split())}" for p in rank_profile(pair.question, pair.profile, k)
    )


def write_sheets(
    out_dir: Path, *, annotators: int, sample: int, seed: int, profile_k: int = 5
) -> WrittenSheets:
    pairs, provenance = read_build_pairs(out_dir)
    if not pairs:
        raise DataError(f"{out_dir / PAIRS_FILE}: no pairs to annotate")
    ordered = sorted(pairs, key=lambda p: p.id)
    drawn = random.Random(seed).sample(ordered, min(sample, len(ordered)))
    folder = out_dir / ANNOTATION_DIR
    folder.mkdir(exist_ok=True)
    key_rows: list[dict[str, Any]] = []
    sheets: list[Path] = []
    for index in range(1, annotators + 1):
        name = sheet_name(index)
        rows = []
        for item, pair in enumerate(drawn, start=1):
            in_a = chosen_in_a(seed, name, pair.id)
            first, second = (pair.chosen, pair.rejected) if in_a else (pair.rejected, pair.chosen)
            aspects = provenance[pair.id].get("plan", {}).get("aspects", [])
            rows.append(
                {
                    "sheet": name,
                    "item": item,
                    "question": pair.question,
                    "profile": _profile_text(pair, profile_k),
                    "aspects": "\n".join(f"{BULLET}{a}" for a in aspects),
                    "answer_a": first,
                    "answer_b": second,
                }
            )
            key_rows.append(
                {
                    "sheet": name,
                    "item": item,
                    "pair_id": pair.id,
                    "answer_a": "chosen" if in_a else "rejected",
                }
            )
        path = folder / f"{name}.csv"
        write_csv(path, SHEET_COLUMNS, rows)
        sheets.append(path)
    key = folder / KEY_FILE
    write_csv(key, KEY_COLUMNS, key_rows)
    (folder / INSTRUCTIONS_FILE).write_text(INSTRUCTIONS, encoding="utf-8")
    return WrittenSheets(sheets, key, len(drawn))
