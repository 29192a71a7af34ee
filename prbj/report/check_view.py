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


def check_table(report: CheckReport) -> Table:
    settings = report.settings
    table = Table(
        title=f"prbj check: {report.run} against {report.baseline}",
        caption=f"−/+: items lost/gained against the baseline. Fail = drop beyond "
        f"{settings.tolerance_points:g} pts AND McNemar p < {settings.alpha:g}"
        + (
            f"; or more than {fmt.percent(settings.max_error_rate)}% failed judgments"
            if settings.max_error_rate is not None
            else ""
        ),
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
