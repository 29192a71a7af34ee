"""What one record of the per-user layout becomes: judged items (a test record) or earlier choices (a history).

A record holds k ≥ 2 answers and how the user ranked them: chosen over rejected (k = 2), the preferred one of k,
a ranking (best first, in full or its top only), or a score per answer. A test record becomes

- **one best-of-k item** (`items = "k-way"`, the default): the preferred answer against all the others, judged
  right when it is ranked first; with scores the preferred answer is the top-scored one, and a record whose two
  best scores are within the card's `tie_margin` has no clear best (dropped, counted in a note);
- **pairs** (`items = "pairs"`): every two answers the user ranked apart, the better one chosen: from scores,
  every two answers more than `tie_margin` apart (closer ones are a tie: no pair, counted); from a ranking, each
  ranked answer over every answer ranked below it or not ranked; from a preferred answer, it over each other.

A history record always gives pairs, by the same rules: the earlier choices a judge is shown. Two answers that are
the same text (PRISM's two samples of one model, two replies written as `EMPTY STRING`) make no pair and no item:
a judge cannot prefer a text over itself; they are dropped and counted in a note.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, get_args

from prbj.data.schema import Preference

ItemKind = Literal["k-way", "pairs"]
ITEM_KINDS: tuple[str, ...] = get_args(ItemKind)


@dataclass(frozen=True)
class ItemRule:
    """How a record of several answers is judged, and how far apart two scores must be to rank them."""

    items: ItemKind = "k-way"
    tie_margin: float = 0.0


@dataclass(frozen=True, slots=True)
class RankedAnswers:
    """A record's answers and the user's ranking of them: `ranking` holds indexes best first (for chosen over
    rejected: (0, 1)); `scores`, when given instead, one number per answer."""

    answers: tuple[str, ...]
    ranking: tuple[int, ...] = ()
    scores: tuple[float, ...] | None = None

    @property
    def is_pair(self) -> bool:
        return len(self.answers) == 2 and self.scores is None


@dataclass
class ItemCounts:
    """What was dropped while making items, for the notes a run prints."""

    identical: int = 0
    ties: int = 0
    unclear: int = 0
    # The card's tie_margin, which the notes name.
    margin: float = 0.0

    def notes(self) -> list[str]:
        notes: list[str] = []
        if self.ties:
            within = f" (scores {self.margin:g} points apart or closer)" if self.margin else ""
            notes.append(
                f"{self.ties} tied rating{'s' if self.ties != 1 else ''}{within} made no pair (dropped)"
            )
        if self.unclear:
            notes.append(
                f"{self.unclear} record{'s' if self.unclear != 1 else ''} of several answers had no clear best "
                f"(the top two scores {self.margin:g} points apart or closer) and made no item (dropped)"
            )
        if self.identical:
            notes.append(
                f"{self.identical} pair{'s' if self.identical != 1 else ''} of identical answers made no pair "
                "(dropped: a judge cannot prefer a text over itself)"
            )
        return notes


def _same(a: str, b: str) -> bool:
    return a is b or a == b or a.strip() == b.strip()


def ordered_pairs(ranked: RankedAnswers, margin: float, counts: ItemCounts) -> Iterator[tuple[int, int]]:
    """(better, worse) index pairs of every two answers the user ranked apart, in the record's order."""
    answers = ranked.answers
    if ranked.scores is not None:
        scores = ranked.scores
        for i in range(len(answers)):
            for j in range(i + 1, len(answers)):
                if abs(scores[i] - scores[j]) <= margin:
                    counts.ties += 1
                    continue
                yield (i, j) if scores[i] > scores[j] else (j, i)
        return
    ranked_set = set(ranked.ranking)
    unranked = [i for i in range(len(answers)) if i not in ranked_set]
    for place, better in enumerate(ranked.ranking):
        for worse in (*ranked.ranking[place + 1 :], *unranked):
            yield better, worse


def _kept(
    ranked: RankedAnswers, pairs: Iterator[tuple[int, int]], counts: ItemCounts
) -> list[tuple[int, int]]:
    kept = []
    for better, worse in pairs:
        if _same(ranked.answers[better], ranked.answers[worse]):
            counts.identical += 1
        else:
            kept.append((better, worse))
    return kept


def history_of(
    row_id: str, prompt: str, ranked: RankedAnswers, rule: ItemRule, counts: ItemCounts
) -> list[Preference]:
    """The earlier choices a history record makes: one per pair the user ranked apart."""
    answers = ranked.answers
    kept = _kept(ranked, ordered_pairs(ranked, rule.tie_margin, counts), counts)
    if len(kept) == 1 and ranked.is_pair:
        return [Preference(row_id, prompt, answers[kept[0][0]], answers[kept[0][1]])]
    return [
        Preference(f"{row_id}-{n}", prompt, answers[b], answers[w]) for n, (b, w) in enumerate(kept, start=1)
    ]


# An item: (id, chosen, rejected, the other candidates of a best-of-k item).
Item = tuple[str, str, str, tuple[str, ...]]


def items_of(row_id: str, ranked: RankedAnswers, rule: ItemRule, counts: ItemCounts) -> list[Item]:
    """What a test record is judged as: one pair, one best-of-k item, or pairs (see the module's rules)."""
    answers = ranked.answers
    if ranked.is_pair or rule.items == "pairs":
        kept = _kept(ranked, ordered_pairs(ranked, rule.tie_margin, counts), counts)
        if ranked.is_pair:
            return [(row_id, answers[b], answers[w], ()) for b, w in kept]
        return [(f"{row_id}-{n}", answers[b], answers[w], ()) for n, (b, w) in enumerate(kept, start=1)]
    best = _best(ranked, rule.tie_margin, counts)
    if best is None:
        return []
    others = [answer for i, answer in enumerate(answers) if i != best]
    if any(_same(answers[best], other) for other in others):
        counts.identical += 1
        return []
    return [(row_id, answers[best], others[0], tuple(others[1:]))]


def _best(ranked: RankedAnswers, margin: float, counts: ItemCounts) -> int | None:
    """The preferred answer's index: the ranking's first, or the top score when it is clear of the runner-up."""
    scores = ranked.scores
    if scores is None:
        return ranked.ranking[0]
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    top, second = scores[order[0]], scores[order[1]]
    if top - second <= margin:
        counts.unclear += 1
        return None
    return order[0]
