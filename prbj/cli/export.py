"""`prbj export`: a run's results in formats other tools read (Every Eval Ever, Inspect logs, CSV, Parquet)."""

from __future__ import annotations

from pathlib import Path

import click

from prbj.cli.support import friendly_errors


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["eee", "inspect", "csv", "parquet"]),
    required=True,
    help="eee: Every Eval Ever aggregate JSON + instance JSONL per judge; inspect: one Inspect log per judge × "
    "context; csv / parquet: one row per judgment.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="eee: the folder that gets data/<benchmark>/<developer>/<model>/; inspect: the log folder; "
    "csv/parquet: the file (or a folder, which gets judgments.csv / judgments.parquet).",
)
@click.option(
    "--include-profiles",
    is_flag=True,
    help="Also export what the judge was shown about each user (profile posts, planner aspects), and replies "
    "as written. Without it no profile text is exported, and quotes of it in replies are cut.",
)
@click.option(
    "--include-texts",
    is_flag=True,
    help="For a run under --personal-data pseudonymized: export its questions, answers and replies as they were "
    "sent (pseudonymized, from its table in the private store). Without it a run under any policy but any "
    "exports no text at all.",
)
@click.option(
    "--private-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="PRBJ_PRIVATE_DIR",
    default=None,
    help="The private store that holds a pseudonymized run's table and replies [env: PRBJ_PRIVATE_DIR; "
    "default: ~/.local/share/prbj/private].",
)
@click.option(
    "--dataset",
    default=None,
    metavar="SOURCE",
    help="Where to read questions and answers [default: the dataset named in each run.json].",
)
@click.option(
    "--organization",
    default="unknown",
    show_default=True,
    metavar="NAME",
    help="eee: who publishes the results (source_organization_name).",
)
@click.option(
    "--evaluator-relationship",
    type=click.Choice(["third_party", "first_party", "collaborative", "other"]),
    default="third_party",
    show_default=True,
    help="eee: who ran the evaluation, relative to the judges' developers.",
)
@friendly_errors
def export(
    run_dirs: tuple[Path, ...],
    fmt: str,
    out: Path,
    include_profiles: bool,
    include_texts: bool,
    private_dir: Path | None,
    dataset: str | None,
    organization: str,
    evaluator_relationship: str,
) -> None:
    """Export runs for other tools: Every Eval Ever, Inspect (`inspect view` browses them), CSV, Parquet.

    RUN_DIRS are run directories, or `prbj run` experiment folders (every judge run of the study).
    docs/export.md describes each format, its columns and how a pairwise judgment is encoded.

    \b
    Examples:
      prbj export reports/<run-id> --format eee --out exports/eee
      prbj export reports/<run-id> --format inspect --out exports/inspect
      prbj export reports/<run-id> --format csv --out exports/judgments.csv
    """
    from prbj.display.width import output_console
    from prbj.experiments.manifest import experiment_run_dirs
    from prbj.runs.export_command import export_runs
    from prbj.runs.rundir import is_run_dir

    notes = output_console(stderr=True, highlight=False)
    written = export_runs(
        experiment_run_dirs(list(run_dirs), is_run_dir),
        fmt=fmt,
        out=out,
        include_profiles=include_profiles,
        include_texts=include_texts,
        private_dir=private_dir,
        dataset=dataset,
        organization=organization,
        relationship=evaluator_relationship,
        note=lambda message: notes.print(f"note: {message}", soft_wrap=True),
    )
    console = output_console()
    for path in written:
        console.print(str(path), soft_wrap=True, highlight=False)
    console.print(f"{len(written)} file(s) written", highlight=False)
