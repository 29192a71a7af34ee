"""What privacy costs in accuracy: the same judge, in the same context, on the same pairs, run once with
`--personal-data any` and once under a stricter policy (pseudonymized, usually), compared pair by pair as
`prbj show --compare` compares two runs (prbj.analysis.compare.compare_runs).

Only pairs both runs answered (status ok) count: a judgment that failed in one run says nothing about whether
pseudonyms changed the verdict. Where each user has one pair (Personalized RewardBench) pairs are users: the
interval resamples pairs and the test is McNemar's. Where users repeat (the per-user layout), one user's pairs
are not independent (the same profile, pseudonymized once, is read by all of them): the interval resamples users
with all their pairs and the test is Obuchowski's clustered McNemar test (prbj.analysis.clusters).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prbj.analysis.compare import Comparison, compare_runs, entry_label
from prbj.analysis.run_data import RunData

ANY = "any"
# The interval's seed when the clear run records none (as prbj show --compare does).
DEFAULT_SEED = 42


@dataclass(frozen=True, slots=True)
class PrivacyCost:
    judge: str
    context: str
    policy: str
    # The two runs, by id: the one that sent text as it is and the one under `policy`.
    clear_run: str
    guarded_run: str
    # The guarded run's entry against the clear one's: first = under the policy, second = clear text.
    comparison: Comparison

    @property
    def n(self) -> int:
        return self.comparison.n

    @property
    def accuracy_clear(self) -> float | None:
        return self.comparison.accuracy_second

    @property
    def accuracy_guarded(self) -> float | None:
        return self.comparison.accuracy_first

    @property
    def difference(self) -> float | None:
        """Accuracy under the policy − accuracy with clear text (negative: privacy cost accuracy)."""
        return self.comparison.difference

    @property
    def lost(self) -> int:
        """Pairs right with clear text and wrong under the policy."""
        return self.comparison.second_only

    @property
    def gained(self) -> int:
        return self.comparison.first_only

    @property
    def users(self) -> int | None:
        """How many users the interval and test resampled, where users repeat; None where pairs are users."""
        return self.comparison.users


def privacy_costs(runs: Sequence[RunData]) -> list[PrivacyCost]:
    """Every (judge, context) that ran on one dataset both with `any` and under another policy."""
    costs: list[PrivacyCost] = []
    for clear in runs:
        if clear.policy != ANY:
            continue
        seed = clear.summary.get("seed")
        for guarded in runs:
            policy = guarded.policy
            if policy == ANY or guarded.dataset.get("fingerprint") != clear.dataset.get("fingerprint"):
                continue
            entries = {
                entry_label(judge, context): (judge, context)
                for judge, context in guarded.judgments.select("judge", "context").unique().iter_rows()
            }
            comparisons = compare_runs(
                clear.judgments, guarded.judgments, seed=seed if isinstance(seed, int) else DEFAULT_SEED
            )
            costs.extend(
                PrivacyCost(*entries[c.first], policy, clear.run_id, guarded.run_id, c)
                for c in sorted(comparisons, key=lambda c: entries[c.first])
            )
    return costs
