"""The `prbj` command line. Each command parses options, calls one function, and maps errors to exit codes:
0 success, 1 failure of the run itself, 2 bad input or configuration, 130 interrupted."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from prbj import __version__
from prbj.errors import DataError, PrbjError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_INTERRUPTED = 130


def _stderr() -> Console:
    return Console(stderr=True, highlight=False)


def friendly_errors(command: F) -> F:
    """Expected failures become one line on stderr and their exit code; Ctrl-C exits 130 quietly."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except PrbjError as err:
            _stderr().print(f"[bold red]error:[/bold red] {err}", soft_wrap=True)
            sys.exit(err.exit_code)
        except KeyboardInterrupt:
            _stderr().print("interrupted: finished calls are cached; rerun the same command to resume.")
            sys.exit(EXIT_INTERRUPTED)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="prbj")
def main() -> None:
    """prbj runs Personalized RewardBench: does a reward model prefer the answer that fits one
    particular user, when both answers are of equally high general quality?

    \b
    Quick start (no key, no download; bundled demo sample, offline baseline judges):
      prbj judge
    A real model:
      prbj judge --provider gemini-3-flash
    """


@main.command()
@click.option(
    "-p",
    "--provider",
    "providers",
    multiple=True,
    metavar="NAME",
    help="Judge to evaluate; repeat for several. Offline baselines: random, length, bm25-profile, "
    "embed-profile (all four when none is given).",
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
@click.option("--seed", type=int, default=42, show_default=True, help="Seed for random judges and bootstrap.")
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
def judge(
    providers: tuple[str, ...],
    dataset: str,
    subsets: tuple[str, ...],
    limit: int | None,
    seed: int,
    out: Path,
    concurrency: int,
    progress: bool,
    dtype: str,
    device: str,
    trust_remote_code: bool,
    max_length: int,
    batch_tokens: int | None,
) -> None:
    """Judge every pair with every judge; write reports/<run-id>/ and print a leaderboard.

    The run directory holds run.json (configuration, versions, dataset fingerprint),
    judgments.parquet (one row per pair × judge) and summary.json (accuracy per judge and subset
    with 95% bootstrap intervals; identical across reruns with the same seed).

    \b
    Examples:
      prbj judge                                   # offline baselines on the demo sample
      prbj judge -p length -p bm25-profile --subset art --limit 5
      prbj judge --dataset pairs.jsonl --seed 7 --out runs/
      prbj judge -p hf:/models/Skywork-Reward-V2-Qwen3-0.6B --dtype bf16 --max-length 4096
    """
    from prbj.data import load_dataset
    from prbj.judges.registry import JudgeSettings, resolve_judges
    from prbj.judges.scalar import ScalarOptions
    from prbj.report.terminal import print_leaderboard
    from prbj.run import RunConfig, execute

    console = Console()
    scalar = ScalarOptions(
        dtype=dtype,
        device=device,
        trust_remote_code=trust_remote_code,
        max_length=max_length,
        batch_tokens=batch_tokens,
    )
    judges = resolve_judges(providers, JudgeSettings(seed=seed, scalar=scalar))
    data = load_dataset(dataset).select(subsets, limit)
    if not data.pairs:
        raise DataError(f"--dataset {dataset}: no pairs to judge")
    config = RunConfig(
        dataset=dataset,
        subsets=subsets,
        limit=limit,
        seed=seed,
        out_dir=out,
        concurrency=concurrency,
        show_progress=progress,
    )
    result = execute(data, judges, config)
    print_leaderboard(result.summary, console)
    _print_truncations(result.judgments, max_length, console)
    console.print(f"run directory: {result.run_dir}")
    if data.source == "sample":
        console.print(
            "[dim]This is the bundled demo sample, not the benchmark: use "
            "--dataset hf:QiyaoMa/Personalized-RewardBench for real figures.[/dim]"
        )
    if not providers:
        console.print(
            "[dim]Next: evaluate a real reward model, e.g. "
            "GEMINI_API_KEY=... prbj judge --provider gemini-3-flash[/dim]"
        )


def _print_truncations(judgments: Any, max_length: int, console: Console) -> None:
    """Pairs in which a local reward model saw only part of an input: their scores are less trustworthy."""
    import polars as pl

    counts = (
        judgments.filter(pl.col("truncated").is_not_null())
        .group_by("judge", "context", maintain_order=True)
        .agg(pl.col("truncated").sum().alias("cut"), pl.len().alias("n"))
        .filter(pl.col("cut") > 0)
    )
    for judge_name, context, cut, n in counts.iter_rows():
        console.print(
            f"[yellow]{judge_name} ({context}): {cut} of {n} pairs had an input longer than "
            f"--max-length {max_length} tokens; its middle was cut (column 'truncated').[/yellow]"
        )


if __name__ == "__main__":
    main()
