"""The report's tables as rows of formatted strings: one definition that the terminal, Markdown and HTML
renderers each lay out in their own way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prbj.analysis.headline import Headline
from prbj.report import fmt
from prbj.report.content import FailureRow, ReportContent


@dataclass(frozen=True)
class TextTable:
    name: str
    title: str
    headers: list[str]
    rows: list[list[str]]
    # Which columns hold numbers: right-aligned everywhere.
    numeric: list[bool]
    note: str = ""
    # The column of the figure the table ranks by (its headline): bold in every rendering.
    emphasis: int | None = None


# Said once under the leaderboard: what user accuracy is, or that it is pair accuracy here.
USER_NOTE = (
    "Users: each user's accuracy over their decided pairs, averaged over users (a user with no decided pair is "
    "left out); where users have several pairs, both intervals are over users (none under 2 users)."
)
ONE_PAIR_NOTE = "One pair per user here: user accuracy equals pair accuracy."

# The rank column of an oracle row: an upper bound (the judge saw the rubric), not a place in the ranking.
UPPER_BOUND_MARK = "UB"


def _entry_cells(entry_run: str, judge: str, context: str, several: bool) -> list[str]:
    return [judge, context, *([entry_run] if several else [])]


def _entry_headers(several: bool) -> list[str]:
    return ["judge", "context", *(["run"] if several else [])]


def runs_table(content: ReportContent) -> TextTable:
    rows = [
        [
            run.run_id,
            run.dataset_label,
            run.fingerprint,
            fmt.DASH if run.n_pairs is None else str(run.n_pairs),
            str(run.seed),
            run.started or fmt.DASH,
            run.version or fmt.DASH,
        ]
        for run in content.runs
    ]
    headers = ["run", "dataset", "fingerprint", "pairs", "seed", "started", "prbj"]
    return TextTable("runs", "Runs", headers, rows, [False, False, False, True, True, False, False])


def leaderboard_table(content: ReportContent, *, terse: bool = False) -> TextTable:
    several = len(content.runs) > 1
    per_user = content.per_user
    costs = {row.entry: row for row in content.costs}
    # After --selective: the verdicts each judge withheld, beside an accuracy over the kept ones only.
    withheld = any(row.overall.abstained for row in content.leaderboard)
    headlines = list(dict.fromkeys(row.headline for row in content.leaderboard))
    # A headline that is none of the usual figures (a card's unit of judgments, its authors' own rules) gets a
    # column of its own, first.
    own = any(not headline.native for headline in headlines)
    own_header = f"{headlines[0].short if len(headlines) == 1 else 'headline'} % (95% CI)"
    users_lead = not own and per_user and all(h.unit == "users" for h in headlines)
    # The run is not a ranking column: it comes last, after the figures.
    headers = [
        "#",
        *_entry_headers(False),
        *([own_header] if own else []),
        "overall % (95% CI)",
        *(["users % (95% CI)"] if per_user else []),
        *[fmt.short_subset(s, terse=terse) + " %" for s in content.subsets],
        "ties %",
        "LC acc %",
        "failed",
        *(["abstained"] if withheld else []),
        "$ / 100",
        *(["run"] if several else []),
    ]
    rows = []
    rank = 0
    for row in content.leaderboard:
        e = row.entry
        cost = costs.get(e)
        if not e.is_upper_bound:
            rank += 1
        rows.append(
            [
                UPPER_BOUND_MARK if e.is_upper_bound else str(rank),
                *_entry_cells(e.run, e.judge, e.context, False),
                *([fmt.with_span(row.rank_value, *row.headline.interval(row.overall))] if own else []),
                fmt.accuracy_with_ci(row.overall),
                *([fmt.user_accuracy_with_ci(row.overall)] if per_user else []),
                *[
                    fmt.percent(row.headline.value(row.by_subset[s])) if s in row.by_subset else fmt.DASH
                    for s in content.subsets
                ],
                fmt.percent(row.overall.tie_rate),
                fmt.percent(row.overall.length_controlled_accuracy),
                fmt.failed_of(row.failed, row.overall.n),
                *([fmt.failed_of(row.overall.abstained or 0, row.overall.n)] if withheld else []),
                fmt.usd(cost.per_100_usd if cost else None),
                *([e.run] if several else []),
            ]
        )
    k = len(_entry_headers(False))
    numeric = [
        True,
        *[False] * k,
        *[True] * (len(headers) - 1 - k - int(several)),
        *([False] if several else []),
    ]
    oracle = any(row.entry.is_upper_bound for row in content.leaderboard)
    return TextTable(
        "leaderboard",
        "Leaderboard",
        headers,
        rows,
        numeric,
        _headline_note(headlines)
        + "Overall: accuracy over judgments that succeeded; ties and failures never count as correct. LC acc: "
        "length-controlled accuracy. $ / 100: cost per 100 judgments at the price each answer was first "
        "bought for (what the run costs uncached; n/a when not recorded). "
        + (USER_NOTE if per_user else ONE_PAIR_NOTE)
        + (
            " abstained: verdicts withheld below the --selective threshold; accuracy is over those kept."
            if withheld
            else ""
        )
        + (
            f" {UPPER_BOUND_MARK}: the oracle context shows the judge the scoring rubric; an upper bound, not "
            "ranked with the fair settings."
            if oracle
            else ""
        ),
        emphasis=1 + k + (0 if own or not users_lead else 1),
    )


def _headline_note(headlines: list[Headline]) -> str:
    """Which figure ranks the table (in bold), said first."""
    named = "; ".join(
        f"{h.short}: {h.name}"
        + (f" (the authors' protocol: {h.rules.source})" if h.protocol == "official" else "")
        for h in headlines
    )
    return f"Ranked by {named}. "


def position_table(content: ReportContent) -> TextTable:
    several = len(content.runs) > 1
    headers = [
        *_entry_headers(several),
        "chosen as A %",
        "n (A)",
        "chosen as B %",
        "n (B)",
        "A − B pts",
        "picked A %",
    ]
    consistency = any(r.order_consistency is not None for r in content.position)
    headers += ["order-consistent %"] if consistency else []
    rows = [
        [
            *_entry_cells(r.entry.run, r.entry.judge, r.entry.context, several),
            fmt.percent(r.accuracy_a),
            str(r.n_a),
            fmt.percent(r.accuracy_b),
            str(r.n_b),
            fmt.points(r.gap),
            fmt.percent(r.picked_a),
            *([fmt.percent(r.order_consistency)] if consistency else []),
        ]
        for r in content.position
    ]
    k = len(_entry_headers(several))
    return TextTable(
        "position",
        "Position bias",
        headers,
        rows,
        [False] * k + [True] * (len(headers) - k),
        "Pairwise judges only. An unbiased judge has the same accuracy whichever slot the chosen answer is "
        "shown in, and picks A about half the time. Order-consistent (--order both): share of pairs with the "
        "same answer picked in both orders.",
    )


def length_table(content: ReportContent) -> TextTable:
    several = len(content.runs) > 1
    headers = [*_entry_headers(several), "raw %", "length-controlled %", "LC − raw pts", "picked longer %"]
    rows = []
    for row in content.leaderboard:
        raw, lc = row.overall.accuracy, row.overall.length_controlled_accuracy
        rows.append(
            [
                *_entry_cells(row.entry.run, row.entry.judge, row.entry.context, several),
                fmt.percent(raw),
                fmt.percent(lc),
                fmt.points(None if raw is None or lc is None else lc - raw),
                fmt.percent(row.overall.picked_longer),
            ]
        )
    k = len(_entry_headers(several))
    return TextTable(
        "length",
        "Length control",
        headers,
        rows,
        [False] * k + [True] * 4,
        "Length-controlled accuracy weighs chosen-longer and chosen-shorter pairs equally (pairs only: best-of-k "
        "items are left out).",
    )


def cost_table(content: ReportContent) -> TextTable:
    several = len(content.runs) > 1
    headers = [*_entry_headers(several), "judgments", "total", "per 100", "cached %", "median latency"]
    rows = [
        [
            *_entry_cells(r.entry.run, r.entry.judge, r.entry.context, several),
            str(r.judgments),
            fmt.usd(r.total_usd),
            fmt.usd(r.per_100_usd),
            fmt.percent(r.cached_share) if r.cached_share is not None else fmt.NA,
            fmt.seconds(r.median_latency_s),
        ]
        for r in content.costs
    ]
    k = len(_entry_headers(several))
    return TextTable("cost", "Cost", headers, rows, [False] * k + [True] * 5)


def failures_table(content: ReportContent) -> TextTable:
    several = len(content.runs) > 1
    # Replies cut at their output cap or refused get columns only when a run had some.
    unanswered = any(r.truncated or r.refused for r in content.failures)
    counts: list[tuple[str, Callable[[FailureRow], int]]] = [("parse errors", lambda r: r.parse_errors)]
    if unanswered:
        counts += [("cut off at the cap", lambda r: r.truncated), ("refused", lambda r: r.refused)]
    counts += [("API errors", lambda r: r.api_errors), ("skipped (budget)", lambda r: r.skipped)]
    headers = [*_entry_headers(several), *(name for name, _ in counts), "most common errors"]
    rows = [
        [
            *_entry_cells(r.entry.run, r.entry.judge, r.entry.context, several),
            *(f"{count(r)}/{r.total}" for _, count in counts),
            "; ".join(_shorten(message) for message in r.examples) or fmt.DASH,
        ]
        for r in content.failures
    ]
    k = len(_entry_headers(several))
    note = (
        " Cut off: the reply reached its output cap (often spent on hidden reasoning) before an answer; refused: "
        "a content filter, safety block or refusal."
        if unanswered
        else ""
    )
    return TextTable(
        "failures",
        "Failures",
        headers,
        rows,
        [False] * k + [True] * len(counts) + [False],
        "Failures are counted apart and excluded from accuracy. Skipped: not sent because of the budget "
        "(--max-cost) or absent from the cache (--cache-only)." + note,
    )


def correlation_table(content: ReportContent) -> TextTable:
    headers = ["source", "RMs", "Spearman ρ", "Kendall τ-b", "Pearson r"]
    rows = [
        [
            c.source,
            str(c.n),
            fmt.correlation(c.spearman),
            fmt.correlation(c.kendall),
            fmt.correlation(c.pearson),
        ]
        for c in content.correlations
    ]
    return TextTable(
        "correlation",
        "Benchmark vs downstream",
        headers,
        rows,
        [False, True, True, True, True],
        "Benchmark: overall accuracy. Downstream: subset 'all' (else the n-weighted mean over subsets, or "
        "the only subset) at the k most RMs report. Correlations need at least three reward models; prbj "
        "correlate gives intervals, weighted τ, NDCG and RBO.",
    )


def _shorten(message: str, limit: int = 120) -> str:
    line = " ".join(message.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
