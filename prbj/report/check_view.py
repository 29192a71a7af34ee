"""`prbj check` results for people (a Rich table) and for machines (JSON)."""

from __future__ import annotations

import json

from rich import box
from rich.console import Console
from rich.table import Table

from prbj.analysis.check import CheckReport
from prbj.display.fit import FittingTable
from prbj.report import fmt

_STATUS_STYLE = {
    "pass": "[green]PASS[/green]",
    "warn": "[yellow]WARN[/yellow]",
    "fail": "[bold red]FAIL[/bold red]",
}


def check_json(report: CheckReport) -> str:
    return json.dumps(report.as_dict(), indent=2, ensure_ascii=False, allow_nan=False)


# The headline a group gated on (GroupCheck.figure), as the caption names it.
_FIGURES = {"users": "user accuracy", "judgments": "accuracy over judgments", "official": "official figure"}


def _caption(report: CheckReport) -> str:
    """What the columns and the verdict mean for the figure gated and the test that decided (prbj.analysis.check:
    McNemar over items; over users where users repeat; the sign-flip test over users on any other headline)."""
    settings = report.settings
    figures = sorted({_FIGURES.get(group.figure, group.figure) for group in report.groups} - {"accuracy"})
    over_users = "; the tolerance alone where too few users differ for any p to reach it"
    if figures:
        who, figure, test = "users", " or ".join(figures), "the sign-flip test over users"
    elif any(group.test in ("sign-flip", "clustered") for group in report.groups):
        who, figure, test = "items", "accuracy", "the paired test over users"
    else:
        who, figure, test, over_users = "items", "accuracy", "McNemar", ""
    failed = (
        f"; or more than {fmt.percent(settings.max_error_rate)}% failed judgments"
        if settings.max_error_rate is not None
        else ""
    )
    return (
        f"−/+: {who} lost/gained against the baseline. Fail = {figure} dropped beyond "
        f"{settings.tolerance_points:g} pts AND p < {settings.alpha:g} ({test}{over_users}){failed}"
    )


def check_table(report: CheckReport) -> Table:
    table = Table(
        title=f"prbj check: {report.run} against {report.baseline}",
        caption=_caption(report),
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for header, numeric in (
        ("judge", False),
        ("context", False),
        ("subset", False),
        ("base %", True),
        ("run %", True),
        ("Δ pts", True),
        ("−/+", True),
        ("p", True),
        ("failed %", True),
        ("verdict", False),
    ):
        table.add_column(header, justify="right" if numeric else "left", no_wrap=not numeric)
    for group in report.groups:
        table.add_row(
            group.judge,
            group.context,
            fmt.short_subset(group.subset) if group.subset != "all" else "all",
            fmt.percent(group.baseline_accuracy),
            fmt.percent(group.accuracy),
            fmt.DASH if group.delta_points is None else fmt.points(group.delta_points / 100),
            f"{group.lost}/{group.gained}",
            fmt.p_value(group.p_value),
            fmt.percent(group.error_rate),
            _STATUS_STYLE[group.status],
        )
    return table


def print_check(report: CheckReport, console: Console) -> None:
    console.print(FittingTable(check_table(report), key_columns=3))
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    for failure in report.failures:
        console.print(f"[bold red]FAIL:[/bold red] {failure}", highlight=False)
    if report.spent_usd is not None:
        console.print(f"spent: {fmt.usd(report.spent_usd)}", highlight=False)
    if report.passed:
        console.print(f"[green]passed[/green]: {len(report.groups)} groups checked", highlight=False)
    else:
        console.print(
            f"[bold red]regression[/bold red]: {len(report.failures)} failure(s) in {len(report.groups)} groups",
            highlight=False,
        )
