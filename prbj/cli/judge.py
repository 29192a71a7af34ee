"""`prbj judge`: judge every pair with every judge."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from prbj.cli.options import gateway_options
from prbj.cli.support import friendly_errors


@click.command()
@click.option(
    "-p",
    "--provider",
    "providers",
    multiple=True,
    metavar="NAME",
    help="Judge to evaluate; repeat for several. Offline: random, length, bm25-profile, embed-profile (all four "
    "when none is given). LLM judges: a profile from `prbj providers` (e.g. gemini-3-flash), "
    "litellm:<model-id>, or hf-local:<path-or-id> (a Hugging Face causal LM run in-process).",
)
@click.option(
    "--dataset",
    default="sample",
    show_default=True,
    metavar="SOURCE",
    help="Pairs to judge: 'sample' (bundled demo), a .jsonl/.json/.parquet file, a folder of Parquet files "
    "as published on the hub (<subset>/test-*.parquet), or hf:QiyaoMa/Personalized-RewardBench.",
)
@click.option(
    "--subset",
    "subsets",
    multiple=True,
    metavar="NAME",
    help="Keep only this subset (repeatable; unambiguous prefixes work, e.g. 'art'). Default: all.",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many pairs per subset.")
@click.option(
    "--seed",
    type=int,
    default=42,
    show_default=True,
    help="Seed for the A/B order draw (42 as in the official script), random judges and bootstrap.",
)
@click.option(
    "--context",
    "contexts",
    multiple=True,
    type=click.Choice(["none", "profile", "planner", "oracle"]),
    help="What LLM judges see besides question and answers (repeatable; each reported apart): none, profile "
    "(top --profile-k past posts ranked by BM25), planner (aspects inferred by --planner), oracle (the gold "
    "rubric: an upper bound, not a fair result). Default: profile.",
)
@click.option(
    "--profile-k", type=click.IntRange(min=1), default=10, show_default=True, help="Profile posts shown."
)
@click.option("--planner", metavar="PROVIDER", help="Provider that turns profile + question into aspects.")
@click.option(
    "--mode",
    type=click.Choice(["pairwise", "pointwise"]),
    default="pairwise",
    show_default=True,
    help="pairwise: one call shows both answers (A/B); pointwise: each answer scored 1-10 alone.",
)
@click.option(
    "--order",
    type=click.Choice(["random", "both"]),
    default="random",
    show_default=True,
    help="random: chosen answer's position drawn per pair from --seed; both: judge each pair in both orders "
    "(correct only if both verdicts pick the chosen answer; reports order consistency).",
)
@click.option(
    "--repair/--no-repair", default=False, help="Ask once more for the verdict line when unparseable."
)
@click.option(
    "--judge-template-system",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="System prompt file for LLM judges (e.g. the official repository's).",
)
@click.option(
    "--judge-template-user",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="User prompt file with {question}, {Response_A}, {Response_B} (pointwise: {response}) and optionally "
    "{profile}, {rubrics} or {context}.",
)
@click.option(
    "--fail-on-error",
    type=click.FloatRange(0, 1),
    default=None,
    metavar="FRACTION",
    help="Exit 1 when the share of parse, API and skipped judgments exceeds FRACTION (e.g. 0.02).",
)
@gateway_options
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports"),
    show_default=True,
    help="Folder in which the run directory <run-id>/ is written.",
)
@click.option(
    "--concurrency", type=click.IntRange(min=1), default=16, show_default=True, help="Pairs judged at once."
)
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar.")
@click.option(
    "--dtype",
    type=click.Choice(["auto", "bf16", "fp16", "fp32"]),
    default="auto",
    show_default=True,
    help="Weights and activations of hf: reward models; auto = bf16 on a GPU, fp32 on a CPU.",
)
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="Where hf: reward models run; auto = cuda when available.",
)
@click.option(
    "--trust-remote-code",
    is_flag=True,
    default=False,
    help="Allow hf: reward models that ship their own Python code to run it (only for models you trust).",
)
@click.option(
    "--max-length",
    type=click.IntRange(min=2),
    default=8192,
    show_default=True,
    help="Longest input, in tokens, of hf: reward models; longer ones lose their middle and are flagged "
    "'truncated'.",
)
@click.option(
    "--batch-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Padded tokens per forward pass of hf: reward models (bounds memory; scores do not depend on it). "
    "Default: 16384 on a GPU, 4096 on a CPU. On a GPU raise --concurrency too, so that more answers wait "
    "to be batched.",
)
@friendly_errors
def judge(**options: Any) -> None:
    """Judge every pair with every judge; write reports/<run-id>/ and print a leaderboard.

    The run directory holds run.json (configuration, versions, dataset fingerprint, prompt hashes,
    calls and spend), judgments.parquet (one row per pair × judge × context) and summary.json
    (accuracy per judge, context and subset with 95% bootstrap intervals, ties, failures, position
    bias and length control; identical across reruns with the same seed).

    Every model call goes through one cache: rerunning a command, or resuming after Ctrl-C, pays only
    for what is missing.

    \b
    Examples:
      prbj judge                                   # offline baselines on the demo sample
      prbj judge -p length -p bm25-profile --subset art --limit 5
      prbj judge --dataset pairs.jsonl --seed 7 --out runs/
      GEMINI_API_KEY=... prbj judge -p gemini-3-flash --context none --context profile
      prbj judge -p gpt-5.1 --order both --max-cost 2.50 --dry-run
      prbj judge -p claude-sonnet-4-5 --context planner --planner gemini-3-flash
      prbj judge -p litellm:openai/Qwen/Qwen3-8B --api-base http://127.0.0.1:8000/v1
      prbj judge -p hf:/models/Skywork-Reward-V2-Qwen3-0.6B --dtype bf16 --max-length 4096
      prbj judge -p hf-local:./SmolLM2-135M-Instruct.Q4_1.gguf --limit 2
    """
    from prbj.runs.command import run_judge_command

    sys.exit(run_judge_command(**options))
