"""Benchmark data: schema, loaders, validation, the leakage guard, and whole-file writes (files).

The loaders (and Polars behind them) load on first use of their names, not with this package: the schema is
all that `prbj --help` and the command-line options need."""

from typing import TYPE_CHECKING, Any

from prbj.data.schema import CONTEXTS, SUBSETS, Context, JudgeView, Pair, ProfilePost, RubricAspect

if TYPE_CHECKING:
    from prbj.data.loaders import OFFICIAL_HF_DATASET, Dataset, load_dataset

_FROM_LOADERS = ("OFFICIAL_HF_DATASET", "Dataset", "load_dataset")

__all__ = [
    "CONTEXTS",
    "OFFICIAL_HF_DATASET",
    "SUBSETS",
    "Context",
    "Dataset",
    "JudgeView",
    "Pair",
    "ProfilePost",
    "RubricAspect",
    "load_dataset",
]


def __getattr__(name: str) -> Any:
    if name in _FROM_LOADERS:
        from prbj.data import loaders

        return getattr(loaders, name)
    raise AttributeError(f"module 'prbj.data' has no attribute {name!r}")
