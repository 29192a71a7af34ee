"""The answer order of every judge shown both answers at once (an LLM's A/B prompt, a plugin RM's `prefer`):
where the chosen answer stands, in one order or in both, and what the reads of the orders shown add up to.

`PairwiseJudge` is the one place this is decided, so `--order`, a benchmark card's `[protocol] order` (which the
command turns into `--order`'s default) and the official PRB stream (`--protocol official` on PRB) mean the same
for every such judge: a subclass reads one shown order (`read_order`) and the base class draws the positions
(`prepare`), asks each order (`judge`) and combines the reads (`combine_reads`) into one judgment, with the verdict
of each order kept (`verdict_chosen_a`, `verdict_chosen_b`) for position bias and for a protocol that counts each
order as a judgment of its own (prbj.analysis.headline).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from prbj.data.schema import Pair
from prbj.data.status import Status, most_severe
from prbj.judges.base import Judge, Judgment, PairTask, Verdict
from prbj.judges.official import Protocol, official_positions
from prbj.judges.positions import seeded_position
from prbj.judges.tournament import joined_errors, judge_tournament

OrderMode = Literal["random", "both"]
# The A/B assignment is drawn with p = 0.5 from this seed (the official scripts' seed too); how it is drawn
# depends on the protocol (assign_positions, or prbj.judges.official.official_positions).
DEFAULT_ORDER_SEED = 42
BOTH: OrderMode = "both"


def assign_positions(pair_ids: Sequence[str], seed: int) -> dict[str, str]:
    """Where the chosen answer goes for each pair (p = 0.5), fixed before any call.

    The official script draws from one seeded stream in dataset order, so a pair's position changes with
    --subset or --limit and cached verdicts stop matching. Here each pair gets its own stream seeded by
    (seed, pair id): the same pair always lands in the same position, whatever else is selected."""
    return {pair_id: seeded_position(seed, pair_id) for pair_id in pair_ids}


def draw_positions(pairs: Sequence[Pair], order: OrderMode, protocol: Protocol, seed: int) -> dict[str, str]:
    """Where each pair's chosen answer is shown (A or B) under `order`, drawn as `protocol` draws it; none under
    `both`, where every pair is asked in both orders. Every judge that shows two answers at once draws here
    (PairwiseJudge, and a Python reward model's `prefer`, which asks its orders in one batch)."""
    if order == BOTH:
        return {}
    if protocol == "official":
        return official_positions(pairs, seed)
    return assign_positions([p.id for p in pairs], seed)


@dataclass(frozen=True)
class OrderRead:
    """What one shown order ended in: the letter picked ("A" or "B"), a tie (`ok` with no letter: a plugin's
    `prefer` of exactly 1/2), or a failure."""

    status: Status
    letter: str | None = None
    error: str | None = None
    # P("A") when the judge gives one (an LLM's verdict-token log-probabilities, a plugin's `prefer`).
    probability_of_a: float | None = None
    # Why it failed, in the words failures are counted by (see prbj.llm.reading).
    cause: str | None = None


@dataclass(frozen=True)
class Combined:
    """The reads of a pair's shown orders as one judgment's fields."""

    status: Status
    verdict: Verdict | None
    chosen_position: str
    verdict_chosen_a: str | None
    verdict_chosen_b: str | None
    error: str | None
    cause: str | None
    # P(the chosen answer is better): the mean over the orders shown, when every order gave one.
    p_chosen: float | None

    def fields(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "verdict": self.verdict,
            "chosen_position": self.chosen_position,
            "verdict_chosen_a": self.verdict_chosen_a,
            "verdict_chosen_b": self.verdict_chosen_b,
            "error": self.error,
            "cause": self.cause,
        }


def shown(pair: Pair, position: str) -> tuple[str, str]:
    """The answers as shown when the chosen one stands in `position`: (A, B)."""
    return (pair.chosen, pair.rejected) if position == "A" else (pair.rejected, pair.chosen)


def combine_reads(positions: Sequence[str], reads: Sequence[OrderRead]) -> Combined:
    """One judgment from the reads of the orders shown (aligned with `positions`). Each order's pick is kept
    even when the other failed; the judgment is `ok` only when every order was, and then its verdict is the
    pick every order agrees on (`chosen`, `rejected` or `tie`), else `inconsistent`."""
    picks: dict[str, str] = {}
    probabilities: list[float] = []
    for position, read in zip(positions, reads, strict=True):
        if read.letter is not None:
            picks[position] = "chosen" if read.letter == position else "rejected"
        elif read.status == "ok":
            picks[position] = "tie"
        p_a = read.probability_of_a
        if p_a is not None:
            # P(the chosen answer is better) in this order: P(A) when it stood in A, else P(B).
            probabilities.append(p_a if position == "A" else 1.0 - p_a)
    status = most_severe(r.status for r in reads)
    verdict: Verdict | None = None
    if status == "ok":
        values = set(picks.values())
        verdict = cast(Verdict, values.pop()) if len(values) == 1 else "inconsistent"
    every = status == "ok" and len(probabilities) == len(positions)
    return Combined(
        status=status,
        verdict=verdict,
        chosen_position=BOTH if len(positions) > 1 else positions[0],
        verdict_chosen_a=picks.get("A"),
        verdict_chosen_b=picks.get("B"),
        error=joined_errors(reads),
        cause=next((r.cause for r in reads if r.status == status), None),
        p_chosen=sum(probabilities) / len(positions) if every else None,
    )


def shown_orders(pair: Pair, order: OrderMode, positions: dict[str, str]) -> list[str]:
    """Where the chosen answer stands in each order `pair` is shown in: A then B under `both`, else the position
    drawn for it (draw_positions; A for a pair drawn none)."""
    return ["A", "B"] if order == BOTH else [positions.get(pair.id, "A")]


class PairwiseJudge(Judge):
    """A judge shown both answers at once, as A and B. Subclasses read one shown order; the order plan (one
    order drawn per pair, or both) and the combination of the orders are this class's."""

    order: OrderMode = "random"
    order_seed: int = DEFAULT_ORDER_SEED
    # Under the official PRB protocol the positions come from the official script's stream.
    protocol: Protocol = "prbj"

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "order": self.order, "order_seed": self.order_seed}

    def prepare(self, pairs: Sequence[Pair]) -> None:
        self.positions: dict[str, str] = draw_positions(pairs, self.order, self.protocol, self.order_seed)

    def orders(self, pair: Pair) -> list[str]:
        """Where the chosen answer stands in each order this pair is shown in."""
        return shown_orders(pair, self.order, getattr(self, "positions", {}))

    async def read_order(self, task: PairTask, first: str, second: str) -> OrderRead:
        """The judge's pick with `first` shown as A and `second` as B."""
        raise NotImplementedError(f"{type(self).__name__} reads no order of its own")

    async def judge(self, task: PairTask) -> Judgment:
        if task.pair.others:
            # A best-of-k item: a round-robin of the judge's A/B reads (prbj.judges.tournament).
            return await judge_tournament(
                task,
                ask=lambda first, second, _: self.read_order(task, first, second),
                both_orders=self.order == BOTH,
                seed=self.order_seed,
                judgment=self._judgment,
            )
        positions = self.orders(task.pair)
        reads = [await self.read_order(task, *shown(task.pair, p)) for p in positions]
        combined = combine_reads(positions, reads)
        extra = {} if combined.p_chosen is None else {"p_chosen": combined.p_chosen}
        return self._judgment(task, **combined.fields(), extra=extra)
