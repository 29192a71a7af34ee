"""What privacy costs in accuracy: the same judge, in the same context, on the same pairs, run once with
`--personal-data any` and once under a stricter policy (pseudonymized, usually), compared pair by pair with
McNemar's test.

Only pairs both runs answered (status ok) count: a judgment that failed in one run says nothing about whether
pseudonyms changed the verdict. On Personalized RewardBench each user has one pair, so pairs are users; a
user-level test for data where users repeat is left to the per-user analysis.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import polars as pl

from prbj.analysis.mcnemar import McNemarResult, paired_test
from prbj.analysis.run_data import RunData

ANY = "any"


@dataclass(frozen=True, slots=True)
class PrivacyCost:
    judge: str
    context: str
    policy: str
    # The two runs, by id: the one that sent text as it is and the one under `policy`.
    clear_run: str
    guarded_run: str
    n: int
    accuracy_clear: float | None
    accuracy_guarded: float | None
    test: McNemarResult

    @property
    def difference(self) -> float | None:
        """Accuracy under the policy − accuracy with clear text (negative: privacy cost accuracy)."""
        if self.accuracy_clear is None or self.accuracy_guarded is None:
            return None
        return self.accuracy_guarded - self.accuracy_clear


def policy_of(run: RunData) -> str:
    """The run's --personal-data (runs made before it existed sent text as it is: `any`)."""
    privacy = run.run.get("privacy")
    stated = privacy.get("personal_data") if isinstance(privacy, dict) else None
    return str(stated) if stated else ANY


def privacy_costs(runs: Sequence[RunData]) -> list[PrivacyCost]:
    """Every (judge, context) that ran on one dataset both with `any` and under another policy."""
    costs: list[PrivacyCost] = []
    for clear in runs:
        if policy_of(clear) != ANY:
            continue
        for guarded in runs:
            policy = policy_of(guarded)
            if policy == ANY or guarded.dataset.get("fingerprint") != clear.dataset.get("fingerprint"):
                continue
            clear_outcomes, guarded_outcomes = _outcomes(clear.judgments), _outcomes(guarded.judgments)
            for judge, context in sorted(clear_outcomes.keys() & guarded_outcomes.keys()):
                before, after = clear_outcomes[judge, context], guarded_outcomes[judge, context]
                shared = before.keys() & after.keys()
                n, test = paired_test(before, after)
                costs.append(
                    PrivacyCost(
                        judge=judge,
                        context=context,
                        policy=policy,
                        clear_run=clear.run_id,
                        guarded_run=guarded.run_id,
                        n=n,
                        accuracy_clear=_share(before[k] for k in shared) if n else None,
                        accuracy_guarded=_share(after[k] for k in shared) if n else None,
                        test=test,
                    )
                )
    return costs


def _outcomes(frame: pl.DataFrame) -> dict[tuple[str, str], dict[str, bool]]:
    """Per (judge, context), pair id → correct, over the judgments that ended ok."""
    table: dict[tuple[str, str], dict[str, bool]] = {}
    ok = frame.filter(pl.col("status") == "ok").select("judge", "context", "pair_id", "correct")
    for judge, context, pair_id, correct in ok.iter_rows():
        table.setdefault((judge, context), {})[pair_id] = bool(correct)
    return table


def _share(flags: Iterable[bool]) -> float:
    values = list(flags)
    return sum(values) / len(values)
