"""Self-consistency (`--samples K`): an LLM judge asked K times per pair, each time as a distinct sample.

Sample 0 is the ordinary call (sample index 0, so it shares the cache with K = 1 runs); sample k ≥ 1 uses
sample index k × SAMPLE_INDEX_STRIDE. The stride keeps indices k·1000 + r free for re-asking sample k
(`--retry-failed` uses 1, 2, … on top of index 0), so the two features never ask for the same cache entry.

The judgment keeps sample 0's verdict and status (accuracy means what it means at K = 1); `sample_verdicts`
holds every sample's outcome for analysis.consistency, and the usage fields add up all K samples.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from typing import Any

from prbj.data.schema import Pair
from prbj.judges.base import Judge, Judgment, PairTask
from prbj.judges.generative import LLMJudgeBase

SAMPLE_INDEX_STRIDE = 1000
SEPARATOR = "|"


def sample_index(k: int) -> int:
    """The LLMRequest.sample_index of sample k (0-based)."""
    return k * SAMPLE_INDEX_STRIDE


class SampledJudge(Judge):
    def __init__(self, inner: Judge, samples: int) -> None:
        if not isinstance(inner, LLMJudgeBase):
            raise TypeError("only LLM judges can be sampled")
        if samples < 2:
            raise ValueError("--samples must be at least 2 to sample a judge")
        self.inner = inner
        self.name = inner.name
        self.context = inner.context
        self.samples = samples
        self.copies: list[Judge] = [inner]
        for k in range(1, samples):
            clone = copy.copy(inner)
            clone.sample_index = sample_index(k)
            self.copies.append(clone)

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "samples": self.samples, "sample_index_stride": SAMPLE_INDEX_STRIDE}

    def prepare(self, pairs: Sequence[Pair]) -> None:
        for judge in self.copies:
            judge.prepare(pairs)

    async def judge(self, task: PairTask) -> Judgment:
        results = await asyncio.gather(*(judge.judge(task) for judge in self.copies))
        first = results[0]
        first.extra["sample_verdicts"] = SEPARATOR.join(_outcome(r) for r in results)
        first.cost_usd = sum(r.cost_usd for r in results)
        first.prompt_tokens = sum(r.prompt_tokens for r in results)
        first.completion_tokens = sum(r.completion_tokens for r in results)
        if all(r.cached is not None for r in results):
            first.cached = all(bool(r.cached) for r in results)
        return first


def _outcome(judgment: Judgment) -> str:
    if judgment.status == "ok" and judgment.verdict is not None:
        return judgment.verdict
    return judgment.status


def samplable(judge: Judge) -> bool:
    """Whether asking `judge` again can give another answer: an LLM judge on a provider that samples. An
    in-process `hf-local:` model decodes greedily (prbj.local.generator), so its K samples would be one reply
    K times: an agreement of 100% and a vote share of 0 or 1 that say nothing."""
    return isinstance(judge, LLMJudgeBase) and not judge.provider.decodes_greedily


def with_samples(judges: Sequence[Judge], samples: int) -> list[Judge]:
    """LLM judges sampled K times; the others (offline, scalar, greedy in-process ones) judged once, as at
    K = 1. K = 1 changes nothing."""
    if samples <= 1:
        return list(judges)
    return [SampledJudge(j, samples) if samplable(j) else j for j in judges]
