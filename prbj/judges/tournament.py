"""A best-of-k item judged by a judge shown two answers at once (a pairwise LLM judge, any PairwiseJudge): a
round-robin tournament of its A/B reads.

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
from collections.abc import Awaitable, Callable, Iterable
from itertools import combinations
from typing import Any, Protocol

from prbj.data.status import Status, most_severe
from prbj.judges.base import Judgment, PairTask, best_of
from prbj.judges.positions import seeded_position


class Counted(Protocol):
    """The calls one order of one match made (prbj.judges.generative.Usage)."""

    def absorb(self, other: Any) -> None: ...

    def fields(self) -> dict[str, Any]: ...


class Read(Protocol):
    """What one A/B call ended in (prbj.judges.generative.VerdictRead)."""

    @property
    def status(self) -> Status: ...

    @property
    def letter(self) -> str | None: ...

    @property
    def error(self) -> str | None: ...

    @property
    def cause(self) -> str | None: ...


# (answer in A, answer in B, where its calls are counted) → the call's reading
Ask = Callable[[str, str, Any], Awaitable[Read]]


def match_positions(item_id: str, first: int, second: int, seed: int) -> str:
    """Where candidate `first` stands in its match with `second` ("A" or "B"), fixed before any call: drawn as
    a pair's position is, from the item and the two candidates."""
    return seeded_position(seed, f"{item_id}:{first}-{second}")


def joined_errors(reads: Iterable[Read]) -> str | None:
    """The reads' error messages, each once, in order (orders or matches that failed alike say it once)."""
    return "; ".join(dict.fromkeys(r.error for r in reads if r.error)) or None


class _Uncounted:
    """For a judge whose calls cost nothing to count (a plugin's `prefer`)."""

    def absorb(self, other: Any) -> None:
        return None

    def fields(self) -> dict[str, Any]:
        return {}


async def judge_tournament(
    task: PairTask,
    *,
    ask: Ask,
    both_orders: bool,
    seed: int,
    judgment: Callable[..., Judgment],
    usage: Counted | None = None,
    new_usage: Callable[[], Counted] = _Uncounted,
) -> Judgment:
    """The judgment of a best-of-k item (`task.pair.k` > 2) by a pairwise judge's A/B reads (`ask`), their calls
    counted in `usage` (an LLM judge's) when given."""
    usage = usage if usage is not None else _Uncounted()
    view, candidates = task.view, task.pair.candidates
    matches = list(combinations(range(len(candidates)), 2))
    asked: list[tuple[int, int, int, Counted]] = []
    calls = []
    for first, second in matches:
        positions = ["A", "B"] if both_orders else [match_positions(view.pair_id, first, second, seed)]
        for position in positions:
            a, b = (first, second) if position == "A" else (second, first)
            part = new_usage()
            asked.append((first, second, a, part))
            calls.append(ask(candidates[a], candidates[b], part))
    reads: list[Read] = list(await asyncio.gather(*calls))
    for *_, part in asked:
        usage.absorb(part)
    status = most_severe(read.status for read in reads)
    if status != "ok":
        return judgment(
            task,
            status=status,
            error=joined_errors(reads),
            cause=next((r.cause for r in reads if r.status == status), None),
            **usage.fields(),
        )
    won: dict[tuple[int, int], set[int]] = {}
    for (first, second, a, _), read in zip(asked, reads, strict=True):
        winner = a if read.letter == "A" else (second if a == first else first)
        won.setdefault((first, second), set()).add(winner)
    wins = [0.0] * len(candidates)
    for (first, second), winners in won.items():
        if len(winners) == 1:
            wins[winners.pop()] += 1.0
        else:  # the two orders disagree: a draw
            wins[first] += 0.5
            wins[second] += 0.5
    verdict, chosen, best_other = best_of(wins)
    return judgment(
        task,
        status="ok",
        verdict=verdict,
        score_chosen=chosen,
        score_rejected=best_other,
        **usage.fields(),
    )
