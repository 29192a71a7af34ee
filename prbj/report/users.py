"""The report's per-user section: accuracy per group value (every `group:<key>` column of a per-user benchmark)
and for seen and unseen users, pair accuracy beside user accuracy, each with its interval. Computed from the
runs in memory with prbj.analysis.users, the function that fills summary.json's `users` section; a section
appears only when a run has groups or a seen column."""

from __future__ import annotations

from collections.abc import Sequence

from prbj.analysis.group_contrasts import FEW_USERS
from prbj.analysis.run_data import RunData
from prbj.analysis.user_counts import group_columns, users_repeat
from prbj.analysis.users import UserSlice, group_slices
from prbj.data.user_columns import USER_SEEN
from prbj.report import fmt
from prbj.report.layout import Section
from prbj.report.tables import TextTable

# Marks a group row of fewer than FEW_USERS users.
FEW_MARK = "†"

_INTRO = (
    "Pairs: accuracy over the decided pairs of the group. Users: each user's accuracy over their decided pairs "
    "in the group, averaged over its users. 95% intervals over users where users have several pairs (none under "
    "2 users; from effective sizes under 50). vs rest: the value against the rest of the key's users, in user "
    "accuracy for a property of the user and pair accuracy for a property of the pair, with a permutation "
    "test that keeps each user's pairs together, Holm-adjusted across the key's values: compare groups "
    "through it, not by eye."
)


def slice_table(name: str, title: str, rows: Sequence[tuple[str, UserSlice]], *, several: bool) -> TextTable:
    """(run label, row) pairs as a table; the run column only when the report has several runs."""
    headers = ["judge", "context", *(["run"] if several else []), "group", "value", "users", "pairs"]
    headers += ["pairs % (95% CI)", "users % (95% CI)", "vs rest (pp, Holm p)"]
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
                f"{r.n_users_decided}{FEW_MARK if r.few_users else ''}",
                str(r.n_ok),
                fmt.with_span(r.accuracy, r.ci_low, r.ci_high),
                fmt.with_span(r.user_accuracy, r.user_ci_low, r.user_ci_high),
                _versus(r),
            ]
            for run, r in rows
        ],
        [False, False, *([False] if several else []), False, False, True, True, True, True, True],
        f"users and pairs: those with at least one decided judgment in the group; {FEW_MARK} fewer than "
        f"{FEW_USERS} users: too few to rank by eye.",
    )


def _versus(row: UserSlice) -> str:
    if row.vs_rest is None or row.vs_rest_p_holm is None:
        return fmt.DASH
    return f"{fmt.points(row.vs_rest)} (p={row.vs_rest_p_holm:.2g})"


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
