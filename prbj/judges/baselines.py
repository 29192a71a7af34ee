"""Offline reference judges: no key, no download. They set the floor a real reward model must clear.

- `random`: a seeded coin per answer; expect about 50%.
- `length`: the longer answer (in words) wins; shows how much a length bias alone would earn.
- `bm25-profile`: lexical affinity between the user's profile and the answer.
- `embed-profile`: cosine affinity between the answer and the user's profile, with WordLlama embeddings whose
  weights ship inside the `wordllama` wheel.

Both read the profile of any kind as documents (prbj.context.profile_text.affinity_documents): past posts, a
persona, stated preferences and the user's earlier prompts and chosen answers count for an answer that resembles
them; the answers the user turned down count against it. On Personalized RewardBench (posts only) that is the
affinity to the posts, as it always was.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from prbj.context.profile_text import affinity_documents
from prbj.context.retrieval import BM25, tokenize
from prbj.data.schema import JudgeView
from prbj.judges.base import PointwiseJudge, word_count


class RandomJudge(PointwiseJudge):
    name = "random"
    context = "none"
    offline = True

    def __init__(self, seed: int = 42) -> None:
        self.seed = seed

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "seed": self.seed}

    async def score(self, view: JudgeView, answers: Sequence[str]) -> list[float]:
        # A hash, not a shared RNG stream: each answer's draw depends only on (seed, pair, text), so results
        # do not change with concurrency, subset selection or answer order.
        return [self._uniform(view.pair_id, answer) for answer in answers]

    def _uniform(self, pair_id: str, answer: str) -> float:
        digest = hashlib.sha256(f"{self.seed}\0{pair_id}\0{answer}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64


class LengthJudge(PointwiseJudge):
    name = "length"
    context = "none"
    offline = True

    async def score(self, view: JudgeView, answers: Sequence[str]) -> list[float]:
        return [float(word_count(answer)) for answer in answers]


class BM25ProfileJudge(PointwiseJudge):
    """Sum of BM25 scores of the answer against each profile document (negative for an answer the user turned
    down), divided by the answer's term count so that a longer answer does not win by having more terms."""

    name = "bm25-profile"
    context = "profile"
    offline = True

    async def score(self, view: JudgeView, answers: Sequence[str]) -> list[float]:
        documents, signs = affinity_documents(view.user_profile)
        index = BM25([tokenize(document) for document in documents])
        scores = []
        for answer in answers:
            terms = tokenize(answer)
            per_document = index.scores(terms)
            affinity = sum(sign * value for sign, value in zip(signs, per_document, strict=True))
            scores.append(affinity / len(set(terms)) if terms else 0.0)
        return scores


_MODEL_LOCK = threading.Lock()


@cache
def _wordllama() -> Any:
    import wordllama
    from wordllama import WordLlama

    package_dir = wordllama.__path__[0]
    with _MODEL_LOCK:
        # The weights live inside the installed package: never reach for the network.
        return WordLlama.load(cache_dir=package_dir, disable_download=True)


class EmbedProfileJudge(PointwiseJudge):
    """Cosine between the answer's embedding and the centroid of the profile documents' embeddings, less the
    cosine to the centroid of the answers the user turned down (when the profile has earlier choices)."""

    name = "embed-profile"
    context = "profile"
    offline = True
    model_name = "wordllama-l2-supercat-256"

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "model": self.model_name}

    async def score(self, view: JudgeView, answers: Sequence[str]) -> list[float]:
        model = _wordllama()
        documents, signs = affinity_documents(view.user_profile)
        if not documents:
            return [0.0 for _ in answers]
        vectors = _unit(np.asarray(model.embed(documents), dtype=np.float64))
        toward = _centroid(vectors[[i for i, sign in enumerate(signs) if sign > 0]])
        away = _centroid(vectors[[i for i, sign in enumerate(signs) if sign < 0]])
        embedded = _unit(np.asarray(model.embed(list(answers)), dtype=np.float64))
        # Rounded so that float noise across BLAS builds cannot flip a near-tie.
        return [round(_cosine(v, toward) - _cosine(v, away), 9) for v in embedded]


def _centroid(vectors: np.ndarray) -> np.ndarray | None:
    """The unit mean of unit vectors; None when there are none."""
    return _unit(vectors.mean(axis=0, keepdims=True))[0] if len(vectors) else None


def _cosine(vector: np.ndarray, centroid: np.ndarray | None) -> float:
    return float(vector @ centroid) if centroid is not None else 0.0


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


BASELINES: dict[str, type[PointwiseJudge]] = {
    "random": RandomJudge,
    "length": LengthJudge,
    "bm25-profile": BM25ProfileJudge,
    "embed-profile": EmbedProfileJudge,
}
DEFAULT_JUDGES: tuple[str, ...] = tuple(BASELINES)


def make_baseline(name: str, *, seed: int) -> PointwiseJudge:
    cls = BASELINES[name]
    return cls(seed=seed) if cls is RandomJudge else cls()
