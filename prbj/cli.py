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
from rich.markup import escape

from prbj import __version__
from prbj.cli_options import gateway_options
from prbj.errors import DataError, PrbjError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_INTERRUPTED = 130


def _stderr() -> Console:
    return Console(stderr=True, highlight=False)


def _first(group: BaseExceptionGroup) -> PrbjError:
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            return _first(error)
        if isinstance(error, PrbjError):
            return error
    raise group


def friendly_errors(command: F) -> F:
    """Expected failures become one line on stderr and their exit code; Ctrl-C exits 130 quietly."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except PrbjError as err:
            # Escaped: messages name things like "[price]" that Rich would take for markup and drop.
            _stderr().print(f"[bold red]error:[/bold red] {escape(str(err))}", soft_wrap=True)
            sys.exit(err.exit_code)
        except BaseExceptionGroup as group:
            # Raised inside the engine's task group (e.g. a model that fails to load mid-run): same one line.
            err = _first(group)
            _stderr().print(f"[bold red]error:[/bold red] {escape(str(err))}", soft_wrap=True)
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


def _parse_k(value: str) -> int | str:
    if value in ("max", "all"):
        return value
    try:
        k = int(value)
    except ValueError:
        raise click.BadParameter("expected 'max', 'all' or a whole number such as 16") from None
    if k < 1:
        raise click.BadParameter("k must be at least 1")
    return k


@main.command()
@click.option(
    "--run",
    "runs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="prbj run directory (reports/<run-id>/) whose accuracies are this benchmark's column; repeatable.",
)
@click.option(
    "--judge",
    "judges",
    multiple=True,
    metavar="NAME",
    help="Keep only these judges from the runs (repeatable). Default: all.",
)
@click.option(
    "--context",
    type=click.Choice(["none", "profile", "planner", "oracle"]),
    default=None,
    help="Keep only judgments made in this context. Needed when a judge ran in several contexts.",
)
@click.option(
    "--map",
    "mappings",
    multiple=True,
    metavar="JUDGE=RM",
    help="RM name of a judge, as the downstream table names it (JUDGE@CONTEXT=RM for one context); "
    "repeatable. Unmapped judges keep their own name.",
)
@click.option(
    "--benchmarks",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="CSV",
    help="Other benchmarks' accuracies, columns rm, benchmark, accuracy (e.g. RewardBench, PRISM); "
    "each benchmark is one more column.",
)
@click.option(
    "--benchmark-name",
    default="Personalized-RewardBench",
    show_default=True,
    help="Name of the column built from --run directories.",
)
@click.option(
    "--benchmark-subset",
    type=click.Choice(["all", "same"]),
    default="all",
    show_default=True,
    help="Accuracy the --run column uses: over all subsets, or on the downstream table's own subset.",
)
@click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports/downstream"),
    show_default=True,
    help="Downstream store written by 'prbj downstream add'.",
)
@click.option(
    "--source",
    "sources",
    multiple=True,
    metavar="NAME",
    help="Keep only these downstream sources (bon, ppo, ...).",
)
@click.option(
    "--k",
    "k_choice",
    default="max",
    show_default=True,
    metavar="K|max|all",
    help="Best-of-k to use: a number, 'max' (the k most RMs share, largest on a tie) or 'all' (one row per k).",
)
@click.option(
    "--rbo-p",
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    default=0.9,
    show_default=True,
    help="Persistence p of rank-biased overlap (weight of the top ranks).",
)
@click.option(
    "--resamples",
    type=click.IntRange(min=100),
    default=2000,
    show_default=True,
    help="Bootstrap resamples per interval.",
)
@click.option("--seed", type=int, default=42, show_default=True, help="Seed of the bootstrap.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports/correlation"),
    show_default=True,
    help="Folder for correlation.json and correlation.md.",
)
@friendly_errors
def correlate(
    runs: tuple[Path, ...],
    judges: tuple[str, ...],
    context: str | None,
    mappings: tuple[str, ...],
    benchmarks: Path | None,
    benchmark_name: str,
    benchmark_subset: str,
    store: Path,
    sources: tuple[str, ...],
    k_choice: str,
    rbo_p: float,
    resamples: int,
    seed: int,
    out: Path,
) -> None:
    """How well benchmark accuracy predicts downstream rank: Spearman ρ, Kendall τ-b, weighted τ,
    Pearson r, NDCG and RBO between each benchmark column and each downstream table (source × subset
    × k), with bootstrap intervals over RMs and, for prbj runs, over benchmark items.

    RMs present on one side only are listed and left out; a pairing needs at least 3 shared RMs.
    Formulas: docs/correlation.md.

    \b
    Examples:
      prbj correlate --run reports/20260101-120000-abc123 --map bm25-profile=RM-A
      prbj correlate --run reports/run1 --run reports/run2 --context profile --benchmarks other.csv
      prbj correlate --benchmarks accuracies.csv --source bon --k all --out reports/corr-bon
    """
    from prbj.benchmark_scores import RunSelection, load_benchmark_csv, load_prbj_runs, parse_mapping
    from prbj.correlate_run import CorrelateConfig, write_report
    from prbj.correlate_run import correlate as correlate_tables
    from prbj.downstream import read_store
    from prbj.report.correlation import comparison_table, markdown, notes

    try:
        k = _parse_k(k_choice)
    except click.BadParameter as err:
        raise DataError(f"--k {k_choice!r}: {err.message}") from None
    mapping = parse_mapping(mappings)
    if mapping and not runs:
        raise DataError("--map renames judges of --run directories; give at least one --run")
    prbj_benchmark = (
        load_prbj_runs(RunSelection(runs, judges, context, mapping), name=benchmark_name) if runs else None
    )
    external = load_benchmark_csv(benchmarks) if benchmarks else {}
    config = CorrelateConfig(
        k=k,  # type: ignore[arg-type]
        sources=sources,
        benchmark_subset=benchmark_subset,  # type: ignore[arg-type]
        rbo_p=rbo_p,
        resamples=resamples,
        seed=seed,
        inputs={
            "runs": [str(r) for r in runs],
            "judges": list(judges),
            "context": context,
            "map": mapping,
            "benchmarks": str(benchmarks) if benchmarks else None,
            "store": str(store),
            "sources": list(sources),
        },
    )
    report = correlate_tables(read_store(store), prbj_benchmark, external, config)
    console = Console()
    console.print(comparison_table(report, compact=console.width < 120))
    for line in notes(report):
        console.print(f"[dim]{line}[/dim]", soft_wrap=True)
    json_path, md_path = write_report(report, out, markdown(report))
    console.print(f"wrote {json_path} and {md_path}")


@main.group()
def downstream() -> None:
    """Downstream outcomes per reward model (best-of-N, PPO, ...), the targets of 'prbj correlate'.

    \b
    Examples:
      prbj downstream add BoN/data/evaluation_summary.json --rm Skywork-Reward-V2-Llama-3.1-8B
      prbj downstream add ppo_results.csv
      prbj downstream show
    """


@downstream.command("add")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--rm",
    default=None,
    metavar="NAME",
    help="RM the file's outcomes belong to: required for evaluation_summary.json, fills a missing rm column.",
)
@click.option(
    "--source",
    default=None,
    metavar="NAME",
    help="Label of how the outcomes were produced. Default: the file's source column, else 'bon' for "
    "evaluation_summary.json and downstream tables, 'ppo' for CSV/JSON records.",
)
@click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports/downstream"),
    show_default=True,
    help="Folder holding downstream.parquet; created when missing.",
)
@friendly_errors
def downstream_add(paths: tuple[Path, ...], rm: str | None, source: str | None, store: Path) -> None:
    """Add downstream outcomes to the store; rows with the same (rm, source, subset, k) are replaced.

    \b
    Inputs, by shape:
      evaluation_summary.json  official BoN summary {subset: {k: {mean_score, std_score, num_examples}}}
      *.csv, *.json, *.jsonl   records with rm, subset, score [, source, k, n, std] (e.g. PPO results)
      *.parquet or a folder    a downstream table (a prbj BoN run holds downstream.parquet)

    \b
    Examples:
      prbj downstream add BoN/data/evaluation_summary.json --rm Skywork-Reward-V2-Llama-3.1-8B
      prbj downstream add ppo_results.csv --store reports/downstream
      prbj downstream add reports/bon-run/ --source bon-qwen0.5b
    """
    from prbj.downstream import add_outcomes, read_outcomes

    outcomes = [o for path in paths for o in read_outcomes(path, rm=rm, source=source)]
    result = add_outcomes(store, outcomes)
    rms = sorted({o.rm for o in outcomes})
    Console().print(
        f"{result.added} row(s) added, {result.replaced} replaced for {len(rms)} RM(s) "
        f"({', '.join(rms)}); {result.total} in {result.path}",
        soft_wrap=True,
    )


@downstream.command("show")
@click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports/downstream"),
    show_default=True,
    help="Folder holding downstream.parquet.",
)
@friendly_errors
def downstream_show(store: Path) -> None:
    """Print the downstream table, one row per RM × source × subset × k.

    \b
    Examples:
      prbj downstream show
      prbj downstream show --store runs/downstream
    """
    from rich.table import Table

    from prbj.downstream import read_store

    frame = read_store(store)
    table = Table(title=f"downstream outcomes ({frame.height} rows)")
    for column in ("rm", "source", "subset", "k", "score", "n", "std"):
        table.add_column(column, justify="right" if column in ("k", "score", "n", "std") else "left")
    for row in frame.iter_rows(named=True):
        table.add_row(
            *(
                "—" if row[c] is None else f"{row[c]:.4f}" if isinstance(row[c], float) else str(row[c])
                for c in ("rm", "source", "subset", "k", "score", "n", "std")
            )
        )
    Console().print(table)


@main.command()
@click.option(
    "-p",
    "--provider",
    required=True,
    metavar="NAME",
    help="Judge that scores answers, as in 'prbj judge' (offline: random, length, bm25-profile, embed-profile).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=8000,
    show_default=True,
    help="Port to listen on (0 picks a free one and prints it).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Judge calls in flight at once; further requests wait.",
)
@click.option("--seed", type=int, default=42, show_default=True, help="Seed for random judges.")
@click.option(
    "--context",
    type=click.Choice(["none", "profile", "planner"]),
    default=None,
    help="What an LLM judge sees besides query and response: none, profile (top --profile-k posts of the "
    "request's profile) or planner (aspects from --planner). Default: profile.",
)
@click.option(
    "--mode",
    type=click.Choice(["pointwise"]),
    default="pointwise",
    show_default=True,
    help="LLM judges score each response alone on 1-10 (a reward needs one score per response).",
)
@click.option(
    "--profile-k", type=click.IntRange(min=1), default=10, show_default=True, help="Profile posts shown."
)
@click.option("--planner", metavar="PROVIDER", help="Provider that turns profile + question into aspects.")
@click.option("--repair/--no-repair", default=False, help="Ask once more for the score when unparseable.")
@gateway_options
@friendly_errors
def serve(
    provider: str,
    host: str,
    port: int,
    concurrency: int,
    seed: int,
    context: str | None,
    mode: str,
    profile_k: int,
    planner: str | None,
    repair: bool,
    **gateway_settings: Any,
) -> None:
    """Serve a judge as an HTTP reward model for PPO trainers (verl, TRL, OpenRLHF).

    \b
    POST /score        {response_text, query, profile}  ->  {"score": float}
    POST /score/batch  {"items": [{...}, ...]}          ->  {"scores": [float, ...]}
    POST /get_reward   OpenRLHF remote RM {query, prompts, labels}  ->  {"rewards": [...]}
    GET  /health       ->  {"status": "ok", "judge": ..., "context": ...}
    Add ?scale=0.1 to a URL for reward = score / 10, as the official PPO setup.

    Stops on Ctrl-C or SIGTERM. Recipes for each trainer: docs/serving.md.

    \b
    LLM judges score through the response cache, with the provider's limits and --max-cost: a response
    seen before costs nothing, and past the budget requests fail (500) rather than spend more.

    \b
    Examples:
      prbj serve -p bm25-profile
      prbj serve -p embed-profile --host 0.0.0.0 --port 8000 --concurrency 32
      GEMINI_API_KEY=... prbj serve -p gemini-3-flash --context profile --max-cost 20
      prbj serve -p openai-compatible --api-base http://127.0.0.1:8001/v1 --cache-dir cache/
    """
    import asyncio

    from prbj.judge_setup import PointwiseJudgeOptions, build_pointwise_judges
    from prbj.llm.setup import GatewayOptions
    from prbj.serve import serve as serve_judge
    from prbj.serve import served_context

    del mode  # the only mode a reward server can use
    shared = GatewayOptions.pop_from(gateway_settings)
    if shared.dry_run:
        raise DataError(
            "--dry-run: a server answers live requests; use --cache-only to serve cached scores only"
        )
    gateway = shared.open()
    options = PointwiseJudgeOptions(
        seed=seed,
        contexts=(context,) if context else (),
        profile_k=profile_k,
        planner=planner,
        repair=repair,
    )
    (judge,), _ = build_pointwise_judges([provider], options, shared, gateway)
    context = served_context(judge)

    def ready(url: str) -> None:
        click.echo(
            f"prbj serve: judge {judge.name} (context {context}) listening on {url} "
            "(POST /score, POST /score/batch, POST /get_reward, GET /health); Ctrl-C stops"
        )
        sys.stdout.flush()

    try:
        asyncio.run(serve_judge(judge, host=host, port=port, concurrency=concurrency, on_ready=ready))
    finally:
        if gateway.cache is not None:
            gateway.cache.close()
    usage = [s.as_dict() for s in gateway.stats()]
    if usage:
        from prbj.report.terminal import usage_table

        Console().print(usage_table(usage))
    click.echo("prbj serve: stopped")


@main.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for report.md, report.html and plots/. Default: the run directory for one run; "
    "<parent of the first run>/leaderboard for several.",
)
@click.option("--title", default=None, metavar="TEXT", help="Title of the report (default: the run id).")
@click.option(
    "--downstream",
    "downstream",
    multiple=True,
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Downstream outcomes to draw against the runs' judges (repeatable): a `prbj downstream` store "
    "such as reports/downstream, a downstream .parquet, or CSV/JSON records with rm, subset, score.",
)
@click.option("--quiet", is_flag=True, help="Write the files but print no tables on the terminal.")
@friendly_errors
def report(
    run_dirs: tuple[Path, ...], out: Path | None, title: str | None, downstream: tuple[Path, ...], quiet: bool
) -> None:
    """Render run directories as a terminal report, report.md and a self-contained report.html.

    The HTML file opens offline (inline charts, no scripts): accuracy per judge × subset × context
    with 95% intervals, position bias, raw vs length-controlled accuracy, cost per 100 judgments,
    and best-of-k curves with a benchmark-vs-downstream scatter when there are downstream outcomes
    (a downstream.parquet in a run directory, or --downstream). Several runs make one leaderboard.

    \b
    Examples:
      prbj report reports/20250101-120000-abc123
      prbj report reports/*/ --out reports/leaderboard --title "RMs on the full benchmark"
      prbj report reports/<run-id> --downstream reports/downstream
    """
    from prbj.report.writer import write_reports

    # Not a terminal (CI logs, pipes): Rich would squeeze the tables into 80 columns.
    console = Console() if Console().is_terminal else Console(width=140)
    runs = _run_dirs_for_report(run_dirs)
    target = out if out is not None else (None if len(runs) == 1 else runs[0].parent / "leaderboard")
    files = write_reports(
        runs, target, console=None if quiet else console, title=title, downstream=downstream
    )
    console.print(f"report: {files.markdown} and {files.html}", highlight=False, soft_wrap=True)


def _run_dirs_for_report(paths: tuple[Path, ...]) -> list[Path]:
    """Every path must exist; with several (a shell glob over reports/*), folders that are not runs, such as
    reports/baselines or an earlier leaderboard, are skipped with a note instead of stopping the report."""
    from prbj.report.load import SUMMARY_FILE

    for path in paths:
        if not path.exists():
            raise DataError(f"{path}: no such run directory")
    if len(paths) == 1:
        return list(paths)
    runs = []
    for path in paths:
        if path.is_dir() and (path / SUMMARY_FILE).exists():
            runs.append(path)
        else:
            _stderr().print(f"note: skipped {path}: not a run directory ({SUMMARY_FILE} missing)")
    if not runs:
        raise DataError(f"none of the {len(paths)} paths is a run directory ({SUMMARY_FILE} missing)")
    return runs


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--baseline",
    "baseline_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Baseline file to compare with (e.g. reports/baselines/sample-offline.json).",
)
@click.option(
    "--update-baseline",
    is_flag=True,
    help="Write the run's results to --baseline instead of checking (overwrites the file).",
)
@click.option(
    "--tolerance",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="Accuracy may drop by this many percentage points before the drop is tested.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=0.05,
    show_default=True,
    help="Significance level of McNemar's paired test (exact binomial below 25 discordant items).",
)
@click.option(
    "--max-error-rate",
    type=click.FloatRange(min=0, max=1),
    default=0.05,
    show_default=True,
    help="Fail when a larger share of a group's judgments failed (parse/API error, budget skip); 1 disables.",
)
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0),
    default=None,
    metavar="USD",
    help="Fail when the run spent more (cost_usd of judgments not served from the cache).",
)
@click.option("--judge", "judges", multiple=True, metavar="NAME", help="Check only this judge (repeatable).")
@click.option(
    "--subset",
    "subsets",
    multiple=True,
    metavar="NAME",
    help="Check only this subset (repeatable; 'all' is the overall row; prefixes such as 'art' work).",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="A Rich table for people, or JSON on stdout for machines.",
)
@friendly_errors
def check(
    run_dir: Path,
    baseline_path: Path,
    update_baseline: bool,
    tolerance: float,
    alpha: float,
    max_error_rate: float,
    max_cost: float | None,
    judges: tuple[str, ...],
    subsets: tuple[str, ...],
    output_format: str,
) -> None:
    """Gate a run against a baseline: exit 1 on a significant accuracy drop, too many failed
    judgments or too much spend; exit 0 otherwise (a drop that is not significant only warns).

    Per judge × context × subset, a drop counts when accuracy fell by more than --tolerance points
    AND McNemar's test on the items both runs judged gives p < --alpha. Exit 2 when the baseline or
    run cannot be read, was made on other data, or a baseline judge or subset is missing from the run.

    \b
    Examples:
      prbj check reports/<run-id> --baseline reports/baselines/sample-offline.json
      prbj check reports/<run-id> --baseline base.json --tolerance 1 --alpha 0.01 --format json
      prbj check reports/<run-id> --baseline base.json --update-baseline   # accept the new figures
    """
    from prbj.baseline import baseline_from_run, read_baseline, write_baseline
    from prbj.check import CheckSettings, check_run
    from prbj.report.check_view import check_json, print_check
    from prbj.report.load import load_run

    # CI logs are not terminals; Rich would squeeze the table into 80 columns there.
    console = Console() if Console().is_terminal else Console(width=120)
    run = load_run(run_dir)
    if update_baseline:
        baseline = baseline_from_run(run)
        write_baseline(baseline, baseline_path)
        console.print(
            f"baseline written: {baseline_path} ({len(baseline.results)} result rows, "
            f"{len(baseline.items)} items, from run {baseline.source_run})",
            highlight=False,
            soft_wrap=True,
        )
        return
    settings = CheckSettings(
        tolerance_points=tolerance,
        alpha=alpha,
        max_error_rate=max_error_rate,
        max_cost_usd=max_cost,
        judges=judges,
        subsets=subsets,
    )
    result = check_run(run, read_baseline(baseline_path), settings, baseline_path=str(baseline_path))
    if output_format == "json":
        click.echo(check_json(result))
    else:
        print_check(result, console)
    sys.exit(result.exit_code)


@main.group()
def bon() -> None:
    """Best-of-N: does a reward model help a policy? A policy writes N answers per question, each RM picks the
    best of the first k, a gold judge grades the picks against the rubric. One run directory holds all steps.

    \b
    Steps:
      prbj bon sample --policy PROVIDER      → reports/bon-<id>/ (run.json, samples.parquet)
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
    default=1.0,
    show_default=True,
    help="Sampling temperature.",
)
@click.option(
    "--top-p",
    type=click.FloatRange(0, 1, min_open=True),
    default=0.9,
    show_default=True,
    help="Nucleus top-p.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=512,
    show_default=True,
    help="Longest answer in tokens.",
)
@click.option(
    "--seed",
    type=int,
    default=42,
    show_default=True,
    help="Sample i is requested with seed SEED+i, so providers that honour seeds (vLLM, in-process models) "
    "reproduce it even without the cache.",
)
@click.option("--no-seed", is_flag=True, help="Send no seed (for providers that reject one).")
@click.option(
    "--dataset",
    default="sample",
    show_default=True,
    metavar="SOURCE",
    help="Questions: as in 'prbj judge' (sample, a file, a folder or hf:QiyaoMa/Personalized-RewardBench); "
    "one question per pair id.",
)
@click.option(
    "--subset", "subsets", multiple=True, metavar="NAME", help="Keep only this subset (repeatable)."
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="At most this many questions per subset."
)
@gateway_options
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports"),
    show_default=True,
    help="Folder in which the run directory bon-<id>/ is written.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Samples requested at once.",
)
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar.")
@friendly_errors
def bon_sample(no_seed: bool, **options: Any) -> None:
    """Write N answers per question with a policy model; start a BoN run directory.

    Every sample is its own cached call keyed by its sample index: growing --n later (in a new run) buys
    only the new samples, and a rerun costs nothing. The policy sees the question and the top --k-profile
    past posts, never the gold rubric. Defaults follow the official setup (Qwen2.5-0.5B-Instruct, N=128,
    temperature 1.0, top-p 0.9, k=10).

    \b
    Examples:
      prbj bon sample --policy openai-compatible --api-base http://127.0.0.1:8000/v1 --n 16
      prbj bon sample --policy qwen2.5-0.5b --providers-dir my-providers/ --limit 50   # own profile
      prbj bon sample --policy gemini-3-flash --n 8 --subset art --max-cost 1 --dry-run
    """
    from prbj.bon.commands import run_sample_command

    if no_seed:
        options["seed"] = None
    sys.exit(run_sample_command(**options))


def _rm_options(command: F) -> F:
    """The judge options of 'prbj judge' that apply to reward models scoring one answer at a time."""
    for option in reversed(
        [
            click.option(
                "--context",
                "contexts",
                multiple=True,
                type=click.Choice(["none", "profile", "planner"]),
                help="What LLM RMs see besides question and answer (repeatable; each is its own RM): none, "
                "profile (top --profile-k posts by BM25), planner (aspects from --planner). Default: profile. "
                "The gold rubric (oracle) is never shown.",
            ),
            click.option(
                "--mode",
                type=click.Choice(["pointwise"]),
                default="pointwise",
                show_default=True,
                help="LLM RMs score each answer alone on 1-10 (a ranking of N answers needs a score per answer).",
            ),
            click.option(
                "--profile-k",
                type=click.IntRange(min=1),
                default=10,
                show_default=True,
                help="Profile posts shown to LLM RMs.",
            ),
            click.option(
                "--planner", metavar="PROVIDER", help="Provider that turns profile + question into aspects."
            ),
            click.option(
                "--repair/--no-repair", default=False, help="Ask once more for the score when unparseable."
            ),
            click.option(
                "--judge-template-system",
                type=click.Path(dir_okay=False, exists=True, path_type=Path),
                help="System prompt file for LLM RMs.",
            ),
            click.option(
                "--judge-template-user",
                type=click.Path(dir_okay=False, exists=True, path_type=Path),
                help="User prompt file with {question}, {response} and optionally {profile}, {rubrics} or {context}.",
            ),
        ]
    ):
        command = option(command)
    return command


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
@click.option("--seed", type=int, default=42, show_default=True, help="Seed of the random RM.")
@gateway_options
@click.option(
    "--concurrency", type=click.IntRange(min=1), default=16, show_default=True, help="Scoring jobs at once."
)
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar.")
@friendly_errors
def bon_score(**options: Any) -> None:
    """Score every sample with every RM; pick the best of the first k samples for k = 1, 2, 4, …, N.

    Ties go to the lowest sample index. A sample whose policy call or score failed never wins a pick; it is
    skipped and counted. Writes scores.parquet and picks.parquet into RUN_DIR.

    \b
    Examples:
      prbj bon score reports/bon-20260101-120000-abc123 -p bm25-profile -p length -p embed-profile
      prbj bon score RUN_DIR -p gemini-3-flash --context profile --max-cost 5
      prbj bon score RUN_DIR -p openai-compatible --api-base http://127.0.0.1:8000/v1
    """
    from prbj.bon.commands import run_score_command

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
@click.option("--seed", type=int, default=42, show_default=True, help="Seed of the bootstrap intervals.")
@gateway_options
@click.option(
    "--concurrency", type=click.IntRange(min=1), default=16, show_default=True, help="Picks graded at once."
)
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar.")
@friendly_errors
def bon_evaluate(**options: Any) -> None:
    """Grade the picks with a gold judge; write best-of-k curves per RM × subset × k.

    Question score = sum of aspect scores / (2 × aspects), in [0, 1] (the official 0-2 mean, halved). A pick
    shared by several RMs or k is graded once. Unreadable gold replies are counted, never scored 0.
    Writes gold.parquet, evaluations.parquet, summary.json (mean, std, n, 95% bootstrap CI),
    rms/<rm>/evaluation_summary.json (the official shape) and downstream.parquet.

    \b
    Examples:
      prbj bon evaluate reports/bon-20260101-120000-abc123 --gold gpt-5.1
      prbj bon evaluate RUN_DIR --gold gemini-3-flash --gold-mode per-aspect --max-cost 3
      prbj downstream add RUN_DIR && prbj correlate --run reports/<judge-run> --source bon
    """
    from prbj.bon.commands import run_evaluate_command

    sys.exit(run_evaluate_command(**options))


def _role_provider_option(role: str, what: str) -> Callable[[F], F]:
    return click.option(
        f"--{role}-provider",
        metavar="NAME",
        default=None,
        help=f"Provider that {what} [default: --provider].",
    )


@main.group("build", invoke_without_command=True, no_args_is_help=True)
@click.option(
    "--input",
    "input_spec",
    metavar="SOURCE",
    help="LaMP-QA-format records (id, question, narrative, rubric_aspects, profile, category): a "
    ".jsonl/.json/.parquet file, a folder of them (<subset>/<split>-*.parquet as on the hub), or "
    "hf:alireza7/LaMP-QA (needs network).",
)
@click.option(
    "--subset",
    "subsets",
    multiple=True,
    metavar="NAME",
    help="Keep only this subset (repeatable; prefixes such as 'art' work). With one subset, records without "
    "a category get it.",
)
@click.option(
    "--split",
    type=click.Choice(["train", "validation", "test"]),
    default="test",
    show_default=True,
    help="Split to read from a hub-style folder or hf:.",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="At most this many records per subset."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Build directory to write (pairs.jsonl, provenance.jsonl, rejects.jsonl, build_summary.json, "
    "report.md, run.json); rewritten on a rerun.",
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
@click.option(
    "--profile-k", type=click.IntRange(min=1), default=10, show_default=True, help="Profile posts shown."
)
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
@click.option(
    "--concurrency", type=click.IntRange(min=1), default=8, show_default=True, help="Records built at once."
)
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show a progress bar.")
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
      prbj build --input lamp_qa.jsonl --out builds/b1 -p gemini-3-flash
      prbj build --input hf:alireza7/LaMP-QA --subset art --limit 50 --out builds/art --max-cost 5 \\
        --planner-provider gemini-3-flash --chosen-provider gpt-5.1 --rejected-provider gpt-5.1 \\
        --check-provider claude-sonnet-4-5
      prbj build --input lamp_qa.jsonl --out builds/gold --plan gold -p gpt-5.1 --dry-run
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
@click.option("--seed", type=int, default=42, show_default=True, help="Seed of the sample and answer order.")
@click.option("--profile-k", type=click.IntRange(min=1), default=5, show_default=True, help="Posts shown.")
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
    from prbj.build.annotate import write_sheets

    written = write_sheets(out_dir, annotators=annotators, sample=sample, seed=seed, profile_k=profile_k)
    Console().print(
        f"wrote {len(written.sheets)} sheet(s) of {written.items} pairs: "
        + ", ".join(str(p) for p in written.sheets)
        + f"; key (keep it from annotators): {written.key}",
        soft_wrap=True,
    )


@build.command("agreement")
@click.argument("out_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.argument(
    "sheets", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True, path_type=Path)
)
@friendly_errors
def build_agreement(out_dir: Path, sheets: tuple[Path, ...]) -> None:
    """Read filled annotation sheets and report the human evaluation of a build.

    Per dimension, mean ratings of chosen and rejected answers; Cohen's κ between annotators and between
    each annotator and the check model (quadratic-weighted for the 1-5 ratings, unweighted for the
    preference). Writes OUT_DIR/annotation/agreement.json and agreement.md.

    \b
    Examples:
      prbj build agreement builds/b1 builds/b1/annotation/sheet-1.csv builds/b1/annotation/sheet-2.csv
    """
    from prbj.build.agreement import agreement_report, read_sheets, write_agreement
    from prbj.build.agreement_report import agreement_tables

    annotations = read_sheets(out_dir, sheets)
    report = agreement_report(out_dir, annotations)
    console = Console()
    for table in agreement_tables(report):
        console.print(table)
    json_path, md_path = write_agreement(out_dir, report)
    console.print(f"wrote {json_path} and {md_path}")


if __name__ == "__main__":
    main()
