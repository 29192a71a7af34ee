"""The report's per-user section: accuracy per group value (every `group:<key>` column of a per-user benchmark)
and for seen and unseen users, pair accuracy beside user accuracy, each with its interval. Computed from the
runs in memory with prbj.analysis.users, the function that fills summary.json's `users` section; a section
appears only when a run has groups or a seen column."""

from __future__ import annotations

from collections.abc import Sequence

from prbj.analysis.run_data import RunData
from prbj.analysis.user_counts import group_columns, users_repeat
from prbj.analysis.users import UserSlice, group_slices
from prbj.data.user_columns import USER_SEEN
from prbj.report import fmt
from prbj.report.layout import Section
from prbj.report.tables import TextTable

_INTRO = (
    "Pairs: accuracy over the decided pairs of the group. Users: each user's accuracy over their decided pairs "
    "in the group, averaged over its users. Intervals are 95% bootstrap intervals, over users where users have "
    "several pairs."
)


def slice_table(name: str, title: str, rows: Sequence[tuple[str, UserSlice]], *, several: bool) -> TextTable:
    """(run label, row) pairs as a table; the run column only when the report has several runs."""
    headers = ["judge", "context", *(["run"] if several else []), "group", "value", "users", "pairs"]
    headers += ["pairs % (95% CI)", "users % (95% CI)"]
    return TextTable(
        name,
        title,
        headers,
        [
            [
                r.judge,
                r.context,
                *([run] if several else []),
                r.group,
                r.value,
                str(r.n_users_decided),
                str(r.n_ok),
                fmt.with_span(r.accuracy, r.ci_low, r.ci_high),
                fmt.with_span(r.user_accuracy, r.user_ci_low, r.user_ci_high),
            ]
            for run, r in rows
        ],
        [False, False, *([False] if several else []), False, False, True, True, True, True],
        "users and pairs: those with at least one decided judgment in the group.",
    )


def user_sections(runs: Sequence[RunData], labels: Sequence[str]) -> list[Section]:
    """One section, when some run has groups or seen/unseen users: a table of every run's group rows, and one
    of seen and unseen users."""
    groups: list[tuple[str, UserSlice]] = []
    seen: list[tuple[str, UserSlice]] = []
    for run, label in zip(runs, labels, strict=True):
        frame = run.judgments
        if frame.height == 0:
            continue
        seed = run.summary.get("seed")
        seed = seed if isinstance(seed, int) else 42
        repeat = users_repeat(frame)
        if columns := group_columns(frame):
            groups += [(label, row) for row in group_slices(frame, columns, seed=seed, repeat=repeat)]
        if USER_SEEN in frame.columns and frame[USER_SEEN].drop_nulls().len():
            seen += [(label, row) for row in group_slices(frame, [USER_SEEN], seed=seed, repeat=repeat)]
    several = len(runs) > 1
    tables = []
    if groups:
        tables.append(slice_table("groups", "Accuracy by group", groups, several=several))
    if seen:
        tables.append(slice_table("seen", "Seen and unseen users", seen, several=several))
    return [Section("users", "Users", intro=_INTRO, tables=tables)] if tables else []
