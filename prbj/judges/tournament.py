"""A best-of-k item judged by a pairwise LLM judge: a round-robin tournament of A/B calls.

Every two candidates meet once (k(k−1)/2 matches; both orders each with `--order both`), through the very calls,
templates, cache and verdict parsing of a pair. Each match's positions are drawn like a pair's (p = 0.5, seeded
by the item, the two candidates and --seed), so the judge never learns which candidate the user preferred, and
a match disagreeing with itself across the two orders is a draw. A win counts 1, a draw ½ (Copeland's count);
the item is right when the preferred candidate has strictly the most wins, a tie when it shares the top, wrong
otherwise. Any failed call fails the item, as a failed call fails a pair.

Why a tournament rather than one prompt listing k answers under shuffled labels: it reuses the pairwise judge
as it is, so its prompts (the official ones under `--protocol official`), its position handling and its cache
keys stay those of pairs, and no new verdict format has to be parsed; the cost is k(k−1)/2 calls an item (6 for
PersonaMem's four options) instead of one.
"""

from __future__ import annotations

import asyncio
import random
from itertools import combinations
from typing import TYPE_CHECKING

from prbj.data.status import most_severe
from prbj.judges.base import Judgment, PairTask, verdict_from_scores

if TYPE_CHECKING:
    from prbj.judges.generative import ContextBlock, PairwiseLLMJudge, Usage, VerdictRead


def match_positions(item_id: str, first: int, second: int, seed: int) -> str:
    """Where candidate `first` stands in its match with `second` ("A" or "B"), fixed before any call."""
    return "A" if random.Random(f"{seed}:{item_id}:{first}-{second}").random() < 0.5 else "B"


async def judge_tournament(
    judge: PairwiseLLMJudge, task: PairTask, usage: Usage, block: ContextBlock
) -> Judgment:
    """The judgment of a best-of-k item (`task.pair.k` > 2) by `judge`'s A/B calls."""
    from prbj.judges.generative import Usage

    view, candidates = task.view, task.pair.candidates
    matches = list(combinations(range(len(candidates)), 2))
    asks = []
    for first, second in matches:
        positions = (
            ["A", "B"]
            if judge.order == "both"
            else [match_positions(view.pair_id, first, second, judge.order_seed)]
        )
        for position in positions:
            a, b = (first, second) if position == "A" else (second, first)
            part = Usage()
            asks.append(
                (first, second, a, part, judge._verdict(view, block, candidates[a], candidates[b], part))
            )
    reads: list[VerdictRead] = list(await asyncio.gather(*(ask for *_, ask in asks)))
    for *_, part, _ in asks:
        usage.absorb(part)
    status = most_severe(read.status for read in reads)
    if status != "ok":
        return judge._judgment(
            task,
            status=status,
            error="; ".join(r.error for r in reads if r.error) or None,
            cause=next((r.cause for r in reads if r.status == status), None),
            **usage.fields(),
        )
    won: dict[tuple[int, int], set[int]] = {}
    for (first, second, a, _, _), read in zip(asks, reads, strict=True):
        winner = a if read.letter == "A" else (second if a == first else first)
        won.setdefault((first, second), set()).add(winner)
    wins = [0.0] * len(candidates)
    for (first, second), winners in won.items():
        if len(winners) == 1:
            wins[winners.pop()] += 1.0
        else:  # the two orders disagree: a draw
            wins[first] += 0.5
            wins[second] += 0.5
    best_other = max(wins[1:])
    return judge._judgment(
        task,
        status="ok",
        verdict=verdict_from_scores(wins[0], best_other),
        score_chosen=wins[0],
        score_rejected=best_other,
        **usage.fields(),
    )
