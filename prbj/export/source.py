"""Which benchmark a run judged, as an export names it: public sources by their public name, anything else as
a private dataset, named by no path (a file's path can name its owner) and told apart by its fingerprint."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from prbj.data.loaders import HF_PREFIX, OFFICIAL_HF_DATASET, SAMPLE

BENCHMARK_NAME = "Personalized RewardBench"


@dataclass(frozen=True)
class Benchmark:
    name: str  # for people: "Personalized RewardBench"
    slug: str  # a stable, path-safe id: EEE's dataset_name and datastore collection, Inspect's task name
    public: bool
    hf_repo: str | None  # the Hugging Face dataset, for the official data
    version: str  # the fingerprint of the pairs judged (the hash of their bytes, or of the selection)
    n_pairs: int | None
    subsets: tuple[str, ...]

    @property
    def origin(self) -> str:
        if self.hf_repo:
            return f"Hugging Face dataset {self.hf_repo}, split test"
        if self.public:
            return "the demo sample bundled with prbj (public)"
        return "a private dataset (not published; named here by its fingerprint only)"

    def sample_hash(self, pair_id: str) -> str:
        """The same pair of the same benchmark hashes the same across models and runs. Ids only: never a text,
        so no profile (and no question) is ever a hash input."""
        return hashlib.sha256(json.dumps([self.slug, pair_id]).encode()).hexdigest()


def benchmark_of(dataset: dict[str, Any]) -> Benchmark:
    """From a run's `dataset` record (source, fingerprint, n_pairs, subsets)."""
    source = str(dataset.get("source") or "")
    version = str(dataset.get("fingerprint") or "unknown")
    n_pairs = dataset.get("n_pairs") if isinstance(dataset.get("n_pairs"), int) else None
    subsets = tuple(str(s) for s in dataset.get("subsets") or [] if isinstance(s, str))
    if source == SAMPLE:
        return Benchmark(
            f"{BENCHMARK_NAME} (demo sample)", "personalized-rewardbench-sample", True, None, version, n_pairs,
            subsets,
        )  # fmt: skip
    if source.lower() == f"{HF_PREFIX}{OFFICIAL_HF_DATASET}".lower():
        return Benchmark(
            BENCHMARK_NAME, "personalized-rewardbench", True, OFFICIAL_HF_DATASET, version, n_pairs, subsets
        )
    return Benchmark("Private pairs", "private-pairs", False, None, version, n_pairs, subsets)
