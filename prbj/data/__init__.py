"""Benchmark data: schema, loaders, validation, the leakage guard, and whole-file writes (files)."""

from prbj.data.loaders import OFFICIAL_HF_DATASET, Dataset, load_dataset
from prbj.data.schema import CONTEXTS, SUBSETS, Context, JudgeView, Pair, ProfilePost, RubricAspect

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
