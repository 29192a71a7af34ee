"""The planner stage: the planner's aspects for every pair, bought once before any judge that shows them.

prbj has no command that runs the planner alone (it runs inside `prbj judge --context planner`), so this stage
calls the planner itself, through the same pieces the judge command uses (GatewayOptions, resolve_provider,
Planner, the engine's fan-out). Its answers land in the response cache, where every judge stage with the
`planner` context then finds them; planner.jsonl records what came back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from prbj.context.planner import Planner
from prbj.context.profile_text import ProfileOrder
from prbj.data import load_dataset
from prbj.data.cards import Card, resolve_card
from prbj.data.files import write_jsonl
from prbj.data.loaders import is_public, source_label
from prbj.display.width import output_console, print_error
from prbj.experiments.schema import BenchmarkEntry, Experiment
from prbj.judges.setup import resolve_provider
from prbj.llm.setup import GatewayOptions
from prbj.privacy.guard import PrivacyOptions, guard_dataset, note_line
from prbj.report.terminal import usage_table
from prbj.runs.engine import run_jobs

PLANNER_FILE = "planner.jsonl"


def gateway_options(defaults: Mapping[str, Any], base: Path, **fixed: Any) -> GatewayOptions:
    """The [defaults] that are gateway options (cache_dir, api_base, rpm, ...), paths made absolute."""
    from prbj.experiments.commandline import resolve_path

    picked: dict[str, Any] = {}
    for name in GatewayOptions.__dataclass_fields__:
        if name in defaults:
            value = defaults[name]
            picked[name] = (
                Path(resolve_path(str(value), base)) if name.endswith("_dir") or name == "env_file" else value
            )
    return GatewayOptions(**{**picked, **fixed})


def _card_order(card: Card | None) -> ProfileOrder:
    order = card.profile_order if card is not None else None
    return "newest" if order == "newest" else "similar"


def run_planner(
    experiment: Experiment,
    out: Path,
    *,
    max_cost: float | None,
    dry_run: bool,
    progress: bool = True,
    benchmark: BenchmarkEntry | None = None,
) -> int:
    """The planner's aspects for every pair of `benchmark` (the experiment's main one by default)."""
    planner_entry = experiment.planner
    assert planner_entry is not None
    entry = benchmark or experiment.main
    card = resolve_card(entry.benchmark) if entry.benchmark is not None else None
    shared = gateway_options(
        experiment.defaults,
        experiment.base,
        max_cost=max_cost,
        dry_run=dry_run,
        personal_data=experiment.personal_data,
    ).for_data(source_label(entry.dataset, card), public=is_public(entry.dataset, card))
    privacy = PrivacyOptions.from_settings(experiment.defaults)
    shared = privacy.cache_for(shared)
    console = output_console()
    data = load_dataset(entry.dataset, card).select(experiment.subsets, experiment.limit)
    # The judge stages pseudonymize as this one does: their planner calls are the same requests, cached here.
    data, _ = guard_dataset(data, shared.routed, privacy, note=note_line)
    with shared.open() as gateway:
        planner = Planner(
            resolve_provider(planner_entry.provider, shared, gateway),
            gateway,
            profile_k=planner_entry.profile_k,
            # As the judges' planner asks (prbj judge takes the order from the benchmark's card).
            profile_order=_card_order(card),
            repair=planner_entry.repair,
        )
        jobs = [partial(planner.aspects, pair.view("planner")) for pair in data.pairs]
        plan_all = partial(
            run_jobs, jobs, description="planning", show_progress=progress, admitted=gateway.in_flight_allowed
        )
        outputs = asyncio.run(gateway.in_rounds(plan_all))
        usage = [s.as_dict() for s in gateway.stats()]
    if usage:
        console.print(usage_table(usage, dry_run=dry_run))
    if dry_run:
        return 0
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(
        out / PLANNER_FILE,
        [
            # Under a policy other than `any` the experiment's folder keeps no text about a user.
            {"pair_id": o.pair_id, "status": o.status, "aspects": [] if shared.routed.guards else o.aspects}
            for o in sorted(outputs, key=lambda o: o.pair_id)
        ],
    )
    planned = sum(o.ok for o in outputs)
    console.print(f"planner: aspects for {planned}/{len(outputs)} pairs; {out / PLANNER_FILE}")
    if outputs and not planned:
        print_error(console, f"the planner {planner_entry.provider} answered no pair")
        return 1
    return 0
