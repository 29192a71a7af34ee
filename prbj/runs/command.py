"""`prbj judge` behind the CLI: build judges, gateway and planner from options, run, report, pick the exit code."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from prbj.analysis.chance import chance_of
from prbj.analysis.headline import Headline, run_headline
from prbj.context.planner import Planner
from prbj.context.profile_text import DEFAULT_PROFILE_K
from prbj.context.synthesizer import histories
from prbj.data import load_dataset
from prbj.data.cards import PRB, Card, resolve_card
from prbj.data.dataset import Dataset
from prbj.data.loaders import OFFICIAL_HF_DATASET, is_public, source_label
from prbj.data.status import ANSWERED_STATUSES, FAILED_STATUSES
from prbj.display.width import output_console, print_error, print_whole
from prbj.errors import ConfigError, DataError
from prbj.judges.base import Judge
from prbj.judges.generative import LLMJudgeBase
from prbj.judges.registry import build_judges, resolve_judges
from prbj.judges.sampling import SampledJudge
from prbj.judges.setup import JudgeOptions, make_synthesizer
from prbj.llm.gateway import Gateway
from prbj.llm.providers import missing_keys
from prbj.llm.setup import GatewayOptions
from prbj.local.ray_executor import RayOptions
from prbj.privacy.guard import PrivacyOptions, guard_dataset, note_line
from prbj.report.terminal import print_failure_causes, print_leaderboard, print_missing_keys, usage_table
from prbj.runs.beyond import BeyondOptions
from prbj.runs.collector import kept_for_the_run
from prbj.runs.confidence import ConfidenceOptions
from prbj.runs.execute import Escalation, RunConfig, execute


def run_judge_command(
    *,
    providers: tuple[str, ...],
    dataset: str,
    subsets: tuple[str, ...],
    limit: int | None,
    fail_on_error: float | None,
    out: Path,
    concurrency: int,
    progress: bool,
    **options: Any,
) -> int:
    """The body of `prbj judge`: the remaining keyword arguments are the judge options (JudgeOptions) and
    the shared model options (GatewayOptions)."""
    card = _card_defaults(options)
    headline = _headline(card, options)
    shared = GatewayOptions.pop_from(options).for_data(
        source_label(dataset, card), public=is_public(dataset, card)
    )
    privacy = PrivacyOptions.pop_from(options)
    shared = privacy.cache_for(shared)
    on_ray = RayOptions.pop_from(options)
    judging = JudgeOptions.pop_from(options)
    beyond = BeyondOptions.pop_from(options)
    surety = ConfidenceOptions.pop_from(options)
    # --confidence logprobs is a parameter of the LLM judges' requests (and so of their cache keys).
    judging = replace(judging, logprobs=surety.confidence == "logprobs")
    if options:
        raise TypeError(f"run_judge_command: unexpected options {sorted(options)}")
    dry_run, cache_only = shared.dry_run, shared.cache_only
    console = output_console()
    with shared.open() as gateway, on_ray.attach(gateway, progress=progress):
        synthesizer = make_synthesizer(judging, shared, gateway)
        judges, planner = build_judges(providers, judging, shared, gateway)
        _ = surety.thresholds  # a bad --selective file fails before any call
        escalation = _escalation(surety, judges, judging, shared, gateway, planner)
        judges = beyond.sampled(judges)
        with kept_for_the_run():
            data = load_dataset(dataset, card).select(subsets, limit)
        if not data.pairs:
            raise DataError(f"--dataset {dataset}: no pairs to judge")
        _check_oracle(judges, data)
        _check_synthesized(judges, data, source_label(dataset, card))
        data, guard = guard_dataset(data, shared.routed, privacy, note=note_line)
        # A dry run plans the calls judges would send: judges that send none are not run, neither the offline
        # baselines nor reward models run in-process (an hf: model's hours on a CPU; a py: model may call an
        # API of its own, which a dry run must not).
        offline = [judge.name for judge in judges if judge.offline] if dry_run else []
        in_process = [j for j in judges if not j.offline and not _calls_models(j)] if dry_run else []
        judges = [judge for judge in judges if not dry_run or _calls_models(judge)]
        if not judges:
            _print_benchmark(data, console, dry_run=True)
            _print_plan([], offline, in_process, data, console)
            return 0
        config = RunConfig(
            dataset=dataset,
            subsets=subsets,
            limit=limit,
            seed=judging.seed,
            out_dir=out,
            concurrency=concurrency,
            show_progress=progress,
            protocol=headline.protocol if headline.protocol == "official" else judging.protocol,
            official_repo=str(judging.official.root) if judging.official is not None else None,
            headline=headline,
            beyond=beyond,
            confidence=surety,
            benchmark=data.benchmark_record,
        )
        result = execute(
            data,
            judges,
            config,
            gateway=gateway,
            planner=planner,
            escalation=escalation,
            guard=guard,
            synthesizer=synthesizer,
        )
    usage = result.extra.get("usage", [])
    _print_benchmark(data, console, dry_run=dry_run)
    if dry_run:
        _print_plan(usage, offline, in_process, data, console)
        print_missing_keys(missing_keys(gateway.providers()), console)
        return 0
    print_leaderboard(result.summary, console, title=_title(card, data), headline=headline)
    if (chance := chance_of(result.judgments)) is not None:
        console.print(f"chance level (a judge picking at random): {chance.label}", highlight=False)
    for note in result.extra.get("selective_notes", []):
        console.print(f"selective: {note}", highlight=False)
    print_failure_causes(result.judgments.select("status", "cause", "error").iter_rows(), console)
    _print_truncations(result.judgments, judging.scalar.max_length, console)
    if usage:
        console.print(usage_table(usage))
    run_dir = result.run_dir
    assert run_dir is not None  # only a dry run writes no run directory, and it returned above
    print_whole(console, f"run directory: {run_dir}")
    print_whole(console, f"report: {run_dir / 'report.html'}")
    if cache_only:
        missing = int((result.judgments["status"] == "skipped_cache").sum())
        if missing:
            console.print(
                f"[yellow]{missing} judgments were not in the cache (--cache-only): rerun without it."
            )
    for hint in closing_hints(dataset, card, data, providers=providers):
        console.print(hint, style="dim", markup=False, highlight=False)
    budget_code = _report_budget(usage, gateway.budget.spent, gateway.budget.max_cost, console)
    return max(_exit_code(result.judgments, fail_on_error, console), budget_code)


def _card_defaults(options: dict[str, Any]) -> Card | None:
    """--benchmark's card (None: the layout is read from the data), and the protocol defaults it sets where
    the command line left them (--profile-k, --profile-order, --order)."""
    spec = options.pop("benchmark", None)
    card = resolve_card(spec) if spec else None
    if options.get("profile_k") is None:
        options["profile_k"] = (card.profile_k if card else None) or DEFAULT_PROFILE_K
    if options.get("profile_order") is None:
        options["profile_order"] = (card.profile_order if card else None) or "similar"
    rules = card.protocol if card is not None else None
    card_order = rules.order if rules is not None else None
    asked = options.get("order")
    if options.get("protocol") == "official" and _has_own_protocol(card):
        options["order"] = _official_order(card, asked)
    elif asked is None:
        options["order"] = "both" if card_order == "both" else "random"
    return card


def _has_own_protocol(card: Card | None) -> bool:
    """Whether `--protocol official` means the card's [protocol] (every benchmark but PRB, whose official mode
    reproduces the official PRB scripts: prbj.judges.official)."""
    return card is not None and card.loader != PRB


def _official_order(card: Card | None, asked: str | None) -> str:
    """The judging order under `--protocol official` on a card's own protocol, which must say where it was read."""
    assert card is not None
    rules = card.protocol
    if rules is None or not rules.reproducible:
        why = f" ({rules.notes})" if rules is not None and rules.notes else ""
        raise ConfigError(
            f"--protocol official: the {card.name} card has no [protocol] source, so there is no authors' "
            f"evaluation to reproduce{why}; run prbj's protocol (docs/benchmarks.md)"
        )
    wanted = "both" if rules.order == "both" else "random"
    if asked is not None and asked != wanted:
        raise ConfigError(
            f"--protocol official --order {asked}: {card.name}'s authors judge "
            f"{'each pair in both orders' if wanted == 'both' else 'one order per pair'}; leave --order out"
        )
    return wanted


def _headline(card: Card | None, options: dict[str, Any]) -> Headline:
    """The run's headline (prbj.analysis.headline). Under `--protocol official` on a card's own protocol, the
    judges themselves run prbj's protocol (the official PRB scripts' stream, prompts and parser are PRB's) and
    the card's rules score them."""
    if not _has_own_protocol(card):
        return run_headline(card.protocol if card is not None else None, "prbj")
    assert card is not None
    if options.get("protocol") != "official":
        return run_headline(card.protocol, "prbj")
    if options.get("official_repo") is not None:
        raise ConfigError(
            f"--official-repo is the official Personalized-RewardBench clone; {card.name}'s official protocol "
            "reads none: leave it out"
        )
    options["protocol"] = "prbj"
    return run_headline(card.protocol, "official")


def _title(card: Card | None, data: Dataset) -> str:
    """The leaderboard's name: the card's title, the benchmark's for its own data, else the data's file."""
    if card is not None:
        return card.title
    if not is_public(data.source):  # the user's own pairs, in whatever layout: not the benchmark
        return Path(data.source).name or data.source
    return "Personalized RewardBench" if data.benchmark == "prb" else "Per-user preference"


def closing_hints(dataset: str, card: Card | None, data: Dataset, *, providers: Sequence[str]) -> list[str]:
    """The lines after a run's leaderboard: what its data was (a sample says so, and where the full data is),
    and, after the default offline judges, how to run a model judge on the same data."""
    hints = []
    if data.source == "sample":
        if card is None or card.name == "prb":
            hints.append(
                "This is the bundled demo sample, not the benchmark: use --dataset "
                f"hf:{OFFICIAL_HF_DATASET} for real figures."
            )
        elif card.path is not None:
            hints.append(f"This is the sample beside your card {card.path}: pass your data with --dataset.")
        else:
            where = f"; the full data: {card.source}" if card.source else ""
            hints.append(
                f"This is the {card.title} card's demo sample, not the benchmark{where} (pass it with --dataset)."
            )
    if not providers:
        words = ["prbj", "judge"]
        if card is not None:
            words += ["--benchmark", str(card.path or card.name)]
        if dataset != "sample":
            words += ["--dataset", dataset]
        command = shlex.join([*words, "--provider", "gemini-3-flash"])
        if not is_public(dataset, card):
            # The user's own pairs go to no remote model until --personal-data says what may leave the machine.
            command += " --personal-data ... (docs/privacy.md)"
        hints.append(f"Next: a model judge on the same pairs, e.g. GEMINI_API_KEY=... {command}")
    return hints


def _check_oracle(judges: Sequence[Judge], data: Dataset) -> None:
    """The oracle context shows the scoring standard: pairs without one would show judges nothing."""
    if not any(j.context == "oracle" for j in judges):
        return
    lacking = [p for p in data.pairs if not p.rubric_aspects and not p.narrative.strip()]
    if lacking:
        name = data.benchmark if data.benchmark != "prb" else source_label(data.source)
        scope = (
            ""
            if len(lacking) == len(data.pairs)
            else f" for {len(lacking)} of its {len(data.pairs)} pairs (first: pair {lacking[0].id!r})"
        )
        raise ConfigError(
            f"--context oracle: {name} has no scoring standard (narrative, rubric_aspects) to show{scope}; "
            "use profile, planner or none"
        )


def _check_synthesized(judges: Sequence[Judge], data: Dataset, source: str) -> None:
    """The synthesized context writes personas from earlier choices: refused where no user made any (PRB's
    profiles are past posts), and a note where some users made none."""
    if any(j.context == "synthesized" for j in judges):
        note = histories(data.pairs, source).note()
        if note is not None:
            note_line(note)


def _print_benchmark(data: Dataset, console: Console, *, dry_run: bool = False) -> None:
    """What a benchmark other than Personalized RewardBench was read as (users, history, notes)."""
    if data.benchmark == "prb":
        return
    history = f", {data.history_rows} earlier choices as history" if data.history_rows else ""
    console.print(
        f"benchmark {escape(data.benchmark)} (version {escape(data.benchmark_version)}): "
        f"{_pairs_of_users(data)} {'to judge' if dry_run else 'judged'}{history}",
        highlight=False,
    )
    for note in data.notes:
        console.print(f"note: {escape(note)}", highlight=False)


def _pairs_of_users(data: Dataset) -> str:
    pairs, users = len(data.pairs), data.users
    sizes = sorted({pair.k for pair in data.pairs})
    items = "pairs" if sizes == [2] else f"items (best of {'/'.join(str(k) for k in sizes)})"
    if users == pairs:
        return f"{pairs:,} {items} (one per user)"
    return f"{pairs:,} {items} of {users:,} users"


def _print_plan(
    usage: Sequence[dict[str, Any]],
    offline: Sequence[str],
    in_process: Sequence[Judge],
    data: Dataset,
    console: Console,
) -> None:
    """--dry-run: the calls the model judges would make (the plan table), and what the judges that make none
    would do for free (none of them is run by a dry run): offline baselines and reward models run in-process."""
    if usage:
        console.print(usage_table(usage, dry_run=True))
    local = list(dict.fromkeys(judge.name for judge in in_process))
    kinds = [kind for kind, names in (("offline judges", offline), ("models run here", local)) if names]
    if kinds:
        console.print(
            f"{' and '.join(kinds)}: 0 calls, $0 ({escape(', '.join([*offline, *local]))}): "
            f"would judge {_pairs_of_users(data)}",
            highlight=False,
        )


def _calls_models(judge: Judge) -> bool:
    inner = judge.inner if isinstance(judge, SampledJudge) else judge
    return isinstance(inner, LLMJudgeBase)


def _escalation(
    surety: ConfidenceOptions,
    judges: Sequence[Judge],
    judging: JudgeOptions,
    shared: GatewayOptions,
    gateway: Gateway,
    planner: Planner | None,
) -> Escalation | None:
    """--escalate-to: the strong judge, built in every context a first-stage judge runs in; where it runs
    among --provider already, its own judgments serve the cascade."""
    if surety.escalate_to is None:
        return None
    contexts = tuple(dict.fromkeys(judge.context for judge in judges))
    strong = resolve_judges(
        [surety.escalate_to], replace(judging, contexts=contexts), shared, gateway, planner
    )
    name = strong[0].name
    ran = {judge.context for judge in judges if judge.name == name}
    if {judge.name for judge in judges} <= {name}:
        raise ConfigError(
            f"--escalate-to {surety.escalate_to}: no other judge to escalate from (add one with --provider)"
        )
    # An offline judge sees one fixed context: it can only back up judges that saw the same.
    missing = sorted({j.context for j in judges if j.name != name} - {j.context for j in strong} - ran)
    if missing:
        own = ", ".join(sorted({j.context for j in strong}))
        raise ConfigError(
            f"--escalate-to {surety.escalate_to}: it judges in context {own} only, and would back up judges "
            f"that saw {', '.join(missing)}; pick judges of the same context"
        )
    return Escalation(
        name=name,
        judges={judge.context: judge for judge in strong if judge.context not in ran},
        ran_alone=frozenset(ran),
    )


def _report_budget(usage: list[Any], spent: float, cap: float | None, console: Console) -> int:
    """--max-cost stopped some calls: say how far the money went and fail the run (exit 1), since its figures
    cover only part of the pairs."""
    not_sent = sum(int(row.get("skipped_budget", 0)) for row in usage)
    if cap is None or not not_sent:
        return 0
    console.print(
        f"[bold yellow]budget reached: ${spent:.4f} of ${cap:.4f} spent, {not_sent} calls not sent[/bold yellow]"
    )
    return 1


def _exit_code(judgments: Any, fail_on_error: float | None, console: Console) -> int:
    """1 when a judge had no successful judgment at all (its column of the leaderboard is only dashes), or when
    more judgments failed than --fail-on-error allows; else 0."""
    import polars as pl

    # A verdict withheld for being unsure (--selective) was still an answer.
    empty = (
        judgments.group_by("judge", "context", maintain_order=True)
        .agg(pl.col("status").is_in(ANSWERED_STATUSES).sum().alias("ok"), pl.len().alias("n"))
        .filter(pl.col("ok") == 0)
    )
    for judge_name, context, _, n in empty.iter_rows():
        print_error(
            console, f"{judge_name} ({context}) had no successful judgment ({n}/{n} failed; causes above)"
        )
    if empty.height:
        return 1
    if fail_on_error is None or judgments.height == 0:
        return 0
    failed = int(judgments["status"].is_in(FAILED_STATUSES).sum())
    share = failed / judgments.height
    if share > fail_on_error:
        print_error(
            console,
            f"{failed}/{judgments.height} judgments failed "
            f"({share:.1%} > --fail-on-error {fail_on_error:.1%})",
        )
        return 1
    return 0


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
