"""The Rich tables `prbj judge` and friends print: the leaderboard, model-call usage, provider profiles. Numbers
are formatted by prbj.report.fmt, as in the written reports."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from prbj.analysis.headline import DEFAULT_HEADLINE, Headline
from prbj.analysis.stats import ALL_SUBSETS, GroupStats
from prbj.data.status import FAILED_STATUSES, STATUS_MEANING, STATUSES, was_not_sent
from prbj.display.fit import FittingTable
from prbj.report import fmt

# Said once under the leaderboard: whether user figures are columns of it, or the same as the pair figures.
USER_CAPTION = (
    "users = each user's accuracy averaged over users; intervals over users where users have several pairs"
)
ONE_PAIR_CAPTION = "one pair per user, so user accuracy = pair accuracy"


def leaderboard(
    summary: Sequence[GroupStats],
    *,
    title: str = "Personalized RewardBench accuracy",
    headline: Headline = DEFAULT_HEADLINE,
) -> Table:
    """Judges ranked by the run's headline (prbj.analysis.headline), whose column is the bold one."""
    subsets = sorted({r.subset for r in summary if r.subset != ALL_SUBSETS})
    # Oracle rows (the judge saw the scoring rubric) come last: an upper bound, not ranked with fair settings.
    overall = sorted(
        (r for r in summary if r.subset == ALL_SUBSETS),
        key=lambda r: (r.context == "oracle", -(headline.value(r) or 0.0)),
    )
    by_key = {(r.judge, r.context, r.subset): r for r in summary}
    per_user = any(r.user_accuracy is not None for r in overall)
    own_column = not headline.native
    users_lead = headline.native and headline.unit == "users" and per_user
    # After --selective: how many verdicts each judge withheld, beside an accuracy over the kept ones only.
    withheld = any(r.abstained for r in overall)
    table = Table(
        title=title,
        caption=(
            (f"{headline.short} = {headline.name}; " if own_column else "")
            + "acc % over successful judgments only (ties count as not correct); failures are not in it, "
            "they are counted apart under 'failed'; LC = length-controlled; "
            + (USER_CAPTION if per_user else ONE_PAIR_CAPTION)
            + (
                "; abstained = verdicts withheld below the --selective threshold (acc is over those kept)"
                if withheld
                else ""
            )
        ),
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
        show_edge=False,
    )
    # The context sits under the judge's name when space is short: it is part of what identifies a row.
    table.add_column("judge · context", no_wrap=True)
    if own_column:
        table.add_column(headline.short, justify="right", style="bold", no_wrap=True)
        table.add_column("95% CI", justify="right", style="dim", no_wrap=True)
    table.add_column("acc", justify="right", style="" if own_column or users_lead else "bold", no_wrap=True)
    table.add_column("95% CI", justify="right", style="dim", no_wrap=True)
    if per_user:
        table.add_column("users", justify="right", style="bold" if users_lead else "", no_wrap=True)
        table.add_column("95% CI", justify="right", style="dim", no_wrap=True)
    for subset in subsets:
        table.add_column(fmt.short_subset(subset, terse=True), justify="right", no_wrap=True)
    table.add_column("ties", justify="right", no_wrap=True)
    table.add_column("LC", justify="right", no_wrap=True)
    table.add_column("failed", justify="right", no_wrap=True)
    if withheld:
        table.add_column("abstained", justify="right", no_wrap=True)
    for row in overall:
        upper = " (upper bound)" if row.context == "oracle" else ""
        cells = [f"[bold]{row.judge}[/bold] [dim]{row.context}{upper}[/dim]"]
        if own_column:
            cells += [fmt.percent(headline.value(row)), fmt.span(*headline.interval(row))]
        cells += [fmt.percent(row.accuracy), fmt.interval(row)]
        if per_user:
            cells += [fmt.percent(row.user_accuracy), fmt.span(row.user_ci_low, row.user_ci_high)]
        for subset in subsets:
            part = by_key.get((row.judge, row.context, subset))
            cells.append(fmt.percent(headline.value(part)) if part else fmt.DASH)
        cells += [
            fmt.percent(row.tie_rate),
            fmt.percent(row.length_controlled_accuracy),
            fmt.failed_of(row.failed, row.n),
        ]
        if withheld:
            cells.append(fmt.failed_of(row.abstained or 0, row.n))
        table.add_row(*cells)
    return table


def print_leaderboard(
    summary: Sequence[GroupStats],
    console: Console,
    *,
    title: str = "Personalized RewardBench",
    headline: Headline = DEFAULT_HEADLINE,
) -> None:
    console.print(FittingTable(leaderboard(summary, title=f"{title} accuracy", headline=headline)))
    if headline.protocol == "official":
        console.print(
            f"official: the authors' scoring, read in {escape(headline.rules.source or '?')}; prbj's own "
            "figures beside it: acc and users (failures counted apart, intervals over users)",
            highlight=False,
        )


_MEANING: dict[str, str] = {str(status): meaning for status, meaning in STATUS_MEANING.items()}


def failure_cause(status: str, cause: str | None) -> str:
    """The short name a failure (of a judgment, sample, grade or build step) is counted by: the cause recorded
    where it happened (`429 Too Many Requests`, `quota exhausted`, `refused (SAFETY)`), else its status."""
    return cause or status.replace("_", " ")


@dataclass(frozen=True)
class FailureCause:
    cause: str
    count: int
    first_message: str
    # How many of them never reached the provider (its circuit breaker had opened, or Ctrl-C), and why.
    not_sent: int = 0
    not_sent_why: str = ""


def failure_causes(rows: Iterable[tuple[str, str | None, str | None]]) -> list[FailureCause]:
    """Each cause among failed (status, cause, error) rows with its count and first message, most frequent
    first."""
    counts: Counter[str] = Counter()
    not_sent: Counter[str] = Counter()
    why: dict[str, str] = {}
    first: dict[str, str] = {}
    for status, recorded, error in rows:
        # Statuses outside the vocabulary (a reward model's invalid_score) are failures too.
        if status not in FAILED_STATUSES and status in STATUSES:
            continue
        cause = failure_cause(status, recorded)
        counts[cause] += 1
        # A skip's status already says it was never sent; a stopped call's error says so and why.
        if status == "api_error" and was_not_sent(status, error):
            not_sent[cause] += 1
            why.setdefault(cause, _not_sent_why(error or ""))
        first.setdefault(cause, error or _MEANING.get(status, status))
    return [
        FailureCause(cause, n, first[cause], not_sent[cause], why.get(cause, ""))
        for cause, n in counts.most_common()
    ]


def _not_sent_why(error: str) -> str:
    if "circuit breaker" in error:
        return "circuit breaker opened"
    return "interrupted" if "interrupted" in error else ""


def print_failure_causes(rows: Iterable[tuple[str, str | None, str | None]], console: Console) -> None:
    """One line per cause: `401 Unauthorized ×150: <first message>`; nothing when nothing failed."""
    causes = failure_causes(rows)
    if not causes:
        return
    console.print("[bold]failures by cause[/bold]")
    for item in causes:
        why = f": {item.not_sent_why}" if item.not_sent_why else ""
        unsent = f" ({item.not_sent} not sent{why})" if item.not_sent else ""
        console.print(
            f"  [red]{escape(item.cause)}[/red] ×{item.count}{unsent}: {escape(item.first_message)}"
        )


def print_missing_keys(missing: Sequence[str], console: Console) -> None:
    """Under a dry run's plan: the API keys a real run needs and the environment lacks (`VARIABLE (providers)`,
    prbj.llm.providers.missing_keys), so the plan does not pass for a run that would fail."""
    if missing:
        console.print(
            f"[yellow]API keys not set (a real run needs them): {escape(', '.join(missing))}[/yellow]",
            highlight=False,
        )


def usage_table(usage: Sequence[dict[str, Any]], *, dry_run: bool = False) -> FittingTable:
    """The usage table, stacked when it would not fit whole (80 columns, a CI log): no column is dropped."""
    return FittingTable(_usage_table(usage, dry_run=dry_run))


def _usage_table(usage: Sequence[dict[str, Any]], *, dry_run: bool = False) -> Table:
    """Per provider: what was sent, what the cache answered, tokens and dollars (spent, and saved by the cache)."""
    table = Table(
        title="Plan (nothing sent)" if dry_run else "Model calls",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        collapse_padding=True,
        pad_edge=False,
    )
    table.add_column("provider", style="bold", no_wrap=True)
    if dry_run:
        extras = _extra_columns(usage, dry_run=True)
        for name in ("calls needed", "cached", "est. tok in", "est. tok out", "est. USD", *extras):
            table.add_column(name, justify="right", no_wrap=True)
        for row in usage:
            table.add_row(
                row["provider"],
                str(row["planned_calls"]),
                str(row["cache_hits"]),
                f"{row['planned_prompt_tokens']:,}",
                f"{row['planned_completion_tokens']:,}",
                f"{row['planned_cost_usd']:.4f}",
                *(cell(row) for cell in extras.values()),
            )
        return table
    extras = _extra_columns(usage, dry_run=False)
    for name in (
        "sent",
        "retry",
        "cached",
        "failed",
        "not sent",
        "tok in",
        "tok out",
        "$ spent",
        "$ saved",
        *extras,
    ):
        table.add_column(name, justify="right", no_wrap=True)
    table.caption = _not_sent_note(usage)
    for row in usage:
        table.add_row(
            row["provider"],
            str(row["requests_sent"]),
            str(row["retries"]),
            str(row["cache_hits"]),
            str(row["errors"]),
            str(sum(int(row.get(reason, 0)) for reason in _NOT_SENT_REASONS)),
            f"{row['prompt_tokens']:,}",
            f"{row['completion_tokens']:,}",
            f"{row['cost_usd']:.4f}",
            f"{row['saved_usd']:.4f}",
            *(cell(row) for cell in extras.values()),
        )
    return table


# Why calls were never sent, as the calls table's note names them (usage rows of older runs lack the last two).
_NOT_SENT_REASONS = {
    "skipped_budget": "--max-cost reached",
    "skipped_cache": "not in the cache (--cache-only)",
    "not_sent_breaker": "circuit breaker opened",
    "not_sent_interrupted": "interrupted",
}


def _not_sent_note(usage: Sequence[dict[str, Any]]) -> str | None:
    """sent: requests on the wire (retries included); failed: calls sent that got no answer; not sent: calls that
    never left, with why (the same events the failure causes and the progress line count)."""
    counts = {why: sum(int(row.get(key, 0)) for row in usage) for key, why in _NOT_SENT_REASONS.items()}
    named = [f"{count} {why}" for why, count in counts.items() if count]
    return f"not sent: {', '.join(named)}" if named else None


def _extra_columns(
    usage: Sequence[dict[str, Any]], *, dry_run: bool
) -> dict[str, Callable[[dict[str, Any]], str]]:
    """Columns shown only when some provider used them: replies cut off or refused, batch jobs (--batch) and the
    provider's prompt cache."""
    columns: dict[str, Callable[[dict[str, Any]], str]] = {}
    if dry_run:
        if any(row.get("planned_batch_cost_usd") for row in usage):
            columns["est. USD batch"] = lambda row: f"{row.get('planned_batch_cost_usd', 0.0):.4f}"
        return columns
    if any(row.get("truncated") or row.get("refused") for row in usage):
        # Paid replies without an answer: cut at the output cap, or refused by the provider.
        columns["truncated"] = lambda row: str(row.get("truncated", 0))
        columns["refused"] = lambda row: str(row.get("refused", 0))
    if any(row.get("batch_calls") for row in usage):
        columns["batch"] = lambda row: str(row.get("batch_calls", 0))
        columns["$ saved by batch"] = lambda row: f"{row.get('batch_saved_usd', 0.0):.4f}"
    if any(row.get("cached_input_tokens") for row in usage):
        columns["cached input tokens"] = lambda row: f"{row.get('cached_input_tokens', 0):,}"
        columns["$ saved by provider cache"] = lambda row: f"{row.get('provider_cache_saved_usd', 0.0):.4f}"
    if any(row.get("achieved_rpm") for row in usage):
        columns["req/min"] = lambda row: _per_minute(row.get("achieved_rpm"))
        columns["tok/min"] = lambda row: _per_minute(row.get("achieved_tpm"))
        columns["limit (source)"] = _limit_in_force
        columns["bound by"] = lambda row: BOUND_BY.get(row.get("bound_by") or "", "-")
    return columns


# What held a provider's requests back longest (prbj.llm.pacing.WAIT_CAUSES), in the calls table's words.
BOUND_BY = {
    "rate": "rate",
    "tokens": "tokens",
    "input-tokens": "input tokens",
    "output-tokens": "output tokens",
    "ceiling": "concurrency ceiling",
    "back-off": "429 back-off",
    "in-flight": "in flight (rate × latency)",
    "budget": "budget waits",
    "retries": "retries",
    "cpu": "prbj's CPU",
    "none": "nothing",
}
_LIMIT_UNITS = {
    "rpm": "rpm",
    "tpm": "tpm",
    "input_tpm": "input tpm",
    "output_tpm": "output tpm",
    "max_in_flight": "in flight",
}
_SOURCES = {"provider headers": "headers"}
# The limit a run bound by input or output tokens (counted apart, as Anthropic does) was bound by.
_COUNTED_APART = {"input-tokens": "input_tpm", "output-tokens": "output_tpm"}


def _per_minute(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _limit_in_force(row: dict[str, Any]) -> str:
    """The request rate in force, and the limit that bound the provider when another did (its token limits, or
    its ceiling on requests in flight), each with where it came from: the profile, a flag, the provider's
    headers, or prbj's default ceiling."""
    limits = row.get("limits") or {}
    bound = row.get("bound_by")
    names = ["rpm"] if "rpm" in limits else []
    if bound == "tokens":
        # Every token limit in force: a run recorded before input and output tokens were told apart said "tokens"
        # for any of them.
        names += [name for name in ("tpm", "input_tpm", "output_tpm") if name in limits]
    elif bound in _COUNTED_APART and _COUNTED_APART[bound] in limits:
        names.append(_COUNTED_APART[bound])
    elif bound in ("ceiling", "back-off", "in-flight"):
        names.append("max_in_flight")
    cells = [
        f"{limits[name]['value']:,.0f} {_LIMIT_UNITS[name]} "
        f"({_SOURCES.get(limits[name]['source'], limits[name]['source'])})"
        for name in names
    ]
    return ", ".join(cells) or "-"
