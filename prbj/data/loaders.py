"""Load benchmark pairs from JSONL/JSON files, Parquet files or folders, the HF hub, or a bundled sample.

Without a card, the layout is read from the records: records that name their user (`user_id`) are the per-user
layout (prbj.data.per_user), anything else is Personalized RewardBench's. A card (`--benchmark`, prbj.data.cards)
names the loader instead, and its bundled sample stands for `--dataset sample`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from prbj.data.benchmark_loaders import card_file_blobs, read_with_card, sample_blobs
from prbj.data.cards import PRB, Card, resolve_card, shipped_cards
from prbj.data.dataset import (
    Blob,
    Dataset,
    _hash_file,
    blob_records,
    blobs_hash,
    dataset_files,
    file_blobs,
    folder_files,
    jsonl_records,
    match_subset,
    records_from_files,
)
from prbj.data.per_user import validate_user_records
from prbj.data.streaming import names_its_users, streamed_records
from prbj.data.typed_records import typed_pairs
from prbj.data.validate import Location, validate_records
from prbj.errors import DataError

__all__ = [
    "HF_PREFIX",
    "OFFICIAL_HF_DATASET",
    "SAMPLE",
    "Dataset",
    "jsonl_records",
    "load_dataset",
    "match_subset",
    "records_from_files",
]

SAMPLE = "sample"
HF_PREFIX = "hf:"
OFFICIAL_HF_DATASET = "QiyaoMa/Personalized-RewardBench"
# Data anyone may read: the bundled samples (Personalized RewardBench's and those of the cards shipped with
# prbj) and the published benchmarks (by their hub ids: PRB's, LaMP-QA's, and every `hf:` id a shipped card's
# `source` names). A run on them may send their text to any provider unless --personal-data says otherwise; a
# run on anything else (a user's own file, folder or card, another hub repository, which may be private) sends
# it to no remote model until it is told (prbj.llm.routing).
PUBLIC_HUB_DATASETS = frozenset({OFFICIAL_HF_DATASET, "alireza7/LaMP-QA"})
_HUB_ID = re.compile(rf"{HF_PREFIX}([A-Za-z0-9][\w.-]*/[\w.-]*[\w])")


def is_public(source: str | None, card: Card | None = None) -> bool:
    """Whether `source` (a --dataset or --input value), read with `card` (--benchmark), names public data: None
    and `sample` are a bundled sample, public unless the card is a user's own (its sample is theirs); `hf:<repo>`
    is public when a shipped card or prbj names the repository."""
    if source is None or source == SAMPLE:
        return card is None or card.path is None
    return source.startswith(HF_PREFIX) and source[len(HF_PREFIX) :] in public_hub_datasets()


def source_label(source: str | None, card: Card | None = None) -> str:
    """How messages name the data: a user's card's sample by its card."""
    if (source is None or source == SAMPLE) and card is not None and card.path is not None:
        return f"the sample of {card.path}"
    return source or SAMPLE


@cache
def public_hub_datasets() -> frozenset[str]:
    """The hub repositories of published benchmarks: prbj's own and those its shipped cards name as source."""
    named = {repo for name in shipped_cards() for repo in _HUB_ID.findall(resolve_card(name).source or "")}
    return PUBLIC_HUB_DATASETS | named


def load_dataset(spec: str | None = None, benchmark: str | Card | None = None) -> Dataset:
    """`spec`: None or 'sample' (the bundled sample of the benchmark), 'hf:<repo>', a .jsonl/.json/.parquet
    file, or a folder. `benchmark`: a card (or its name or file, as --benchmark takes it); None reads the layout
    from the records."""
    card = resolve_card(benchmark) if isinstance(benchmark, str) else benchmark
    if card is not None and card.loader == PRB:
        card = None  # Personalized RewardBench reads as it always has
    if spec is None or spec == SAMPLE:
        if card is None:
            return _load_sample()
        if card.sample is None:
            raise DataError(
                f"--benchmark {card.name}: its card names no sample; give the data with --dataset"
            )
        return read_with_card(card, SAMPLE, *sample_blobs(card))
    if spec.startswith(HF_PREFIX):
        return _load_hf(spec[len(HF_PREFIX) :], card)
    path = Path(spec)
    if not path.exists():
        raise DataError(f"--dataset {spec}: no such file or folder")
    return _read(str(path), path, card)


def _read(source: str, path: Path, card: Card | None, exclude: Sequence[str] = ()) -> Dataset:
    """A file or folder: by the card's loader (every file), else by the layout its first record has (the
    per-user layout reads every split of a hub folder, since train and val rows are the users' histories)."""
    if path.is_dir():
        files = [f for f in folder_files(path, with_csv=card is not None) if f.name not in exclude]
        per_user = card is None and names_its_users(files[0])
        if card is None and not per_user:
            files = [f for f in dataset_files(path) if f.name not in exclude]
    else:
        files = [path]
        per_user = card is None and names_its_users(path)
    if card is not None:
        return read_with_card(card, source, *card_file_blobs(card, files))
    if per_user:
        return _read_per_user(source, files)
    blobs = file_blobs(files)
    # The files' digest is computed on another thread while their records are parsed: sha256 lets go of the
    # GIL, and on a full-size dataset it takes as long as a fifth of the parsing.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return _parsed(source, blobs, pool.submit(blobs_hash, blobs))


def _parsed(source: str, blobs: Sequence[Blob], digest: Future[str]) -> Dataset:
    """Personalized RewardBench's files, read without a card: a clean benchmark file in one typed pass, else record
    by record. `digest`: the files' hash, under way."""
    typed = typed_pairs(blobs)
    if typed is not None:
        return Dataset(source, tuple(typed), digest.result())
    records = (item for blob in blobs for item in blob_records(blob))
    return Dataset(source, tuple(validate_records(records)), digest.result())


def _read_per_user(source: str, files: Sequence[Path]) -> Dataset:
    """Files of the per-user layout, read as a stream (prbj.data.streaming): no file's bytes nor its records are
    held whole."""
    digest = hashlib.sha256()
    data = validate_user_records(streamed_records(files, digest))
    return Dataset(
        source,
        tuple(data.pairs),
        digest.hexdigest(),
        benchmark="per-user",
        history_rows=data.history_rows,
        notes=data.notes,
    )


def _load_sample() -> Dataset:
    folder = resources.files("prbj.data") / "sample"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".jsonl")), key=lambda f: f.name)
    records: list[tuple[Location, Any]] = []
    digest = hashlib.sha256()
    for file in files:
        data = file.read_bytes()
        _hash_file(digest, data)
        records.extend(jsonl_records(f"sample/{file.name}", data))
    return Dataset(SAMPLE, tuple(validate_records(records)), digest.hexdigest())


def _load_hf(repo_id: str, card: Card | None = None) -> Dataset:
    if not repo_id:
        raise DataError(f"--dataset hf:<repo>: no repository named (e.g. hf:{OFFICIAL_HF_DATASET})")
    try:
        from huggingface_hub import snapshot_download

        # A card's loader may read CSV files too (PersonaMem's questions).
        patterns = ["*.parquet", "*.jsonl", "*.json", *(["*.csv"] if card is not None else [])]
        folder = snapshot_download(repo_id=repo_id, repo_type="dataset", allow_patterns=patterns)
    except Exception as err:  # network, auth and missing-repo errors all end the same way for the user
        cause = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(
            f"--dataset hf:{repo_id}: could not fetch it from the Hugging Face hub ({type(err).__name__}: "
            f"{cause}). Without network access, download the Parquet files elsewhere and pass their folder "
            f"with --dataset <folder>."
        ) from None
    return _read(f"hf:{repo_id}", Path(folder), card, exclude=("dataset_infos.json",))
