"""selective.json: the confidence thresholds `prbj calibrate` picked, which `prbj judge --selective FILE`
applies. A file from elsewhere is untrusted input: read here, field by field, with one line naming the file and
the field when anything is off.

    {
      "kind": "prbj-selective",
      "prbj_version": "...",
      "target_error": 0.1,            # α: the error allowed among kept verdicts
      "delta": 0.05,                  # δ: the probability with which the bound may fail
      "procedure": "...",             # how the thresholds were picked (analysis.selective)
      "source_run": "<run id>",
      "dataset_fingerprint": "...",
      "thresholds": [
        {"judge": "...", "context": "...", "threshold": 0.83,
         "n": 400, "kept": 260, "errors": 12, "coverage": 0.65, "error": 0.046, "bound": 0.074, "tested": 9,
         "calibration_pairs": ["pair id", ...]}
      ]
    }

`calibration_pairs` are the pairs whose judgments picked the threshold: a later run checks the target only on
the others (held out).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prbj import __version__
from prbj.data.files import read_json, write_json
from prbj.errors import DataError

KIND = "prbj-selective"


@dataclass(frozen=True)
class SelectiveEntry:
    judge: str
    context: str
    threshold: float
    calibration_pairs: frozenset[str]
    figures: dict[str, Any]


@dataclass(frozen=True)
class SelectiveFile:
    target_error: float
    delta: float
    entries: list[SelectiveEntry]


def selective_document(
    *,
    target_error: float,
    delta: float,
    procedure: str,
    source_run: str,
    fingerprint: str | None,
    thresholds: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "kind": KIND,
        "prbj_version": __version__,
        "target_error": target_error,
        "delta": delta,
        "procedure": procedure,
        "source_run": source_run,
        "dataset_fingerprint": fingerprint,
        "thresholds": thresholds,
    }


def write_selective(path: Path, document: dict[str, Any]) -> Path:
    write_json(path, document)
    return path


def _probability(value: Any, where: str, *, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise DataError(f"{where}: expected a number between 0 and 1, got {value!r}")
    if not (0.0 < value < 1.0 if open_low else 0.0 <= value <= 1.0):
        raise DataError(f"{where}: expected a number between 0 and 1, got {value!r}")
    return float(value)


def read_selective(path: Path) -> SelectiveFile:
    document = read_json(path)
    if not isinstance(document, dict) or document.get("kind") != KIND:
        raise DataError(
            f"{path}: not a selective.json written by prbj calibrate (field 'kind' is not {KIND!r})"
        )
    target = _probability(document.get("target_error"), f"{path}: field 'target_error'", open_low=True)
    delta = _probability(document.get("delta"), f"{path}: field 'delta'", open_low=True)
    raw = document.get("thresholds")
    if not isinstance(raw, list):
        raise DataError(f"{path}: field 'thresholds': expected a list")
    entries = []
    for index, item in enumerate(raw):
        where = f"{path}: field 'thresholds[{index}]"
        if not isinstance(item, dict):
            raise DataError(f"{where}': expected an object")
        for key in ("judge", "context"):
            if not isinstance(item.get(key), str) or not item[key]:
                raise DataError(f"{where}.{key}': expected a name")
        pairs = item.get("calibration_pairs", [])
        if not isinstance(pairs, list) or not all(isinstance(p, str) for p in pairs):
            raise DataError(f"{where}.calibration_pairs': expected a list of pair ids")
        entries.append(
            SelectiveEntry(
                judge=item["judge"],
                context=item["context"],
                threshold=_probability(item.get("threshold"), f"{where}.threshold'"),
                calibration_pairs=frozenset(pairs),
                figures={k: v for k, v in item.items() if k not in ("calibration_pairs",)},
            )
        )
    return SelectiveFile(target, delta, entries)
