"""`prbj run` behind the CLI: load the experiment, then run it, plan it (--dry-run) or show its manifest."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich import box
from rich.table import Table

from prbj.display.fit import FittingTable
from prbj.display.width import output_console
from prbj.experiments.commandline import CommandLine
from prbj.experiments.dry_run import plan_stages
from prbj.experiments.needs import missing_extra
from prbj.experiments.runner import Runner, RunOptions
from prbj.experiments.schema import load_experiment
from prbj.experiments.stages import Stage
from prbj.experiments.usage import StageUsage, totals
from prbj.report.terminal import print_missing_keys

EXPERIMENTS_FOLDER = Path("reports") / "experiments"


def run_experiment_command(
    path: Path,
    cli: CommandLine,
    *,
    out: Path | None,
    only: str | None,
    status: bool,
    dry_run: bool,
    progress: bool,
) -> int:
    experiment = load_experiment(path, cli)
    directory = out if out is not None else EXPERIMENTS_FOLDER / experiment.name
    console = output_console()
    runner = Runner(experiment, cli, directory, console=console, options=RunOptions(dry_run, only, progress))
    if status:
        console.print(status_table(runner))
        return 0
    if dry_run:
        plans, missing, estimate = plan_stages(runner)
        console.print(FittingTable(plan_table(plans), key_columns=1))
        for stage, usage in plans:
            if usage.local_answers:
                console.print(f"[dim]{stage.name}: {usage.local_answers:,} answers {usage.note}[/dim]")
            elif usage.note:
                console.print(f"[dim]{stage.name}: {usage.note}[/dim]")
        if estimate:
            console.print(f"[yellow]{estimate}[/yellow]")
        print_missing_keys(missing, console)
        lacking = missing_extra(experiment, runner.stages)
        if lacking is not None:  # the plan holds; the run would stop at once
            console.print(f"a real run stops here: {lacking}", style="yellow", markup=False, soft_wrap=True)
        return 0
    return runner.run()


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _row(name: str, usage: StageUsage, seconds: float) -> list[str]:
    mark = "≤" if usage.bound else ""
    plans = usage.providers
    return [
        name,
        f"{mark}{usage.planned_calls:,}",
        f"{sum(p.cached for p in plans):,}",
        f"{sum(p.prompt_tokens for p in plans):,}",
        f"{sum(p.completion_tokens for p in plans):,}",
        f"{usage.planned_cost_usd:.4f}",
        f"{usage.planned_batch_cost_usd:.4f}",
        _duration(seconds),
    ]


def plan_table(plans: Sequence[tuple[Stage, StageUsage]]) -> Table:
    table = Table(
        title="Experiment plan (nothing sent)", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False
    )
    table.add_column("stage", style="bold", no_wrap=True)
    for header in ("calls", "cached", "tok in", "tok out", "USD live", "USD batch", "time"):
        table.add_column(header, justify="right", no_wrap=True)
    for stage, usage in plans:
        table.add_row(*_row(stage.name, usage, usage.seconds))
    usages = [usage for _, usage in plans]
    table.add_row(*_row("total", totals(usages), sum(u.seconds for u in usages)), style="bold")
    table.caption = (
        "time: live calls within each profile's rate limits (rpm, tpm, concurrency; a batch job may take up to "
        "24 h instead); ≤: an upper bound, exact once the stage before has run"
    )
    return table


def status_table(runner: Runner) -> FittingTable:
    table = Table(
        title=f"Experiment {runner.experiment.name}: {runner.directory}", box=box.SIMPLE_HEAD, show_edge=False
    )
    for header in ("stage", "state", "inputs", "calls sent", "USD"):
        table.add_column(header, no_wrap=True, justify="right" if header in ("calls sent", "USD") else "left")
    for stage in runner.stages:
        record = runner.manifest.stages.get(stage.name)
        if record is None:
            table.add_row(stage.name, "not run", "", "", "")
            continue
        current = runner.input_hash(stage) == record.inputs
        table.add_row(
            stage.name,
            record.state + (f" ×{record.attempts}" if record.attempts > 1 else ""),
            "unchanged" if current else "changed",
            str(record.calls_sent),
            f"{record.cost_usd:.4f}",
        )
    table.caption = (
        f"spent in all: ${runner.manifest.spent_usd:.4f}; a changed stage runs again on the next prbj run; "
        f"outputs and run directories: {runner.manifest.path}"
    )
    return FittingTable(table, key_columns=1)
