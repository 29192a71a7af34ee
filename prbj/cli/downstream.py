"""`prbj correlate` and `prbj downstream`: does benchmark accuracy predict downstream rank?"""

from __future__ import annotations

from pathlib import Path

import click

from prbj.cli.support import friendly_errors


@click.command()
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
      prbj correlate --run reports/<run-id> --map bm25-profile=RM-A
      prbj correlate --run reports/<run-id> --run reports/<llm-run> --context profile --benchmarks other.csv
      prbj correlate --benchmarks accuracies.csv --source bon --k all --out reports/corr-bon
    """
    from prbj.runs.downstream_command import run_correlate_command

    run_correlate_command(
        runs=runs,
        judges=judges,
        context=context,
        mappings=mappings,
        benchmarks=benchmarks,
        benchmark_name=benchmark_name,
        benchmark_subset=benchmark_subset,
        store=store,
        sources=sources,
        k_choice=k_choice,
        rbo_p=rbo_p,
        resamples=resamples,
        seed=seed,
        out=out,
    )


@click.group()
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
      prbj downstream add ppo_results.csv --store runs/downstream
      prbj downstream add reports/bon/<bon-run> --source bon-qwen0.5b
    """
    from prbj.runs.downstream_command import run_downstream_add

    run_downstream_add(paths, rm=rm, source=source, store=store)


@downstream.command("show")
@click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports/downstream"),
    show_default=True,
    help="Folder holding downstream.parquet.",
)
@click.option("--rm", "rms", multiple=True, metavar="NAME", help="Only this RM (repeatable).")
@click.option("--source", "sources", multiple=True, metavar="NAME", help="Only this source (repeatable).")
@click.option("--subset", "subsets", multiple=True, metavar="NAME", help="Only this subset (repeatable).")
@click.option("--k", "ks", multiple=True, type=click.IntRange(min=1), help="Only this k (repeatable).")
@click.option("--pivot", is_flag=True, help="One row per RM × source × subset, one score column per k.")
@friendly_errors
def downstream_show(
    store: Path,
    rms: tuple[str, ...],
    sources: tuple[str, ...],
    subsets: tuple[str, ...],
    ks: tuple[int, ...],
    pivot: bool,
) -> None:
    """Print the downstream table, one row per RM × source × subset × k.

    \b
    Examples:
      prbj downstream show
      prbj downstream show --store runs/downstream
      prbj downstream show --subset all --pivot
      prbj downstream show --rm length --k 4
    """
    from prbj.runs.downstream_command import run_downstream_show

    run_downstream_show(store, rms=rms, sources=sources, subsets=subsets, ks=ks, pivot=pivot)
