"""The pairs a run judged, read back from the dataset its run.json names, for the commands that show questions
and answers beside judgments (`prbj show`, `prbj view`). judgments.parquet holds ids and outcomes, not the
texts; the dataset is trusted only when it still has the fingerprint the run recorded."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prbj.data.cards import recorded_card
from prbj.data.loaders import Dataset, load_dataset
from prbj.data.schema import Pair
from prbj.errors import PrbjError
from prbj.export.eee_read import EEE_PREFIX, eee_pairs


@dataclass(frozen=True)
class RunPairs:
    pairs: dict[str, Pair]
    # Why there are no pairs (no dataset named, unreadable, changed since the run); None when they were read.
    note: str | None = None


def _candidates(source: str, run_dir: Path | None) -> list[str]:
    """The source as written, then (a relative path recorded where the run was started) beside the folder
    that holds the run directories and its parent, where `prbj judge` is usually started."""
    path = Path(source)
    if path.is_absolute() or path.exists() or run_dir is None or source == "sample" or ":" in source:
        return [source]
    return [source, *(str(base / source) for base in (run_dir.parent.parent, run_dir.parent))]


def _selected(dataset: Dataset, config: dict[str, Any]) -> Dataset:
    subsets = config.get("subsets") or []
    limit = config.get("limit")
    if not isinstance(subsets, list) or not (limit is None or isinstance(limit, int)):
        return dataset
    try:
        return dataset.select([str(s) for s in subsets], limit)
    except PrbjError:
        return dataset


def read_run_pairs(
    dataset_record: dict[str, Any],
    config: dict[str, Any] | None = None,
    *,
    source: str | None = None,
    run_dir: Path | None = None,
) -> RunPairs:
    """The run's pairs by id. `dataset_record` is the run's `dataset` (source, fingerprint), `config` its
    run.json config (the --subset/--limit that narrowed the data), `source` an override (--dataset)."""
    named = source or dataset_record.get("source")
    if not named:
        return RunPairs({}, "run.json names no dataset")
    if str(named).startswith(EEE_PREFIX):  # an Every Eval Ever file: its instance lines hold the texts
        found = eee_pairs(str(named))
        return RunPairs(
            found, None if found else "the Every Eval Ever file has no instance-level texts beside it"
        )
    wanted = dataset_record.get("fingerprint")
    # The benchmark the run read its data as (run.json's config.benchmark), read the same way again.
    benchmark = recorded_card((config or {}).get("benchmark"))
    error: str | None = None
    for candidate in _candidates(str(named), run_dir):
        try:
            loaded = load_dataset(candidate, benchmark)
        except PrbjError as err:
            error = str(err)
            continue
        for dataset in (loaded, _selected(loaded, config or {})):
            if not wanted or dataset.fingerprint() == wanted:
                return RunPairs({pair.id: pair for pair in dataset.pairs})
        return RunPairs(
            {},
            f"{named} has changed since the run (fingerprint {loaded.fingerprint()}, run {wanted})",
        )
    return RunPairs({}, f"cannot read the dataset {named} ({error})")
