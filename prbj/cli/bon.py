"""`prbj bon`: best-of-N sampling, scoring and gold evaluation."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from prbj.cli.options import (
    batch_options,
    batch_size_option,
    concurrency_option,
    context_option,
    dataset_options,
    fanned_out,
    gateway_options,
    judge_template_options,
    mode_option,
    out_option,
    planner_option,
    privacy_options,
    profile_k_option,
    progress_option,
    protocol_options,
    ray_options,
    repair_option,
    seed_option,
    stacked,
)
from prbj.cli.support import friendly_errors

# BoN runs get a folder of their own under reports/, so that `prbj report reports/*/` meets judge runs only.
BON_RUNS_FOLDER = Path("reports") / "bon"


@click.group()
def bon() -> None:
    """Best-of-N: does a reward model help a policy? A policy writes N answers per question, each RM picks the
    best of the first k, a gold judge grades the picks against the rubric. One run directory holds all steps.

    \b
    Steps:
      prbj bon sample --policy PROVIDER      → reports/bon/bon-<id>/ (run.json, samples.parquet)
      prbj bon score RUN_DIR -p RM [-p ...]  → scores.parquet, picks.parquet
      prbj bon evaluate RUN_DIR --gold PROV  → summary.json, evaluation_summary.json per RM, downstream.parquet
      prbj downstream add RUN_DIR            → the table 'prbj correlate' reads
    Details: docs/bon.md.
    """


@bon.command("sample")
@click.option(
    "--policy",
    required=True,
    metavar="PROVIDER",
    help="Model that writes the answers: a profile from `prbj providers` (e.g. openai-compatible for a vLLM "
    "server), litellm:<model-id>, or any other provider spec prbj accepts.",
)
@click.option(
    "--n", type=click.IntRange(min=1), default=128, show_default=True, help="Samples per question (N)."
)
@click.option(
    "--k-profile",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Past posts shown to the policy, ranked by BM25 relevance to the question (official: Contriever).",
)
@click.option(
    "--temperature",
    type=click.FloatRange(min=0),
    default=None,
    help="Sampling temperature [default: 1.0, the official setup's]. A default the policy's provider does not "
    "take is left out (printed and recorded); a value given here never is: the run is refused instead.",
)
@click.option(
    "--top-p",
    type=click.FloatRange(0, 1, min_open=True),
    default=None,
    help="Nucleus top-p [default: 0.9, the official setup's; left out for providers that take temperature or "
    "top-p, not both (Claude 4.5 and later) and for OpenAI reasoning models above effort none].",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Longest answer in tokens [default: 512; raised by room for the reasoning of a reasoning model].",
)
@seed_option(
    "Sample i is requested with seed SEED+i, so providers that honour seeds (vLLM, in-process models) "
    "reproduce it even without the cache."
)
@click.option("--no-seed", is_flag=True, help="Send no seed (for providers that reject one).")
@dataset_options(
    dataset="Questions: as in 'prbj judge' (sample, a file, a folder or hf:QiyaoMa/Personalized-RewardBench); "
    "one question per pair id.",
    subset="Keep only this subset (repeatable).",
    limit="At most this many questions per subset.",
)
@gateway_options
@privacy_options
@batch_options
@out_option("Folder in which the run directory bon-<id>/ is written.", default=BON_RUNS_FOLDER)
@concurrency_option(fanned_out("Samples requested"))
@progress_option
@ray_options
@friendly_errors
def bon_sample(no_seed: bool, **options: Any) -> None:
    """Write N answers per question with a policy model; start a BoN run directory.

    Every sample is its own cached call keyed by its sample index: growing --n later (in a new run) buys
    only the new samples, and a rerun costs nothing. The policy sees the question and the top --k-profile
    past posts, never the gold rubric. Defaults follow the official setup (Qwen2.5-0.5B-Instruct, N=128,
    temperature 1.0, top-p 0.9, k=10).

    \b
    Examples:
      prbj bon sample --policy openai-compatible --api-base http://127.0.0.1:8000/v1 --n 8 --limit 10
      prbj bon sample --policy qwen2.5-0.5b --providers-dir my-providers/ --n 8 --limit 5   # own profile
      prbj bon sample --policy gemini-3-flash --n 8 --subset art --max-cost 1 --dry-run
    """
    from prbj.bon.command import run_sample_command

    if no_seed:
        options["seed"] = None
    sys.exit(run_sample_command(**options))


# The judge options of 'prbj judge' that apply to reward models scoring one answer at a time.
_rm_options = stacked(
    context_option(
        ["none", "profile", "planner"],
        "What LLM RMs see besides question and answer (repeatable; each is its own RM): none, "
        "profile (top --profile-k posts by BM25), planner (aspects from --planner). Default: profile. "
        "The gold rubric (oracle) is never shown.",
    ),
    mode_option(
        ["pointwise"],
        "LLM RMs score each answer alone on 1-10 (a ranking of N answers needs a score per answer).",
    ),
    profile_k_option("Profile posts shown to LLM RMs."),
    planner_option,
    repair_option("the score"),
    judge_template_options(
        system="System prompt file for LLM RMs.",
        user="User prompt file with {question}, {response} and optionally {profile}, {rubrics} or {context}.",
    ),
)


_run_dir_argument = click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
_bon_dataset_option = click.option(
    "--dataset",
    default=None,
    metavar="SOURCE",
    help="Where the run's questions are now, when the path recorded in run.json moved (checked by fingerprint).",
)


@bon.command("score")
@_run_dir_argument
@click.option(
    "-p",
    "--provider",
    "providers",
    multiple=True,
    metavar="NAME",
    help="Reward model (repeatable): random, length, bm25-profile, embed-profile (all four when none is "
    "given), or an LLM judge as in 'prbj judge'. Rescoring an RM replaces its rows; other RMs stay.",
)
@_rm_options
@_bon_dataset_option
@seed_option("Seed of the random RM.")
@protocol_options
@batch_size_option
@gateway_options
@privacy_options
@batch_options
@concurrency_option(fanned_out("Scoring jobs"))
@progress_option
@ray_options
@friendly_errors
def bon_score(**options: Any) -> None:
    """Score every sample with every RM; pick the best of the first k samples for k = 1, 2, 4, …, N.

    Ties go to the lowest sample index. A sample whose policy call or score failed never wins a pick; it is
    skipped and counted. Writes scores.parquet and picks.parquet into RUN_DIR.

    \b
    Examples:
      prbj bon score reports/bon/<bon-run> -p bm25-profile -p length -p embed-profile
      prbj bon score RUN_DIR -p gemini-3-flash --context profile --max-cost 5
      prbj bon score RUN_DIR -p openai-compatible --api-base http://127.0.0.1:8000/v1
    """
    from prbj.bon.command import run_score_command

    sys.exit(run_score_command(**options))


@bon.command("evaluate")
@_run_dir_argument
@click.option(
    "--gold",
    required=True,
    metavar="PROVIDER",
    help="Gold judge that grades each pick against the rubric aspects (0/1/2 per aspect).",
)
@click.option(
    "--gold-mode",
    type=click.Choice(["per-answer", "per-aspect"]),
    default="per-answer",
    show_default=True,
    help='per-answer: one call lists all aspects, reply {"scores": [..]}; per-aspect: one call per aspect, '
    'reply {"match_score": 0|1|2} (as LaMP-QA).',
)
@_bon_dataset_option
@seed_option("Seed of the bootstrap intervals.")
@protocol_options
@gateway_options
@privacy_options
@batch_options
@concurrency_option(fanned_out("Picks graded"))
@progress_option
@friendly_errors
def bon_evaluate(**options: Any) -> None:
    """Grade the picks with a gold judge; write best-of-k curves per RM × subset × k.

    Question score = sum of aspect scores / (2 × aspects), in [0, 1] (the official 0-2 mean, halved). A pick
    shared by several RMs or k is graded once. Unreadable gold replies are counted, never scored 0.
    Writes gold.parquet, evaluations.parquet, summary.json (mean, std, n, 95% bootstrap CI),
    rms/<rm>/evaluation_summary.json (the official shape, on its 0-2 scale) and downstream.parquet.

    \b
    Examples:
      prbj bon evaluate reports/bon/<bon-run> --gold gpt-5.1
      prbj bon evaluate RUN_DIR --gold gemini-3-flash --gold-mode per-aspect --max-cost 3
      prbj downstream add RUN_DIR && prbj correlate --run reports/<judge-run> --source bon
    """
    from prbj.bon.command import run_evaluate_command

    sys.exit(run_evaluate_command(**options))
