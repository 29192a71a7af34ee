"""`prbj build`: construct benchmark pairs from LaMP-QA-format records."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from prbj.cli.options import (
    batch_options,
    concurrency_option,
    fanned_out,
    gateway_options,
    limit_option,
    out_option,
    privacy_options,
    profile_k_option,
    progress_option,
    seed_option,
    subset_option,
)
from prbj.cli.support import F, friendly_errors


def _role_provider_option(role: str, what: str) -> Callable[[F], F]:
    return click.option(
        f"--{role}-provider",
        metavar="NAME",
        default=None,
        help=f"Provider that {what} [default: --provider].",
    )


@click.group("build", invoke_without_command=True, no_args_is_help=True)
@click.option(
    "--input",
    "input_spec",
    metavar="SOURCE",
    help="LaMP-QA-format records (id, question, narrative, rubric_aspects, profile, category): a "
    ".jsonl/.json/.parquet file, a folder of them (<subset>/<split>-*.parquet as on the hub), or "
    "hf:alireza7/LaMP-QA (needs network).",
)
@subset_option(
    "Keep only this subset (repeatable; prefixes such as 'art' work). With one subset, records without "
    "a category get it."
)
@click.option(
    "--split",
    type=click.Choice(["train", "validation", "test"]),
    default="test",
    show_default=True,
    help="Split to read from a hub-style folder or hf:.",
)
@limit_option("At most this many records per subset.")
@out_option(
    "Build directory to write (pairs.jsonl, provenance.jsonl, rejects.jsonl, build_summary.json, "
    "report.md, run.json); rewritten on a rerun.",
    default=None,
    metavar="DIR",
)
@click.option(
    "-p",
    "--provider",
    metavar="NAME",
    default=None,
    help="Provider for every step that has no --<step>-provider (a profile from `prbj providers` or "
    "litellm:<model-id>).",
)
@_role_provider_option("planner", "infers the aspects this user expects (--plan planner)")
@_role_provider_option("chosen", "writes the chosen answer, following the aspects")
@_role_provider_option("rejected", "writes the rejected answer, equally good but avoiding the aspects")
@_role_provider_option("check", "rates both answers (factuality, relevance, helpfulness, adherence)")
@click.option(
    "--plan",
    type=click.Choice(["planner", "gold"]),
    default="planner",
    show_default=True,
    help="Aspects the answers follow (chosen) and avoid (rejected): inferred by the planner from question "
    "and profile, or the record's gold rubric_aspects.",
)
@profile_k_option()
@click.option(
    "--max-words",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Word limit of both answers; longer ones drop the pair.",
)
@click.option(
    "--min-quality",
    type=click.FloatRange(1, 5),
    default=4,
    show_default=True,
    help="Lowest factuality, relevance and helpfulness (1-5) either answer may get from the check.",
)
@click.option(
    "--min-gap",
    type=click.FloatRange(0, 4),
    default=2,
    show_default=True,
    help="Smallest adherence(chosen) − adherence(rejected) on the 1-5 scale for a pair to be kept.",
)
@click.option(
    "--balance-length",
    is_flag=True,
    help="Warn when the chosen answer is longer in more than 60% of kept pairs (regenerates nothing).",
)
@gateway_options
@privacy_options
@batch_options
@concurrency_option(fanned_out("Records built"), default=8)
@progress_option
@friendly_errors
def build(**options: Any) -> None:
    """Build Personalized RewardBench pairs from LaMP-QA-format records.

    For each record: a planner infers the aspects this user expects (or --plan gold takes the record's
    rubric); one model writes the chosen answer following them in the user's tone and level, another an
    equally personalised, factual and helpful answer that avoids them; a check model rates both 1-5 on
    factuality, relevance, helpfulness and adherence. A pair is kept when both answers reach
    --min-quality and the adherence gap reaches --min-gap; dropped pairs go to rejects.jsonl with the
    reason. pairs.jsonl is in the benchmark's schema: `prbj judge --dataset DIR/pairs.jsonl` reads it.

    Every call goes through the cache and --max-cost: a rerun pays only for what is missing, and an
    interrupted build resumes where it stopped.

    \b
    Examples:
      prbj build --input examples/lamp_qa.jsonl --out builds/b1 -p gemini-3-flash
      prbj build --input hf:alireza7/LaMP-QA --subset art --limit 50 --out builds/art --max-cost 5 \\
        --planner-provider gemini-3-flash --chosen-provider gpt-5.1 --rejected-provider gpt-5.1 \\
        --check-provider claude-sonnet-4-6
      prbj build --input examples/lamp_qa.jsonl --out builds/gold --plan gold -p gpt-5.1 --dry-run
      prbj build annotate builds/b1 --annotators 2 --sample 50
      prbj build agreement builds/b1 builds/b1/annotation/sheet-1.csv builds/b1/annotation/sheet-2.csv
    """
    context = click.get_current_context()
    if context.invoked_subcommand is not None:
        if options["input_spec"] or options["out"]:
            raise click.UsageError(
                f"--input and --out belong to `prbj build` itself, not to `build {context.invoked_subcommand}`"
            )
        return
    if not options["input_spec"]:
        raise click.UsageError("Missing option '--input'.")
    if options["out"] is None:
        raise click.UsageError("Missing option '--out'.")
    from prbj.build.command import run_build_command

    sys.exit(run_build_command(**options))


@build.command("annotate")
@click.argument("out_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--annotators", type=click.IntRange(min=1), default=2, show_default=True, help="Sheets to write."
)
@click.option(
    "--sample",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="Pairs drawn at random (all pairs when the build has fewer); every sheet rates the same pairs.",
)
@seed_option("Seed of the sample and answer order.")
@profile_k_option("Posts shown.", default=5)
@friendly_errors
def build_annotate(out_dir: Path, annotators: int, sample: int, seed: int, profile_k: int) -> None:
    """Write blind annotation sheets for a build: OUT_DIR/annotation/sheet-N.csv.

    Each row shows the question, the user's past posts, the aspects and the two answers as A and B in
    random order; annotators rate each answer 1-5 on factuality, relevance, helpfulness and adherence and
    give a preference (A, B or tie). Which answer is chosen is kept apart in annotation/key.csv.

    \b
    Examples:
      prbj build annotate builds/b1
      prbj build annotate builds/b1 --annotators 3 --sample 100 --seed 7
    """
    from prbj.build.command import run_annotate_command

    sys.exit(
        run_annotate_command(out_dir, annotators=annotators, sample=sample, seed=seed, profile_k=profile_k)
    )


@build.command("agreement")
@click.argument("out_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.argument("sheets", nargs=-1, type=click.Path(dir_okay=False, exists=True, path_type=Path))
@friendly_errors
def build_agreement(out_dir: Path, sheets: tuple[Path, ...]) -> None:
    """Read filled annotation sheets and report the human evaluation of a build; or, for a run directory
    (no SHEETS), the agreement of the labels reviewers gave its pairs in `prbj view`.

    Sheets: per dimension, mean ratings of chosen and rejected answers; Cohen's κ between annotators and
    between each annotator and the check model (quadratic-weighted for the 1-5 ratings, unweighted for the
    preference). Writes OUT_DIR/annotation/agreement.json and agreement.md.

    Labels (OUT_DIR/labels.jsonl): per reviewer, the share of decided pairs where they prefer the benchmark's
    chosen answer and κ against the benchmark's label (by the slot, A or B, each answer was shown in); κ
    between every two reviewers. Writes OUT_DIR/labels_agreement.json.

    \b
    Examples:
      prbj build agreement builds/b1 builds/b1/annotation/sheet-1.csv builds/b1/annotation/sheet-2.csv
      prbj build agreement reports/<run-id>
    """
    from prbj.build.command import run_agreement_command, run_label_agreement_command

    if not sheets:
        from prbj.runs.rundir import is_run_dir

        if not is_run_dir(out_dir):
            raise click.UsageError("name the filled sheets (SHEETS), or give a run directory with labels")
        sys.exit(run_label_agreement_command(out_dir))
    sys.exit(run_agreement_command(out_dir, sheets))
