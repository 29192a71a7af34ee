"""`prbj export` behind the CLI: load each run through rundir, read back its pairs (for the question and the
answers; their profiles only to keep them out), hand both to prbj.export, and write what comes back."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from prbj.data.csv_cells import write_frame
from prbj.data.files import inside, write_atomic, write_json, write_parquet, write_text
from prbj.errors import ConfigError, DataError
from prbj.export.eee import eee_files
from prbj.export.table import ExportRun
from prbj.extras import INSPECT
from prbj.privacy.guard import shown_pairs, with_private_texts
from prbj.privacy.store import PrivateStore
from prbj.runs import rundir
from prbj.runs.run_pairs import read_run_pairs

FORMATS = ("eee", "inspect", "csv", "parquet")


def load_export(
    run_dir: Path,
    *,
    include_profiles: bool,
    dataset: str | None = None,
    include_texts: bool = False,
    private_dir: Path | None = None,
) -> ExportRun:
    run = rundir.load_run(run_dir)
    found = read_run_pairs(run.dataset, run.run.get("config"), source=dataset, run_dir=run.run_dir)
    export = ExportRun(run, found.pairs, found.note, include_profiles, include_texts)
    if export.policy == "any" or export.texts_withheld:
        return export
    return _as_sent(export, PrivateStore(private_dir))


def _as_sent(export: ExportRun, store: PrivateStore) -> ExportRun:
    """A guarded run whose texts were asked for, with them as its models were sent them: the pairs through its
    pseudonym table, the replies and context blocks from the private store. Only a pseudonymizing run has
    such texts; the others sent theirs in clear to models the policy trusted, and export none of it."""
    run = export.run
    if export.policy != "pseudonymized":
        raise ConfigError(
            f"{run.run_dir}: a run under --personal-data {export.policy} sent its texts in clear to models that "
            "policy trusts, and an export carries none of them: export it without --include-texts and "
            "--include-profiles"
        )
    shown = shown_pairs(
        run.run_id, run.run.get("privacy"), export.pairs, reveal=False, private=True, store=store
    )
    if export.pairs and not shown.pairs:
        raise ConfigError(
            f"{run.run_dir}: {shown.note}: its texts cannot be exported as they were sent (--private-dir names the "
            "store that holds it)"
        )
    judgments = with_private_texts(run.judgments, shown.texts)
    note = export.pairs_note or (
        None if shown.texts is not None else "its replies are not in this private store"
    )
    return replace(export, run=replace(run, judgments=judgments), pairs=shown.pairs, pairs_note=note)


def _notes(export: ExportRun, note: Callable[[str], None]) -> None:
    if export.texts_withheld:
        note(
            f"{export.run.run_id}: a run under --personal-data {export.policy}: no question, answer, reply or "
            "profile text is exported (--include-texts exports a pseudonymized run's texts as they were sent)"
        )
        return
    if export.pairs_note is not None:
        note(f"{export.run.run_id}: {export.pairs_note}; questions and answers are left out (use --dataset)")
    if export.replies_dropped:
        note(
            f"{export.run.run_id}: replies and error messages are left out: without the run's pairs, quotes of "
            "a profile in them cannot be found (--dataset, or --include-profiles to export them as they are)"
        )


def export_runs(
    run_dirs: Sequence[Path],
    *,
    fmt: str,
    out: Path,
    include_profiles: bool = False,
    include_texts: bool = False,
    private_dir: Path | None = None,
    dataset: str | None = None,
    organization: str = "unknown",
    relationship: str = "third_party",
    note: Callable[[str], None] = lambda _: None,
) -> list[Path]:
    """Write the runs in `fmt` under `out` and return the files written. csv/parquet: one table of every run's
    judgments (a file, or a folder that gets judgments.<fmt>); eee: a datastore tree (out/data/...); inspect:
    one .eval log per judge × context in the folder `out`."""
    if fmt not in FORMATS:
        raise DataError(f"--format {fmt}: expected one of {', '.join(FORMATS)}")
    if fmt == "inspect":
        INSPECT.require("--format inspect")  # before anything is read or written
    exports = [
        load_export(
            Path(d),
            include_profiles=include_profiles,
            dataset=dataset,
            include_texts=include_texts,
            private_dir=private_dir,
        )
        for d in run_dirs
    ]
    for export in exports:
        _notes(export, note)
    if fmt in ("csv", "parquet"):
        target = out / f"judgments.{fmt}" if out.is_dir() or not out.suffix else out
        target.parent.mkdir(parents=True, exist_ok=True)
        table = pl.concat([e.table() for e in exports], how="vertical_relaxed")
        return [write_frame(target, table) if fmt == "csv" else write_parquet(target, table)]
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    # Every name below is made by prbj.data.files.safe_name from what the run says (run id, judge, context,
    # model); `inside` still checks each path against --out, so a link planted there cannot lead a write out.
    if fmt == "eee":
        retrieved = str(int(time.time()))
        for export in exports:
            for files in eee_files(
                export, retrieved=retrieved, organization=organization, relationship=relationship
            ):
                aggregate = inside(out, *files.aggregate_path.split("/"))
                samples = inside(out, *files.samples_path.split("/"))
                aggregate.parent.mkdir(parents=True, exist_ok=True)
                inside(out, *files.aggregate_path.split("/"))  # a link made meanwhile leads nowhere either
                written.append(write_text(samples, files.samples_text))
                written.append(write_json(aggregate, files.aggregate))
        return written
    from prbj.export.inspect_log import inspect_logs  # imports inspect-ai: only this format pays for it

    for export in exports:
        for made in inspect_logs(export):
            # Written beside its place and renamed over it, as every prbj file is: a link there is replaced.
            written.append(write_atomic(inside(out, made.file_name), _eval_log_writer(made.log)))
    return written


def _eval_log_writer(log: Any) -> Callable[[Path], object]:
    """Writes an Inspect log to the path it is given, through inspect-ai's own API."""
    from inspect_ai.log import write_eval_log

    return lambda path: write_eval_log(log, str(path), format="eval")
