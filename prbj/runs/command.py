"""`prbj judge` behind the CLI: build judges, gateway and planner from options, run, report, pick the exit code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from prbj.data import load_dataset
from prbj.data.status import FAILED_STATUSES
from prbj.errors import DataError
from prbj.judges.registry import build_judges
from prbj.judges.setup import JudgeOptions
from prbj.llm.setup import GatewayOptions
from prbj.local.ray_executor import RayOptions
from prbj.report.terminal import print_failure_causes, print_leaderboard, usage_table
from prbj.runs.beyond import BeyondOptions
from prbj.runs.collector import kept_for_the_run
from prbj.runs.execute import RunConfig, execute


def run_judge_command(
    *,
    providers: tuple[str, ...],
    dataset: str,
    subsets: tuple[str, ...],
    limit: int | None,
    fail_on_error: float | None,
    out: Path,
    concurrency: int,
    progress: bool,
    **options: Any,
) -> int:
    """The body of `prbj judge`: the remaining keyword arguments are the judge options (JudgeOptions) and
    the shared model options (GatewayOptions)."""
    shared = GatewayOptions.pop_from(options)
    on_ray = RayOptions.pop_from(options)
    judging = JudgeOptions.pop_from(options)
    beyond = BeyondOptions.pop_from(options)
    if options:
        raise TypeError(f"run_judge_command: unexpected options {sorted(options)}")
    dry_run, cache_only = shared.dry_run, shared.cache_only
    console = Console()
    with shared.open() as gateway, on_ray.attach(gateway, progress=progress):
        judges, planner = build_judges(providers, judging, shared, gateway)
        judges = beyond.sampled(judges)
        with kept_for_the_run():
            data = load_dataset(dataset).select(subsets, limit)
        if not data.pairs:
            raise DataError(f"--dataset {dataset}: no pairs to judge")
        config = RunConfig(
            dataset=dataset,
            subsets=subsets,
            limit=limit,
            seed=judging.seed,
            out_dir=out,
            concurrency=concurrency,
            show_progress=progress,
            protocol=judging.protocol,
            official_repo=str(judging.official.root) if judging.official is not None else None,
            beyond=beyond,
        )
        result = execute(data, judges, config, gateway=gateway, planner=planner)
    usage = result.extra.get("usage", [])
    if dry_run:
        console.print(usage_table(usage, dry_run=True))
        return 0
    print_leaderboard(result.summary, console)
    print_failure_causes(result.judgments.select("status", "cause", "error").iter_rows(), console)
    _print_truncations(result.judgments, judging.scalar.max_length, console)
    if usage:
        console.print(usage_table(usage))
    run_dir = result.run_dir
    assert run_dir is not None  # only a dry run writes no run directory, and it returned above
    console.print(f"run directory: {run_dir}")
    console.print(f"report: {run_dir / 'report.html'}")
    if cache_only:
        missing = int((result.judgments["status"] == "skipped_cache").sum())
        if missing:
            console.print(
                f"[yellow]{missing} judgments were not in the cache (--cache-only): rerun without it."
            )
    if data.source == "sample":
        console.print(
            "[dim]This is the bundled demo sample, not the benchmark: use "
            "--dataset hf:QiyaoMa/Personalized-RewardBench for real figures.[/dim]"
        )
    if not providers:
        console.print(
            "[dim]Next: evaluate a real reward model, e.g. "
            "GEMINI_API_KEY=... prbj judge --provider gemini-3-flash[/dim]"
        )
    budget_code = _report_budget(usage, gateway.budget.spent, gateway.budget.max_cost, console)
    return max(_exit_code(result.judgments, fail_on_error, console), budget_code)


def _report_budget(usage: list[Any], spent: float, cap: float | None, console: Console) -> int:
    """--max-cost stopped some calls: say how far the money went and fail the run (exit 1), since its figures
    cover only part of the pairs."""
    not_sent = sum(int(row.get("skipped_budget", 0)) for row in usage)
    if cap is None or not not_sent:
        return 0
    console.print(
        f"[bold yellow]budget reached: ${spent:.4f} of ${cap:.4f} spent, {not_sent} calls not sent[/bold yellow]"
    )
    return 1


def _exit_code(judgments: Any, fail_on_error: float | None, console: Console) -> int:
    """1 when a judge had no successful judgment at all (its column of the leaderboard is only dashes), or when
    more judgments failed than --fail-on-error allows; else 0."""
    import polars as pl

    empty = (
        judgments.group_by("judge", "context", maintain_order=True)
        .agg((pl.col("status") == "ok").sum().alias("ok"), pl.len().alias("n"))
        .filter(pl.col("ok") == 0)
    )
    for judge_name, context, _, n in empty.iter_rows():
        console.print(
            f"[bold red]error:[/bold red] {judge_name} ({context}) had no successful judgment ({n}/{n} failed; "
            "causes above)"
        )
    if empty.height:
        return 1
    if fail_on_error is None or judgments.height == 0:
        return 0
    failed = int(judgments["status"].is_in(FAILED_STATUSES).sum())
    share = failed / judgments.height
    if share > fail_on_error:
        console.print(
            f"[bold red]error:[/bold red] {failed}/{judgments.height} judgments failed "
            f"({share:.1%} > --fail-on-error {fail_on_error:.1%})"
        )
        return 1
    return 0


def _print_truncations(judgments: Any, max_length: int, console: Console) -> None:
    """Pairs in which a local reward model saw only part of an input: their scores are less trustworthy."""
    import polars as pl

    counts = (
        judgments.filter(pl.col("truncated").is_not_null())
        .group_by("judge", "context", maintain_order=True)
        .agg(pl.col("truncated").sum().alias("cut"), pl.len().alias("n"))
        .filter(pl.col("cut") > 0)
    )
    for judge_name, context, cut, n in counts.iter_rows():
        console.print(
            f"[yellow]{judge_name} ({context}): {cut} of {n} pairs had an input longer than "
            f"--max-length {max_length} tokens; its middle was cut (column 'truncated').[/yellow]"
        )
