"""Which runs belong on one leaderboard: runs grouped by the dataset they were made on, and the latest run of
each judge × context. Pure: works on runs already loaded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import polars as pl

from prbj.analysis.headline import headline_of
from prbj.analysis.run_data import RunData


def dataset_key(run: RunData) -> str:
    """The dataset fingerprint (what the pairs were), or the source when an old run lacks one."""
    dataset = run.dataset
    return str(dataset.get("fingerprint") or dataset.get("source") or "?")


def is_official(run: RunData) -> bool:
    """Whether the run's headline is its card's authors' figure (--protocol official), which is never ranked
    beside prbj's own (another unit and other rules: a failure counted wrong, the authors' interval)."""
    return headline_of(run.summary).protocol == "official"


def group_key(run: RunData) -> str:
    """The leaderboard a run belongs on: its dataset, and apart under --protocol official."""
    return dataset_key(run) + ("-official" if is_official(run) else "")


def group_by_dataset(runs: Sequence[RunData]) -> list[list[RunData]]:
    """Runs grouped by dataset fingerprint, groups in the order their first run came; a leaderboard ranks runs
    of one group only (a 2-pair run at 100% must not top a 600-pair one). Runs under --protocol official are
    a group of their own on their dataset, as the table across benchmarks keeps them a column of their own."""
    groups: dict[str, list[RunData]] = {}
    for run in runs:
        groups.setdefault(group_key(run), []).append(run)
    return list(groups.values())


def _started(run: RunData) -> str:
    return str(run.run.get("started") or run.run_id)


def latest_per_judge(runs: Sequence[RunData]) -> list[RunData]:
    """Each run keeping only the judge × context results no later run (by start time) also has; runs left with
    nothing are dropped. Order is kept."""
    owner: dict[tuple[str, str], str] = {}
    for run in sorted(runs, key=_started):
        for row in run.results:
            owner[(row.judge, row.context)] = run.run_id
    kept: list[RunData] = []
    for run in runs:
        mine = {key for key, run_id in owner.items() if run_id == run.run_id}
        if not mine:
            continue
        results = [row for row in run.results if (row.judge, row.context) in mine]
        keys = pl.DataFrame(sorted(mine), schema=["judge", "context"], orient="row")
        judgments = run.judgments.join(keys, on=["judge", "context"], how="semi", maintain_order="left")
        kept.append(replace(run, results=results, judgments=judgments))
    return kept
