"""The report's "What privacy costs" section: accuracy with clear text beside accuracy under a stricter
`--personal-data` policy, same judge, context and pairs, with McNemar's paired test (prbj.analysis.privacy_cost)."""

from __future__ import annotations

from collections.abc import Sequence

from prbj.analysis.privacy_cost import privacy_costs
from prbj.analysis.run_data import RunData
from prbj.report.fmt import p_value, percent, points
from prbj.report.layout import Section
from prbj.report.tables import TextTable


def privacy_sections(runs: Sequence[RunData]) -> list[Section]:
    """The section when the runs hold a judge run both with `any` and under another policy; else none."""
    costs = privacy_costs(runs)
    if not costs:
        return []
    rows = [
        [
            cost.judge,
            cost.context,
            cost.policy,
            str(cost.n),
            percent(cost.accuracy_clear),
            percent(cost.accuracy_guarded),
            points(cost.difference),
            f"{cost.test.lost} / {cost.test.gained}",
            p_value(cost.test.p_value),
            f"{cost.clear_run} → {cost.guarded_run}",
        ]
        for cost in costs
    ]
    table = TextTable(
        name="privacy-cost",
        title="Accuracy with clear text and under the policy",
        headers=[
            "judge",
            "context",
            "policy",
            "pairs",
            "any",
            "policy acc.",
            "Δ",
            "lost / gained",
            "p",
            "runs",
        ],
        rows=rows,
        numeric=[False, False, False, True, True, True, True, True, True, False],
        note="Δ = accuracy under the policy − accuracy with clear text, in points, on the pairs both runs "
        "answered; lost / gained: pairs right with clear text and wrong under the policy, and the reverse; p: "
        "McNemar's test on them (exact below 25 discordant pairs). Each user has one pair here, so pairs are "
        "users.",
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
