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
from prbj.errors import PrbjError

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


def _parse_duration(value: str) -> float:
    """'90s', '30m', '12h', '7d' or plain seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    text = value.strip().lower()
    try:
        if text and text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except ValueError:
        raise click.BadParameter(f"{value!r}: use a number with s, m, h, d or w (e.g. 7d)") from None


@main.command()
@click.option(
    "-p",
    "--provider",
    "providers",
    multiple=True,
    metavar="NAME",
    help="Judge to evaluate; repeat for several. Offline: random, length, bm25-profile, embed-profile (all four "
    "when none is given). LLM judges: a profile from `prbj providers` (e.g. gemini-3-flash) or "
    "litellm:<model-id>.",
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
@click.option(
    "--max-cost", type=click.FloatRange(min=0), default=None, metavar="USD", help="Hard cap on spend."
)
@click.option(
    "--dry-run", is_flag=True, help="Print calls needed, cached, tokens and USD per provider; send nothing."
)
@click.option(
    "--cache-only", is_flag=True, help="Send nothing: answer from the cache, report what is missing."
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Response cache folder [default: $PRBJ_CACHE_DIR or ./cache].",
)
@click.option("--api-base", metavar="URL", help="Send the provider's requests to this base URL instead.")
@click.option(
    "--providers-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="PRBJ_PROVIDERS_DIR",
    help="Folder of provider profiles that override/add to the bundled ones [env: PRBJ_PROVIDERS_DIR].",
)
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Read API keys from this .env file (variables already set win).",
)
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
    """
    from prbj.judge_command import run_judge_command

    sys.exit(run_judge_command(**options))


@main.command("providers")
@click.option(
    "--providers-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="PRBJ_PROVIDERS_DIR",
    help="Folder of extra/overriding provider profiles [env: PRBJ_PROVIDERS_DIR].",
)
@friendly_errors
def providers_command(providers_dir: Path | None) -> None:
    """List provider profiles: model id, key variable (and whether it is set), limits and prices.

    Keys are never shown. Prices are USD per million tokens, from the profile or LiteLLM's price map.

    \b
    Example:
      prbj providers --providers-dir ~/my-providers
    """
    from prbj.providers import list_providers
    from prbj.report.terminal import providers_table

    Console().print(providers_table(list_providers(providers_dir)))


@main.group("cache")
def cache_group() -> None:
    """Inspect and trim the response cache (default ./cache, or $PRBJ_CACHE_DIR).

    \b
    Examples:
      prbj cache stats
      prbj cache prune --older-than 30d
      prbj cache clear --yes
    """


_cache_dir_option = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Cache folder [default: $PRBJ_CACHE_DIR or ./cache].",
)


@cache_group.command("stats")
@_cache_dir_option
@friendly_errors
def cache_stats(cache_dir: Path | None) -> None:
    """Entries by kind and size on disk."""
    from prbj.llm.cache import ResponseCache

    with ResponseCache(cache_dir) as cache:
        stats = cache.stats()
    kinds = ", ".join(f"{kind}: {count}" for kind, count in sorted(stats.by_kind.items())) or "empty"
    Console().print(f"{stats.directory}: {stats.entries} entries ({kinds}), {stats.size_bytes / 1e6:.1f} MB")


@cache_group.command("clear")
@_cache_dir_option
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@friendly_errors
def cache_clear(cache_dir: Path | None, yes: bool) -> None:
    """Delete every entry (paid answers included: a rerun pays again)."""
    from prbj.llm.cache import ResponseCache

    with ResponseCache(cache_dir) as cache:
        if not yes:
            click.confirm(f"Delete all {cache.stats().entries} entries in {cache.directory}?", abort=True)
        Console().print(f"deleted {cache.clear()} entries")


@cache_group.command("prune")
@_cache_dir_option
@click.option("--older-than", required=True, metavar="AGE", help="Age such as 90s, 30m, 12h, 7d, 4w.")
@friendly_errors
def cache_prune(cache_dir: Path | None, older_than: str) -> None:
    """Delete entries stored longer ago than AGE."""
    from prbj.llm.cache import ResponseCache

    seconds = _parse_duration(older_than)
    with ResponseCache(cache_dir) as cache:
        Console().print(f"deleted {cache.prune(seconds)} entries older than {older_than}")


if __name__ == "__main__":
    main()
