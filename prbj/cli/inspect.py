"""`prbj show` and `prbj diff`: individual judgments of a run, and the verdicts that changed between two."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from prbj.cli.support import friendly_errors

_OUTCOMES = ["correct", "incorrect", "failed", "abstained"]


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--judge", "judges", multiple=True, metavar="NAME", help="Only this judge (repeatable).")
@click.option("--subset", "subsets", multiple=True, metavar="NAME", help="Only this subset (repeatable).")
@click.option("--context", "contexts", multiple=True, metavar="NAME", help="Only this context (repeatable).")
@click.option("--pair", "pair_ids", multiple=True, metavar="ID", help="Only this pair id (repeatable).")
@click.option(
    "--only",
    "outcome",
    type=click.Choice(_OUTCOMES),
    default=None,
    help="Only correct, incorrect, failed or abstained (withheld by --selective).",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Judgments shown at most."
)
@click.option(
    "--dataset",
    default=None,
    metavar="SOURCE",
    help="Where to read questions and answers [default: the dataset named in run.json].",
)
@friendly_errors
def show(
    run_dir: Path,
    judges: tuple[str, ...],
    subsets: tuple[str, ...],
    contexts: tuple[str, ...],
    pair_ids: tuple[str, ...],
    outcome: str | None,
    limit: int,
    dataset: str | None,
) -> None:
    """Browse a run's judgments: the question, both answers in the order the judge saw them, the
    context block, the judge's full reply and the parsed verdict.

    \b
    Examples:
      prbj show reports/<run-id> --only incorrect --judge gemini-3-flash
      prbj show reports/<run-id> --pair ae-007
    """
    from prbj.runs.show_command import ShowFilter, run_show_command

    chosen = ShowFilter(
        judges=judges,
        subsets=subsets,
        outcome=outcome,  # type: ignore[arg-type]  # click.Choice narrowed it to the Literal
        pair_ids=pair_ids,
        contexts=contexts,
    )
    sys.exit(run_show_command(run_dir, chosen, limit=limit, dataset=dataset))


@click.command()
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--judge", "judges", multiple=True, metavar="NAME", help="Only this judge (repeatable).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Changed pairs shown at most.")
@friendly_errors
def diff(run_a: Path, run_b: Path, judges: tuple[str, ...], limit: int | None) -> None:
    """The pairs whose verdict changed between two runs of the same dataset, with both replies.

    \b
    Example:
      prbj diff reports/<old-run> reports/<new-run> --judge gemini-3-flash
    """
    from prbj.runs.show_command import run_diff_command

    sys.exit(run_diff_command(run_a, run_b, judges=judges, limit=limit))
