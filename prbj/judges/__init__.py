"""Judges: anything that decides which of two answers fits a user better."""

from prbj.judges.base import Judge, Judgment, PairTask, PointwiseJudge
from prbj.judges.registry import known_judges, resolve_judges

__all__ = ["Judge", "Judgment", "PairTask", "PointwiseJudge", "known_judges", "resolve_judges"]
