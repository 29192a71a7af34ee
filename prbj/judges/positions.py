"""Where an answer is shown, drawn from --seed: one fair coin per key, so that a pair (or a best-of-k item's
match) lands in the same place whatever else is judged, in every judge and page that draws it."""

from __future__ import annotations

import random


def seeded_position(seed: int, key: str) -> str:
    """ "A" or "B" with p = 1/2, from the seed and the key (a pair id; an item and two candidates) alone."""
    return "A" if random.Random(f"{seed}:{key}").random() < 0.5 else "B"
