"""`prbj judge`: judge every pair with every judge."""

from __future__ import annotations

import sys
from typing import Any

import click

from prbj.cli.beyond_options import beyond_options
from prbj.cli.confidence_options import confidence_options
from prbj.cli.options import (
    batch_options,
    batch_size_option,
    benchmark_options,
    concurrency_option,
    context_option,
    dataset_options,
    fanned_out,
    gateway_options,
    judge_template_options,
    mode_option,
    order_option,
    out_option,
    planner_option,
    privacy_options,
    profile_k_option,
    progress_option,
    protocol_options,
    ray_options,
    repair_option,
    scalar_options,
    seed_option,
    synthesis_option,
    synthesizer_option,
)
from prbj.cli.sections import SectionedCommand
from prbj.cli.support import friendly_errors
from prbj.data.schema import CONTEXTS

# The options most runs use come first in --help; the rest follow by what they are for.
JUDGE_SECTIONS = (
    (
        "Common options",
        ["providers", "dataset", "benchmark", "subsets", "limit", "contexts", "max_cost", "dry_run", "out", "seed"],
    ),
    (
        "How the judges are asked",
        ["profile_k", "profile_order", "planner", "synthesizer", "synthesis", "mode", "order", "repair", "retry_failed",
         "judge_template_system", "judge_template_user", "protocol", "official_repo"],
    ),
    (
        "Calls: cache, providers, limits, batch",
        ["cache_only", "cache_dir", "api_base", "providers_dir", "env_file", "reasoning_effort", "rpm", "tpm",
         "input_tpm", "output_tpm", "max_concurrency", "timeout", "batch", "wait", "concurrency", "fail_on_error",
         "progress"],
    ),
    (
        "Scalar reward models (hf:)",
        ["dtype", "device", "trust_remote_code", "max_length", "batch_tokens", "scalar_input"],
    ),
    ("Your own reward model (py:, docs/plugins.md)", ["batch_size"]),
    ("Beyond accuracy", ["samples", "temperature", "jury", "slices", "compare"]),
    ("How sure is the judge", ["confidence", "selective", "escalate_to", "escalate_below"]),
    (
        "Personal data (docs/privacy.md)",
        [
            "personal_data",
            "pseudonymize_answers",
            "ner_model",
            "keep_entities",
            "pseudonymize_terms",
            "private_dir",
        ],
    ),
    ("Local models on a Ray cluster", ["ray", "gpus_per_model", "cpus_per_model", "replicas"]),
)  # fmt: skip

# Shown after the options; tests/doc_examples.py runs each of them as written.
JUDGE_EXAMPLES = (
    "prbj judge                                   # offline baselines on the demo sample",
    "prbj judge -p length -p bm25-profile --subset art --limit 5",
    "prbj judge --dataset pairs.jsonl --seed 7 --out runs/",
    "prbj judge --benchmark prism --dry-run          # a benchmark's bundled sample: what it would cost",
    "prbj judge --benchmark personal-reward-bench -p bm25-profile -p length",
    "GEMINI_API_KEY=... prbj judge -p gemini-3-flash --context none --context profile",
    "prbj judge -p gpt-5.1 --order both --max-cost 2.50 --dry-run",
    "prbj judge -p claude-sonnet-4-6 --context planner --planner gemini-3-flash",
    "prbj judge --benchmark personal-reward-bench -p gpt-5.1 --context none --context synthesized"
    " --synthesizer gemini-3-flash --dry-run",
    "prbj judge -p litellm:openai/Qwen/Qwen3-8B --api-base http://127.0.0.1:8000/v1",
    "prbj judge -p hf:/models/Skywork-Reward-V2-Qwen3-0.6B --dtype bf16 --max-length 4096",
    "prbj judge -p hf-local:./SmolLM2-135M-Instruct.Q4_1.gguf --limit 2",
    "prbj judge -p py:examples/rms/user_head.py:UserHead --dataset examples/rms/tastes.jsonl",
    "prbj judge -p litellm:openai/Qwen/Qwen3-8B --protocol official --official-repo"
    " ../Personalized-RewardBench",
    "prbj judge -p gemini-3-flash --context profile --context swapped-profile --context none",
    "prbj judge -p gemini-3-flash -p gpt-5.1 -p claude-sonnet-4-6 --jury"
    " trio=gemini-3-flash,gpt-5.1,claude-sonnet-4-6",
    "prbj judge -p gemini-3-flash --samples 5 --slice all --compare",
    "prbj judge -p embed-profile --confidence available",
    "prbj judge -p litellm:openai/Qwen/Qwen3-8B --api-base http://127.0.0.1:8000/v1 --confidence logprobs",
    "prbj judge -p gemini-3-flash --escalate-to gemini-3.1-pro --escalate-below 0.8 --confidence logprobs",
    "prbj judge -p gpt-5.1 --dataset pairs.jsonl --personal-data pseudonymized",
)


@click.command(cls=SectionedCommand, sections=JUDGE_SECTIONS, examples=JUDGE_EXAMPLES)
@click.option(
    "-p",
    "--provider",
    "providers",
    multiple=True,
    metavar="NAME",
    help="Judge to evaluate; repeat for several. Offline: random, length, bm25-profile, embed-profile (all four "
    "when none is given). LLM judges: a profile from `prbj providers` (e.g. gemini-3-flash), "
    "litellm:<model-id>, or hf-local:<path-or-id> (a Hugging Face causal LM run in-process). Scalar RMs: "
    "hf:<path-or-hub-id>. Your own reward model: py:FILE.py:NAME, py:package.module:NAME, or the name it was "
    "installed under (docs/plugins.md).",
)
@dataset_options(
    dataset="Pairs to judge: 'sample' (the benchmark's bundled sample), a .jsonl/.json/.parquet file, a folder "
    "of Parquet files as published on the hub (<subset>/test-*.parquet), or hf:<repo> (e.g. "
    "hf:QiyaoMa/Personalized-RewardBench). Records with a user_id are the per-user layout "
    "(docs/benchmarks.md): only their test rows are judged.",
    subset="Keep only this subset (repeatable; unambiguous prefixes work, e.g. 'art'). Default: all.",
    limit="At most this many pairs per subset.",
)
@benchmark_options(
    "Which benchmark the data is: prb (default), personal-reward-bench, prism, persona-feedback, persona, "
    "personamem, personal-llm, pal-tldr, or your own card FILE.toml mapping your columns (docs/benchmarks.md). "
    "Without --dataset, its bundled sample."
)
@seed_option(
    "Seed for the A/B order draw (drawn per pair; --protocol official draws the official script's stream), "
    "random judges and bootstrap."
)
@context_option(
    CONTEXTS,
    "What LLM judges see besides question and answers (repeatable; each reported apart): none, profile "
    "(top --profile-k past posts ranked by BM25), planner (aspects inferred by --planner), oracle (the gold "
    "rubric: an upper bound, not a fair result), swapped-profile (another user's profile, drawn from --seed: "
    "with profile, gives the judge's profile reliance), synthesized (a persona --synthesizer wrote from the "
    "user's earlier choices, as in SynthesizeMe). Default: profile.",
)
@profile_k_option(
    "Profile items a judge sees: past posts, or a user's earlier choices. Default: the benchmark card's "
    "(10 on PRB).",
    default=None,
)
@planner_option
@synthesizer_option
@synthesis_option
@mode_option(
    ["pairwise", "pointwise"],
    "pairwise: one call shows both answers (A/B); pointwise: each answer scored 1-10 alone.",
)
@order_option
@repair_option("the verdict line")
@judge_template_options(
    system="System prompt file for LLM judges (e.g. the official repository's).",
    user="User prompt file with {question}, {Response_A}, {Response_B} (pointwise: {response}) and optionally "
    "{profile}, {rubrics} or {context}.",
)
@protocol_options
@click.option(
    "--fail-on-error",
    type=click.FloatRange(0, 1),
    default=None,
    metavar="FRACTION",
    help="Exit 1 when the share of parse, API and skipped judgments exceeds FRACTION (e.g. 0.02).",
)
@gateway_options
@privacy_options
@batch_options
@out_option("Folder in which the run directory <run-id>/ is written.")
@concurrency_option(fanned_out("Pairs judged"))
@progress_option
@scalar_options
@batch_size_option
@beyond_options
@confidence_options
@ray_options
@friendly_errors
def judge(**options: Any) -> None:
    """Judge every pair with every judge; write reports/<run-id>/ and print a leaderboard.

    The run directory holds run.json (configuration, versions, dataset fingerprint, prompt hashes,
    calls and spend), judgments.parquet (one row per pair × judge × context) and summary.json
    (accuracy per judge, context and subset with 95% intervals, over users where users repeat; ties,
    failures, position bias and length control; identical across reruns with the same seed).

    Every model call goes through one cache: rerunning a command, or resuming after Ctrl-C, pays only
    for what is missing.
    """
    from prbj.runs.collector import kept_for_the_run

    with kept_for_the_run():  # the run's modules are kept to its end too (~0.04 s of collections otherwise)
        from prbj.runs.command import run_judge_command

    sys.exit(run_judge_command(**options))
