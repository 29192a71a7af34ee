"""PAL's Reddit TL;DR users (arXiv 2406.08469; RamyaLab/pluralistic-alignment, `src/summary_dataset_utils.py`)
through its card: seen and unseen workers, as PAL defines them.

The source is `openai/summarize_from_feedback`'s comparisons (train and validation files): a Reddit post
(`info.post`), two summaries (`summaries[i].text`, `.policy`) and the `worker` who compared them. PAL keeps the
comparisons of two supervised-policy summaries (both policies name `sup`, neither `ppo`) and gives each worker a
taste it defines, not the worker's recorded `choice`: a "minority" worker prefers the shorter summary, a
"majority" worker the longer one (the second summary when both are as long). Then:

- **seen** workers: the 10 with the most kept train comparisons (ranks 4-6 minority); their preferences trained
  PAL's shared model. Their train comparisons are their history, their validation ones are judged;
- **unseen** workers: the others with at least 100 kept validation comparisons (a fixed list of 22 majority, the
  rest minority); PAL adapts to each from 10 of their comparisons (drawn as scikit-learn's
  `train_test_split(train_size=10, random_state=42)` draws them), which are their history; the rest are judged.

The question a judge sees is the post (PAL's reward model reads `Human: <post> Assistant: <summary>`); a worker's
taste is a group (`taste`: longer or shorter), never shown to a judge.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from prbj.data.cards import Card
from prbj.data.dataset import Blob, blob_records
from prbj.data.loader_output import Mapped
from prbj.data.per_user import ReadOptions
from prbj.data.validate import Location
from prbj.errors import DataError

SEEN_WORKERS = 10
MINORITY_RANKS = (3, 4, 5)  # 0-based places among the seen workers (PAL: top_ten_workers[[3, 4, 5]])
UNSEEN_MIN_ROWS = 100
UNSEEN_HISTORY = 10
SPLIT_SEED = 42
# PAL's majority among the unseen workers (`majority_unseen` in summary_dataset_utils.py); the rest are minority.
MAJORITY_UNSEEN = frozenset(
    {
        "RMwrIV50cNusBthNvLs1wSNdqFpQAg",
        "M4bdOszgybjO2qg2Dth5I1GOYAvE7V",
        "gMlGeJl1vsMERrbmC7W717zpVevUh8",
        "OKFDIsAZl6Qa0m9x26f5Ao4S0uc7Ca",
        "uvzut5OK2bvei9zoCDdktcfLENYioY",
        "iL7GfrbN2PeB3KInidqSxUdxYcTZmG",
        "BYcMzzjuFgaA59QDKoAgY07PyyG0qC",
        "p7cM83bE3XsWlS9lTIvYCNfCVgOeTK",
        "rmgbTjW1stlproQnuHE2bUpK78Jxle",
        "FCzllSEpfOHCBBEJqq4VeHRQR5JdoX",
        "P2p07Up4eJyvxrrVYgwtb60krbFbxI",
        "qNGw27c8LHVPn31uJvjg3k0MZQcqQv",
        "thott7XepukYSbOL2QgSlyXd0rgHvr",
        "3AFaFd3w9NjDGnO51kupLyK1N44DQ2",
        "I2enBRrckFHw3KjJRSfKgsBwg4tmZy",
        "D8z53gLFLFqhZowaegbtxmSGa0jqv0",
        "a0nhcJKlk2aO06xuBTMkeHdx8MDY5w",
        "EeOYhWlpz7e45kXvg0RrfkjalZgkiz",
        "a7zXgbkuY6lk3vdt0q2Qf7SrZQgZ86",
        "9UQLCFxeYndGNfHEUP3yRt8XZhrrPr",
        "9YhRKOwkljIQ3NKf5CCV7BGjOcdPHu",
        "mjwVX7RHTcfOfLTYGdBvms3vy8LTtP",
    }
)


@dataclass(frozen=True, slots=True)
class _Comparison:
    location: Location
    worker: str
    post: str
    left: str
    right: str


def _split_of(blob: Blob, record: Mapping[str, Any]) -> str | None:
    """train or validation: the hub file's name or folder (`train-00000-of-00001.parquet`,
    `comparisons/validation/0000.parquet`), else the row's own `split` (train, valid1, valid2)."""
    path = PurePosixPath(blob.name.replace("\\", "/"))
    for name in (path.name.lower(), path.parent.name.lower()):
        if name.startswith("train"):
            return "train"
        if name.startswith("valid"):
            return "validation"
    split = record.get("split")
    if split == "train":
        return "train"
    return "validation" if isinstance(split, str) and split.startswith("valid") else None


def _kept(location: Location, record: Any) -> _Comparison | None:
    """A comparison PAL keeps: two supervised summaries, a worker, a post and two texts."""
    if not isinstance(record, Mapping):
        return None
    summaries, info, worker = record.get("summaries"), record.get("info"), record.get("worker")
    if not isinstance(summaries, list | tuple) or len(summaries) < 2 or not isinstance(info, Mapping):
        return None
    policies = [s.get("policy") if isinstance(s, Mapping) else None for s in summaries[:2]]
    if not all(isinstance(p, str) and "sup" in p and "ppo" not in p for p in policies):
        return None
    texts = [s.get("text") for s in summaries[:2]]
    post = info.get("post")
    if not isinstance(worker, str) or not isinstance(post, str) or not all(isinstance(t, str) for t in texts):
        return None
    return _Comparison(location, worker, post, texts[0], texts[1])


def _preferred(comparison: _Comparison, shorter: bool) -> tuple[str, str]:
    """(chosen, rejected) by the worker's taste, as PAL decides it (the right one when neither wins)."""
    left, right = comparison.left, comparison.right
    left_wins = len(left) < len(right) if shorter else len(left) > len(right)
    return (left, right) if left_wins else (right, left)


def _history_rows(count: int) -> set[int]:
    """Which of an unseen worker's `count` comparisons (in file order) PAL adapts on: scikit-learn's
    train_test_split(train_size=UNSEEN_HISTORY, random_state=42) takes the last UNSEEN_HISTORY places of
    RandomState(42).permutation(count)."""
    import numpy as np

    permutation = np.random.RandomState(SPLIT_SEED).permutation(count)
    return {int(i) for i in permutation[count - UNSEEN_HISTORY :]}


def read_pal_tldr(card: Card, blobs: Sequence[Blob]) -> Mapped:
    kept: dict[str, list[_Comparison]] = {"train": [], "validation": []}
    for blob in blobs:
        for location, record in blob_records(blob):
            split = _split_of(blob, record) if isinstance(record, Mapping) else None
            comparison = _kept(location, record)
            if split is not None and comparison is not None:
                kept[split].append(comparison)
    if not kept["train"] and not kept["validation"]:
        raise DataError(
            "pal-tldr: no comparison PAL keeps (two `sup` summaries, no `ppo`, with a worker and a post) among: "
            + ", ".join(b.name for b in blobs)
        )
    counts = Counter(c.worker for c in kept["train"])
    # Most train comparisons first; equal counts in order of first appearance (pandas' value_counts).
    seen = [worker for worker, _ in counts.most_common(SEEN_WORKERS)]
    minority = {worker for place, worker in enumerate(seen) if place in MINORITY_RANKS}
    records: list[tuple[Location, Any]] = []
    for split, chosen_split in (("train", "train"), ("validation", "test")):
        for c in kept[split]:
            if c.worker in seen:
                records.append((c.location, _record(c, c.worker in minority, chosen_split, seen=True)))
    unseen_rows: dict[str, list[_Comparison]] = {}
    for c in kept["validation"]:
        if c.worker not in seen:
            unseen_rows.setdefault(c.worker, []).append(c)
    for worker in sorted(unseen_rows):
        rows = unseen_rows[worker]
        if len(rows) < UNSEEN_MIN_ROWS:
            continue
        adapt = _history_rows(len(rows))
        shorter = worker not in MAJORITY_UNSEEN
        for index, c in enumerate(rows):
            records.append(
                (c.location, _record(c, shorter, "train" if index in adapt else "test", seen=False))
            )
    return Mapped(records, ReadOptions(split_map=card.split_map))


def _record(comparison: _Comparison, shorter: bool, split: str, *, seen: bool) -> dict[str, Any]:
    chosen, rejected = _preferred(comparison, shorter)
    return {
        "user_id": comparison.worker,
        "prompt": comparison.post,
        "chosen": chosen,
        "rejected": rejected,
        "split": split,
        "seen": seen,
        "groups": {"taste": "shorter" if shorter else "longer"},
    }
