"""The report's "What privacy costs" section: accuracy with clear text beside accuracy under a stricter
`--personal-data` policy, same judge, context and pairs, with the paired interval and McNemar's test, over users
where users repeat (prbj.analysis.privacy_cost)."""

from __future__ import annotations

from collections.abc import Sequence

from prbj.analysis.privacy_cost import privacy_costs
from prbj.analysis.run_data import RunData
from prbj.report.fmt import DASH, p_value, percent, points
from prbj.report.layout import Section
from prbj.report.tables import TextTable


def privacy_sections(runs: Sequence[RunData]) -> list[Section]:
    """The section when the runs hold a judge run both with `any` and under another policy; else none."""
    costs = privacy_costs(runs)
    if not costs:
        return []
    clustered = any(cost.users is not None for cost in costs)
    rows = [
        [
            cost.judge,
            cost.context,
            cost.policy,
            str(cost.n),
            *([DASH if cost.users is None else str(cost.users)] if clustered else []),
            percent(cost.accuracy_clear),
            percent(cost.accuracy_guarded),
            points(cost.difference),
            _interval(cost.comparison.ci_low, cost.comparison.ci_high),
            f"{cost.lost} / {cost.gained}",
            p_value(cost.comparison.p_value),
            f"{cost.clear_run} → {cost.guarded_run}",
        ]
        for cost in costs
    ]
    headers = ["judge", "context", "policy", "pairs", *(["users"] if clustered else [])]
    headers += ["any", "policy acc.", "Δ", "95% CI (pp)", "lost / gained", "p", "runs"]
    table = TextTable(
        name="privacy-cost",
        title="Accuracy with clear text and under the policy",
        headers=headers,
        rows=rows,
        numeric=[name not in ("judge", "context", "policy", "runs") for name in headers],
        note="Δ = accuracy under the policy − accuracy with clear text, in points, on the pairs both runs "
        "answered, with its 95% bootstrap interval; lost / gained: pairs right with clear text and wrong under "
        "the policy, and the reverse; p: McNemar's test on them (exact below 25 discordant pairs)."
        + (
            " Users have several pairs here: the interval and p are over users (p: the exact sign-flip test "
            "under 50 users, Obuchowski's clustered McNemar from 50; — in the users column: each user has one "
            "pair, and pairs are users)."
            if clustered
            else " Each user has one pair here, so pairs are users."
        ),
    )
    return [
        Section(
            "privacy-cost",
            "What privacy costs",
            intro="The same judge on the same pairs, once sent the text as it is (--personal-data any) and once "
            "under a stricter policy (docs/privacy.md).",
            tables=[table],
        )
    ]


def _interval(low: float | None, high: float | None) -> str:
    return DASH if low is None or high is None else f"{points(low)}…{points(high)}"
