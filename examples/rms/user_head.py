"""A per-user reward head over a frozen sentence embedding, fitted from each user's own earlier choices.

The shape of LoRe and PAL: every user's reward is a linear function of a representation shared by all users,
r_u(y) = w_u · φ(y), and only w_u is learnt per user, from a handful of their preferences. Here φ is WordLlama
(its weights ship inside the `wordllama` wheel: offline, CPU, milliseconds), and w_u is a Bradley-Terry logistic
regression, P(chosen ≻ rejected) = σ(w_u · (φ(chosen) − φ(rejected))), with an L2 penalty, fitted in `fit_user`.

A user without history (Personalized RewardBench has past posts, not earlier choices) is scored by the cosine
between the answer and what the persona says about them.

    prbj judge -p py:examples/rms/user_head.py:UserHead --dataset examples/rms/tastes.jsonl
"""

from __future__ import annotations

import numpy as np
import wordllama
from wordllama import WordLlama

from prbj import HistoryItem, ScoreItem


class UserHead:
    name = "user-head"
    version = "1"
    # The L2 penalty, gradient steps and step size of each user's logistic regression.
    l2 = 0.05
    steps = 300
    learning_rate = 2.0

    def __init__(self) -> None:
        weights = wordllama.__path__[0]  # shipped in the wheel: never downloaded
        self.embedder = WordLlama.load(cache_dir=weights, disable_download=True)
        self.heads: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.embedder.embed(texts, norm=True), dtype=np.float64)

    def fit_user(self, user_id: str, history: list[HistoryItem]) -> None:
        if not history:
            return
        chosen = self.embed([h.chosen for h in history])
        margins = chosen - self.embed([h.rejected for h in history])
        weights = np.zeros(margins.shape[1])
        for _ in range(self.steps):
            # 1 − P(chosen ≻ rejected), per earlier choice
            wrong = 1.0 / (1.0 + np.exp(margins @ weights))
            gradient = -(wrong @ margins) / len(history) + self.l2 * weights
            weights -= self.learning_rate * gradient
        self.heads[user_id] = weights

    def score(self, items: list[ScoreItem]) -> list[float]:
        answers = self.embed([item.response for item in items])
        personas = [item.persona or "" for item in items]
        described = self.embed(personas) if any(personas) else None
        scores = []
        for index, item in enumerate(items):
            head = self.heads.get(item.user_id)
            if head is not None:
                scores.append(float(answers[index] @ head))
            elif described is not None and personas[index]:
                scores.append(float(answers[index] @ described[index]))
            else:
                scores.append(0.0)
        return scores
