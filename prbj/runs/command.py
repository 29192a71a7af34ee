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
from prbj.report.terminal import print_leaderboard, usage_table
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
    if options:
        raise TypeError(f"run_judge_command: unexpected options {sorted(options)}")
    dry_run, cache_only = shared.dry_run, shared.cache_only
    console = Console()
    with shared.open() as gateway, on_ray.attach(gateway, progress=progress):
        judges, planner = build_judges(providers, judging, shared, gateway)
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
        )
        result = execute(data, judges, config, gateway=gateway, planner=planner)
    usage = result.extra.get("usage", [])
    if dry_run:
        console.print(usage_table(usage, dry_run=True))
        return 0
    print_leaderboard(result.summary, console)
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
    return _exit_code(result.judgments, fail_on_error, console)


def _exit_code(judgments: Any, fail_on_error: float | None, console: Console) -> int:
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
