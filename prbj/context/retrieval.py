"""Lexical relevance between texts: a small Okapi BM25 used to rank profile posts and score profile affinity."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from prbj.data.schema import ProfilePost

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

# Function words carry no evidence about a person's interests; dropping them keeps BM25 about content.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves i'm it's don't i've you're that's""".split()
)


def tokenize(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


@dataclass
class BM25:
    """Okapi BM25 over a small corpus, with the non-negative IDF of Lucene so rare and common terms both count."""

    documents: Sequence[Sequence[str]]
    k1: float = 1.2
    b: float = 0.75
    _doc_freq: Counter[str] = field(init=False, repr=False)
    _avg_len: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._doc_freq = Counter(term for doc in self.documents for term in set(doc))
        total = sum(len(doc) for doc in self.documents)
        self._avg_len = total / len(self.documents) if self.documents else 0.0
        self._term_freqs = [Counter(doc) for doc in self.documents]

    def idf(self, term: str) -> float:
        n = len(self.documents)
        df = self._doc_freq.get(term, 0)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def scores(self, query: Sequence[str]) -> list[float]:
        """BM25 score of `query` against every document, in corpus order."""
        results = []
        for doc, freqs in zip(self.documents, self._term_freqs, strict=True):
            norm = self.k1 * (1 - self.b + self.b * len(doc) / self._avg_len) if self._avg_len else self.k1
            score = 0.0
            for term in set(query):
                tf = freqs.get(term, 0)
                if tf:
                    score += self.idf(term) * tf * (self.k1 + 1) / (tf + norm)
            results.append(score)
        return results


def rank_profile(question: str, profile: Sequence[ProfilePost], k: int | None = None) -> list[ProfilePost]:
    """Profile posts ordered by BM25 relevance to the question (ties keep the original order), top `k`."""
    if not profile:
        return []
    index = BM25([tokenize(p.text) for p in profile])
    scores = index.scores(tokenize(question))
    order = sorted(range(len(profile)), key=lambda i: (-scores[i], i))
    ranked = [profile[i] for i in order]
    return ranked if k is None else ranked[:k]
