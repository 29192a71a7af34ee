"""Which benchmark a run judged, as an export names it: public sources (Personalized RewardBench, the cards shipped
with prbj: their samples and the hub data they name) by their public name, anything else as a private dataset,
named by no path (a file's path can name its owner) and told apart by its fingerprint."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from prbj.data.cards import recorded_own_card, recorded_shipped_card
from prbj.data.loaders import HF_PREFIX, OFFICIAL_HF_DATASET, SAMPLE, is_public

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


def benchmark_of(dataset: dict[str, Any], benchmark: Any = None) -> Benchmark:
    """From a run's `dataset` record (source, fingerprint, n_pairs, subsets) and the benchmark its data was read
    as (run.json's `config.benchmark`: a card's name and, for a card of the user's own, its file). A card shipped
    with prbj names its benchmark: its sample and the hub data it names are public under its title; a card of
    the user's own, and anything else, are private pairs."""
    source = str(dataset.get("source") or "")
    version = str(dataset.get("fingerprint") or "unknown")
    n_pairs = dataset.get("n_pairs") if isinstance(dataset.get("n_pairs"), int) else None
    subsets = tuple(str(s) for s in dataset.get("subsets") or [] if isinstance(s, str))
    card = recorded_shipped_card(benchmark)
    if card is not None:
        if source == SAMPLE:
            return Benchmark(
                f"{card.title} (demo sample)", f"{card.name}-sample", True, None, version, n_pairs, subsets
            )
        if is_public(source, card):
            return Benchmark(card.title, card.name, True, source[len(HF_PREFIX) :], version, n_pairs, subsets)
    elif not recorded_own_card(benchmark):
        if source == SAMPLE:
            return Benchmark(
                f"{BENCHMARK_NAME} (demo sample)", "personalized-rewardbench-sample", True, None, version, n_pairs,
                subsets,
            )  # fmt: skip
        if source.lower() == f"{HF_PREFIX}{OFFICIAL_HF_DATASET}".lower():
            return Benchmark(
                BENCHMARK_NAME,
                "personalized-rewardbench",
                True,
                OFFICIAL_HF_DATASET,
                version,
                n_pairs,
                subsets,
            )
    return Benchmark("Private pairs", "private-pairs", False, None, version, n_pairs, subsets)
