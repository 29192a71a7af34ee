"""`prbj build` behind the CLI: providers per role, gateway, records → pairs, the build directory, the exit code."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console

from prbj.build.checks import Thresholds
from prbj.build.output import (
    PAIRS_FILE,
    BuildConfig,
    run_document,
    summary_document,
    write_build,
)
from prbj.build.pipeline import Builder, BuildSettings, Outcome, Roles
from prbj.build.report import length_note, markdown, outcome_table
from prbj.build.summary import summarize
from prbj.data.lamp import SHIPPED_FINGERPRINTS, LampRecord, load_lamp
from prbj.data.loaders import is_public
from prbj.display.fit import FittingTable
from prbj.display.width import output_console, print_error, print_whole
from prbj.errors import ConfigError, DataError
from prbj.judges.setup import resolve_provider
from prbj.llm.gateway import Gateway
from prbj.llm.providers import missing_keys
from prbj.llm.setup import GatewayOptions
from prbj.privacy.guard import PrivacyOptions, guard_lamp, note_line
from prbj.report.terminal import print_failure_causes, print_missing_keys, usage_table
from prbj.runs.engine import run_jobs


def _roles(
    shared: GatewayOptions,
    gateway: Gateway,
    plan: str,
    provider: str | None,
    per_role: dict[str, str | None],
) -> Roles:
    needed = ["chosen", "rejected", "check"] + (["planner"] if plan == "planner" else [])
    missing = [role for role in needed if not (per_role.get(role) or provider)]
    if missing:
        raise ConfigError(
            f"--{missing[0]}-provider: no provider for this step; give --provider NAME for every step or "
            f"--{missing[0]}-provider NAME"
        )
    resolved: dict[str, Any] = {}
    for role in ("planner", "chosen", "rejected", "check"):
        name = per_role.get(role) or provider
        resolved[role] = resolve_provider(name, shared, gateway) if role in needed and name else None
    return Roles(**resolved)


async def _build_all(
    builder: Builder,
    records: tuple[LampRecord, ...],
    concurrency: int,
    progress: bool,
    admitted: Callable[[], int] | None = None,
) -> list[Outcome]:
    jobs = [partial(builder.build, record) for record in records]
    return await run_jobs(
        jobs, concurrency=concurrency, description="building", show_progress=progress, admitted=admitted
    )


def run_build_command(
    *,
    input_spec: str,
    subsets: tuple[str, ...],
    split: str,
    limit: int | None,
    out: Path,
    provider: str | None,
    planner_provider: str | None,
    chosen_provider: str | None,
    rejected_provider: str | None,
    check_provider: str | None,
    plan: str,
    profile_k: int,
    max_words: int,
    min_quality: float,
    min_gap: float,
    balance_length: bool,
    concurrency: int,
    progress: bool,
    **gateway_options: Any,
) -> int:
    from prbj.runs.rundir import package_versions

    loaded = load_lamp(input_spec, subsets=subsets, split=split)
    public = is_public(input_spec) or loaded.fingerprint() in SHIPPED_FINGERPRINTS
    shared = GatewayOptions.pop_from(gateway_options).for_data(input_spec, public=public)
    privacy = PrivacyOptions.pop_from(gateway_options)
    shared = privacy.cache_for(shared)
    console = output_console()
    lamp = loaded.select(subsets, limit)
    if not lamp.records:
        raise DataError(f"--input {input_spec}: no records to build from")
    lamp, guard = guard_lamp(lamp, shared.routed, privacy, note=note_line)
    thresholds = Thresholds(max_words=max_words, min_quality=min_quality, min_gap=min_gap)
    # click.Choice(['planner', 'gold']) has already narrowed --plan to a PlanSource.
    settings = BuildSettings(plan=plan, profile_k=profile_k, thresholds=thresholds)  # type: ignore[arg-type]
    config = BuildConfig(
        input=input_spec,
        subsets=subsets,
        split=split,
        limit=limit,
        plan=plan,
        profile_k=profile_k,
        max_words=max_words,
        min_quality=min_quality,
        min_gap=min_gap,
        balance_length=balance_length,
        concurrency=concurrency,
    )
    with shared.open() as gateway:
        roles = _roles(
            shared,
            gateway,
            plan,
            provider,
            {
                "planner": planner_provider,
                "chosen": chosen_provider,
                "rejected": rejected_provider,
                "check": check_provider,
            },
        )
        started = datetime.now(UTC)
        builder = Builder(gateway, roles, settings)
        build_all = partial(
            _build_all, builder, lamp.records, concurrency, progress, gateway.in_flight_allowed
        )
        outcomes = asyncio.run(gateway.in_rounds(build_all))
    finished = datetime.now(UTC)
    usage = [s.as_dict() for s in gateway.stats()]
    if shared.dry_run:
        console.print(usage_table(usage, dry_run=True))
        print_missing_keys(missing_keys(gateway.providers()), console)
        console.print(
            f"[dim]{len(lamp.records)} records; each needs up to 5 calls (plan, chosen, rejected, 2 checks), "
            "fewer with --plan gold or when a step is already cached.[/dim]"
        )
        return 0
    summary = summary_document(lamp, config, builder, summarize(outcomes, balance_length=balance_length))
    run = run_document(
        out,
        lamp,
        config,
        builder,
        started=started,
        finished=finished,
        usage=usage,
        mode=gateway.mode,
        max_cost=gateway.budget.max_cost,
        versions=package_versions(),
    )
    run["privacy"] = guard.record()
    write_build(out, outcomes, builder, summary, markdown(summary), run)
    console.print(FittingTable(outcome_table(summary)))
    if usage:
        console.print(usage_table(usage))
    note = length_note(summary["length"])
    if note:
        style = "yellow" if summary["length"]["warning"] else "dim"
        console.print(f"[{style}]{note}[/{style}]")
    console.print(f"build directory: {out} (pairs: {out / PAIRS_FILE})")
    return _exit_code(summary, outcomes, console)


def _exit_code(summary: dict[str, Any], outcomes: Sequence[Outcome], console: Console) -> int:
    incomplete = summary["counts"]["incomplete_reasons"]
    if not incomplete:
        return 0
    failed_calls = (
        (call.status, call.cause, call.error)
        for outcome in outcomes
        for call in outcome.calls
        if call.status != "ok"
    )
    print_failure_causes(failed_calls, console)
    parts = ", ".join(f"{n} {reason}" for reason, n in incomplete.items())
    if incomplete.get("api_error"):
        print_error(
            console,
            f"{sum(incomplete.values())} records incomplete ({parts}); "
            "rerun the same command to retry them (finished calls are cached).",
        )
        return 1
    console.print(
        f"[yellow]{sum(incomplete.values())} records incomplete ({parts}): rerun to finish them "
        "(finished calls are cached; raise --max-cost or drop --cache-only).[/yellow]",
    )
    return 0


def run_annotate_command(out_dir: Path, *, annotators: int, sample: int, seed: int, profile_k: int) -> int:
    """`prbj build annotate`: blind annotation sheets for a build."""
    from prbj.build.annotate import write_sheets

    written = write_sheets(out_dir, annotators=annotators, sample=sample, seed=seed, profile_k=profile_k)
    output_console().print(
        f"wrote {len(written.sheets)} sheet(s) of {written.items} pairs: "
        + ", ".join(str(p) for p in written.sheets)
        + f"; key (keep it from annotators): {written.key}",
    )
    return 0


def run_label_agreement_command(run_dir: Path) -> int:
    """`prbj build agreement RUN_DIR`: agreement of the labels reviewers gave the run's pairs in `prbj view`."""
    from prbj.build.label_agreement import label_agreement, label_tables
    from prbj.runs import rundir

    labels = rundir.read_labels(run_dir)
    if not labels:
        raise DataError(f"{run_dir}: no {rundir.LABELS_FILE}; label pairs with `prbj view {run_dir}` first")
    report = label_agreement(labels)
    console = output_console()
    for table in label_tables(report):
        console.print(FittingTable(table))
    path = rundir.write_label_agreement(run_dir, report)
    print_whole(console, f"wrote {path}")
    return 0


def run_agreement_command(out_dir: Path, sheets: Sequence[Path]) -> int:
    """`prbj build agreement`: the human evaluation of a build from filled sheets."""
    from prbj.build.agreement import agreement_report, read_sheets, write_agreement
    from prbj.build.agreement_report import agreement_tables

    annotations = read_sheets(out_dir, sheets)
    report = agreement_report(out_dir, annotations)
    console = output_console()
    for table in agreement_tables(report):
        console.print(FittingTable(table))
    json_path, md_path = write_agreement(out_dir, report)
    print_whole(console, f"wrote {json_path} and {md_path}")
    return 0
