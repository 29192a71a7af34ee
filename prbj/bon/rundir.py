"""The BoN run directory: its files, its run.json, and the questions it was sampled for.

Each step reads what the previous one wrote and adds its own files and its own section of run.json, so a run
directory tells the whole story of one policy's samples. The questions themselves are not copied into it: a
later step reloads the dataset recorded in run.json and checks its fingerprint, so the gold rubric never sits
in the run directory next to the samples.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from prbj.data.files import read_json, write_json, write_parquet
from prbj.data.loaders import Dataset, load_dataset
from prbj.data.schema import Pair
from prbj.errors import DataError
from prbj.runs.rundir import RUN_FILE, new_run_dir
from prbj.runs.rundir import SUMMARY_FILE as SUMMARY_FILE  # re-exported: BoN steps write their summary.json

# run.json and summary.json are named as in every prbj run directory; the rest are BoN's own.
SAMPLES_FILE = "samples.parquet"
SCORES_FILE = "scores.parquet"
PICKS_FILE = "picks.parquet"
GOLD_FILE = "gold.parquet"
# Gold grades of an evaluation whose every call failed: kept apart so that the good outputs stay in place.
FAILED_GOLD_FILE = "gold.failed.parquet"
EVALUATIONS_FILE = "evaluations.parquet"
OFFICIAL_SUMMARY_FILE = "evaluation_summary.json"
RMS_FOLDER = "rms"
COMMAND = "bon"

# Which command writes each file, for the message when a later step finds it missing.
_WRITTEN_BY = {
    SAMPLES_FILE: "prbj bon sample",
    SCORES_FILE: "prbj bon score RUN_DIR -p <rm>",
    PICKS_FILE: "prbj bon score RUN_DIR -p <rm>",
    GOLD_FILE: "prbj bon evaluate RUN_DIR --gold <provider>",
}


def best_of_ks(n: int) -> list[int]:
    """k = 1, 2, 4, … up to N, as the official scripts use; N itself is added when it is not a power of two."""
    ks = [1 << e for e in range(n.bit_length()) if 1 << e <= n]
    if ks[-1] != n:
        ks.append(n)
    return ks


def unique_questions(dataset: Dataset) -> Dataset:
    """One question per pair id (the first occurrence): a question sampled twice would count twice."""
    seen: set[str] = set()
    kept = []
    for pair in dataset.pairs:
        if pair.id not in seen:
            seen.add(pair.id)
            kept.append(pair)
    return dataset.keep(kept)


def load_questions(spec: str, subsets: Sequence[str], limit: int | None) -> Dataset:
    questions = unique_questions(load_dataset(spec).select(subsets, limit))
    if not questions.pairs:
        raise DataError(f"--dataset {spec}: no questions to sample")
    if questions.benchmark != "prb":
        # Picks are graded against each question's rubric aspects, which only Personalized RewardBench has.
        raise DataError(
            f"--dataset {spec}: {questions.benchmark} data has no rubric aspects to grade best-of-N picks with; "
            "best-of-N runs on Personalized RewardBench (docs/benchmarks.md)"
        )
    return questions


def slug(name: str) -> str:
    """A file-name-safe form of an RM name (gemini-3-flash:pointwise → gemini-3-flash_pointwise)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "rm"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class BonRun:
    path: Path
    meta: dict[str, Any]

    @classmethod
    def create(cls, out_dir: Path, config: dict[str, Any], meta: dict[str, Any]) -> BonRun:
        started = datetime.now(UTC)
        digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:6]
        candidate = new_run_dir(out_dir, started, digest, prefix=f"{COMMAND}-")
        return cls(candidate, {"run_id": candidate.name, "command": COMMAND, **meta})

    @classmethod
    def open(cls, path: Path) -> BonRun:
        run_file = path / RUN_FILE
        if not run_file.is_file():
            raise DataError(
                f"{path}: not a BoN run directory (no {RUN_FILE}); create one with 'prbj bon sample'"
            )
        meta = read_json(run_file)
        if not isinstance(meta, dict) or meta.get("command") != COMMAND:
            raise DataError(f"{run_file}: field 'command': expected 'bon' (this is not a BoN run directory)")
        return cls(path, meta)

    def save(self) -> None:
        write_json(self.path / RUN_FILE, self.meta)

    @property
    def n(self) -> int:
        return int(self.meta["sample"]["n"])

    @property
    def ks(self) -> list[int]:
        return best_of_ks(self.n)

    def has(self, name: str) -> bool:
        return (self.path / name).is_file()

    def read(self, name: str) -> pl.DataFrame:
        path = self.path / name
        if not path.is_file():
            step = _WRITTEN_BY.get(name, "the previous step")
            raise DataError(f"{path}: missing; run '{step}' first")
        try:
            return pl.read_parquet(path)
        except Exception as err:  # polars raises several error types for unreadable files
            raise DataError(f"{path}: not a readable Parquet file ({type(err).__name__})") from None

    def write(self, name: str, frame: pl.DataFrame) -> Path:
        return write_parquet(self.path / name, frame)

    def questions(self, dataset: str | None = None) -> dict[str, Pair]:
        """The run's questions by pair id, reloaded from its dataset (or `dataset`, when the files moved) and
        checked against the fingerprint recorded when sampling."""
        recorded = self.meta["dataset"]
        spec = dataset or recorded["spec"]
        questions = load_questions(spec, recorded.get("subsets") or (), recorded.get("limit"))
        if questions.fingerprint() != recorded["fingerprint"]:
            raise DataError(
                f"--dataset {spec}: its questions differ from those this run sampled (fingerprint "
                f"{questions.fingerprint()} vs {recorded['fingerprint']} in {self.path / RUN_FILE})"
            )
        return {pair.id: pair for pair in questions.pairs}

    def log(self, step: str, entry: dict[str, Any]) -> None:
        """Append one step's record (times, options, usage) to the run's history."""
        self.meta.setdefault("history", []).append({"step": step, **entry})
