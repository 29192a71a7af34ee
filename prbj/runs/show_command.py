"""`prbj show RUN` and `prbj diff RUN_A RUN_B`: read individual judgments in the terminal.

`show` prints each selected judgment with what the judge saw: the question, both answers in the order they
were shown, the context block, the full reply and the parsed verdict. `diff` lists the pairs whose verdict
changed between two runs of the same dataset, with both replies: what `prbj check` counts, made readable; then,
per judge × context, the accuracy change with its paired interval and test (over users where users repeat)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.text import Text

from prbj.analysis.compare import Comparison, compare_runs
from prbj.analysis.mcnemar import McNemarResult
from prbj.analysis.power import ALPHA
from prbj.analysis.run_data import RunData
from prbj.analysis.user_counts import UserCounts, users_repeat
from prbj.data.names import did_you_mean
from prbj.data.schema import Pair
from prbj.data.status import ABSTAINED
from prbj.data.user_columns import CANDIDATES, USER_ID
from prbj.display.width import output_console
from prbj.errors import DataError
from prbj.privacy.guard import shown_pairs, with_private_texts
from prbj.privacy.store import PrivateStore
from prbj.report import fmt
from prbj.runs import rundir
from prbj.runs.run_pairs import read_run_pairs

# How far a question, an answer or a reply sits under its label.
BLOCK_INDENT = 2

Outcome = Literal["correct", "incorrect", "failed", "abstained"]
OUTCOMES: tuple[Outcome, ...] = ("correct", "incorrect", "failed", "abstained")


@dataclass(frozen=True)
class ShowFilter:
    judges: tuple[str, ...] = ()
    subsets: tuple[str, ...] = ()
    outcome: Outcome | None = None
    pair_ids: tuple[str, ...] = ()
    contexts: tuple[str, ...] = ()


def outcome_of(row: dict[str, Any]) -> Outcome:
    if row["status"] == ABSTAINED:  # answered, its verdict withheld below a --selective threshold
        return "abstained"
    if row["status"] != "ok":
        return "failed"
    return "correct" if row["correct"] else "incorrect"


def _check_names(option: str, wanted: Sequence[str], known: Sequence[str]) -> None:
    for name in wanted:
        if name not in known:
            raise DataError(
                f"{option} {name!r}: not in this run;{did_you_mean(name, known)} known: {', '.join(known)}"
            )


def select_judgments(judgments: pl.DataFrame, chosen: ShowFilter) -> pl.DataFrame:
    """The judgments that pass every filter given; unknown judge and subset names are errors that offer the
    nearest names (a typo would otherwise show nothing)."""
    frame = judgments
    for option, column, wanted in (
        ("--judge", "judge", chosen.judges),
        ("--subset", "subset", chosen.subsets),
        ("--context", "context", chosen.contexts),
    ):
        if wanted:
            _check_names(option, wanted, sorted(set(frame[column].to_list())))
            frame = frame.filter(pl.col(column).is_in(list(wanted)))
    if chosen.pair_ids:
        known_ids = set(frame["pair_id"].to_list())
        for pair_id in chosen.pair_ids:
            if pair_id not in known_ids:
                examples = ", ".join(sorted(known_ids)[:3])
                raise DataError(
                    f"--pair {pair_id!r}: not in this run;{did_you_mean(pair_id, known_ids)} "
                    f"its {len(known_ids)} pair ids look like {examples}, …"
                )
        frame = frame.filter(pl.col("pair_id").is_in(list(chosen.pair_ids)))
    if chosen.outcome is not None:
        keep = [outcome_of(row) == chosen.outcome for row in frame.iter_rows(named=True)]
        frame = frame.filter(pl.Series(keep, dtype=pl.Boolean))
    return frame


def _pairs_of(run: RunData, dataset: str | None, note: Console) -> dict[str, Pair]:
    """The run's pairs by id (to show question and answers); empty, with a note, when they cannot be read.
    A run under --personal-data other than any shows them as its judges saw them (prbj.privacy.guard)."""
    found = read_run_pairs(run.dataset, run.run.get("config"), source=dataset, run_dir=run.run_dir)
    if found.note is not None:
        note.print(f"note: {found.note}; question and answers are not shown (use --dataset)")
    shown = shown_pairs(
        run.run_id, run.run.get("privacy"), found.pairs, reveal=False, private=True, store=PrivateStore()
    )
    if shown.note is not None:
        note.print(f"note: {shown.note}")
    return shown.pairs


def _answers_in_order(row: dict[str, Any], pair: Pair) -> list[tuple[str, str, str]]:
    """(slot, which, text) as the judge saw them: pairwise judges in their A/B order, others one by one; every
    candidate of a best-of-k item, the preferred one first."""
    if pair.others:
        return [
            (str(n), "preferred" if n == 1 else "other", text)
            for n, text in enumerate(pair.candidates, start=1)
        ]
    position = row.get("chosen_position")
    if position == "B":
        return [("A", "rejected", pair.rejected), ("B", "chosen", pair.chosen)]
    if position in ("A", "both"):
        shown = [("A", "chosen", pair.chosen), ("B", "rejected", pair.rejected)]
        return (
            shown
            if position == "A"
            else [*shown, ("then A", "rejected", pair.rejected), ("then B", "chosen", pair.chosen)]
        )
    return [("scored alone", "chosen", pair.chosen), ("scored alone", "rejected", pair.rejected)]


def _verdict_line(row: dict[str, Any]) -> str:
    outcome = outcome_of(row)
    colour = {"correct": "green", "incorrect": "red", "failed": "yellow", "abstained": "cyan"}[outcome]
    parts = [f"[{colour}]{outcome}[/{colour}]", f"status {row['status']}", f"verdict {row['verdict'] or '—'}"]
    if row.get("chosen_position"):
        parts.append(f"chosen answer shown as {row['chosen_position']}")
    if row.get("score_chosen") is not None:
        rejected = "best other" if (row.get(CANDIDATES) or 2) > 2 else "rejected"
        parts.append(f"scores chosen {row['score_chosen']:g} / {rejected} {row['score_rejected']:g}")
    if row.get("error"):
        parts.append(f"error: {escape(str(row['error']))}")
    return " · ".join(parts)


def _block(console: Console, label: str, text: str | None) -> None:
    """A label, then the text indented under it: a line wrapped at the console's width keeps the indent."""
    console.print(f"[bold]{label}[/bold]", highlight=False)
    body = (text or "").strip() or "(empty)"
    console.print(Padding(Text(body), (0, 0, 0, BLOCK_INDENT), expand=False))


def print_judgment(row: dict[str, Any], pair: Pair | None, console: Console, *, user: bool = False) -> None:
    """One judgment; `user`: name its user in the heading (a run whose users have several pairs)."""
    owner = f" · user {escape(str(row[USER_ID]))}" if user and row.get(USER_ID) is not None else ""
    console.rule(
        f"{escape(row['pair_id'])} · {escape(row['subset'])} · {escape(row['judge'])} · {escape(row['context'])}"
        + owner,
        align="left",
    )
    console.print(_verdict_line(row), highlight=False)
    if pair is not None:
        _block(console, "Question", pair.question)
        for slot, which, text in _answers_in_order(row, pair):
            _block(console, f"Answer {slot} ({which})", text)
    if row.get("context_block"):
        _block(console, "Context block", row["context_block"])
    if row.get("reply") is not None:
        _block(console, "Reply", row["reply"])
    elif row.get("status") == "ok" and "reply" not in row:
        console.print(
            "[dim]no reply recorded (a run made before replies were kept, or not an LLM judge)[/dim]"
        )


def run_show_command(
    run_dir: Path,
    chosen: ShowFilter,
    *,
    limit: int | None,
    dataset: str | None,
    console: Console | None = None,
) -> int:
    console = console or output_console(highlight=False)
    note = output_console(stderr=True, highlight=False)
    run = rundir.load_run(run_dir)
    # A guarded run's replies and context blocks are in the private store, when it is on this machine.
    texts = PrivateStore().load_texts(run.run_id, "judgments") if run.policy != "any" else None
    selected = select_judgments(with_private_texts(run.judgments, texts), chosen)
    total = selected.height
    if limit is not None:
        selected = selected.head(limit)
    pairs = _pairs_of(run, dataset, note) if total else {}
    per_user = users_repeat(run.judgments)
    for row in selected.iter_rows(named=True):
        print_judgment(row, pairs.get(row["pair_id"]), console, user=per_user)
    shown = f"{selected.height} of {total}" if selected.height < total else str(total)
    console.print(f"{shown} judgments shown from {run.run_id}", highlight=False)
    if per_user:
        for line in accuracy_lines(select_judgments(run.judgments, replace(chosen, outcome=None))):
            console.print(escape(line), highlight=False)
    return 0


def accuracy_lines(frame: pl.DataFrame) -> list[str]:
    """Per judge × context of the selection (all outcomes): pair accuracy beside user accuracy, for a run whose
    users have several pairs (prbj.analysis.users counts them)."""
    lines = []
    for judge, context in frame.select("judge", "context").unique(maintain_order=True).iter_rows():
        mine = frame.filter(pl.col("judge") == judge, pl.col("context") == context)
        counts = UserCounts.of(mine)
        decided = int(counts.decided.sum())
        pair_accuracy = int(counts.correct.sum()) / decided if decided else None
        lines.append(
            f"{judge} · {context}: pair accuracy {fmt.percent_sign(pair_accuracy)} over {decided} decided pairs, "
            f"user accuracy {fmt.percent_sign(counts.mean_accuracy())} over {counts.users_decided} users"
        )
    return lines


# --- diff -----------------------------------------------------------------------------------------------

_KEY = ["pair_id", "judge", "context"]


def changed_verdicts(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """Judgments present in both runs (same pair, judge, context) whose outcome or verdict differs."""
    columns = [
        c for c in ("subset", "status", "verdict", "correct", "reply", "chosen_position") if c in a.columns
    ]
    left = a.select([*_KEY, *columns])
    right = b.select([*_KEY, *[c for c in columns if c in b.columns]])
    joined = left.join(right, on=_KEY, how="inner", suffix="_b")
    if "reply_b" not in joined.columns:
        joined = joined.with_columns(pl.lit(None, dtype=pl.String).alias("reply_b"))
    if "reply" not in joined.columns:
        joined = joined.with_columns(pl.lit(None, dtype=pl.String).alias("reply"))
    changed = (
        (pl.col("status") != pl.col("status_b"))
        | (pl.col("verdict").fill_null("") != pl.col("verdict_b").fill_null(""))
        | (pl.col("correct") != pl.col("correct_b"))
    )
    return joined.filter(changed).sort(_KEY)


def run_names(first: RunData, second: RunData) -> tuple[str, str]:
    """How diff names the two runs: by their ids (by the folders given when both have one id)."""
    if first.run_id != second.run_id:
        return first.run_id, second.run_id
    return str(first.run_dir), str(second.run_dir)


def shared_pairs(first: RunData, second: RunData, names: tuple[str, str]) -> tuple[set[str] | None, str]:
    """The pairs two runs can be compared on: all of them on one dataset (None, and no note); on two selections
    of one dataset (a full run and a --subset or --limit run of the same file), the pairs both judged, with a
    note saying how many. Runs of different datasets cannot be compared pair by pair."""
    fp_a, fp_b = first.dataset.get("fingerprint"), second.dataset.get("fingerprint")
    if fp_a == fp_b:
        return None, ""
    source_a = first.dataset.get("source_fingerprint") or fp_a
    source_b = second.dataset.get("source_fingerprint") or fp_b
    if source_a != source_b:
        raise DataError(
            f"{names[0]} and {names[1]} were made on different datasets (fingerprints {fp_a} and {fp_b}); "
            "their verdicts cannot be compared pair by pair"
        )
    pairs_a = set(first.judgments["pair_id"].to_list())
    pairs_b = set(second.judgments["pair_id"].to_list())
    shared = pairs_a & pairs_b
    if not shared:
        raise DataError(f"{names[0]} and {names[1]} judged no pair in common (two selections of one dataset)")
    note = (
        f"{names[0]} judged {len(pairs_a)} pairs and {names[1]} {len(pairs_b)} (two selections of one "
        f"dataset): comparing the {len(shared)} they share"
    )
    return shared, note


def run_diff_command(
    run_a: Path,
    run_b: Path,
    *,
    judges: Sequence[str] = (),
    limit: int | None = None,
    console: Console | None = None,
) -> int:
    console = console or output_console(highlight=False)
    first, second = rundir.load_run(run_a), rundir.load_run(run_b)
    names = run_names(first, second)
    shared, note = shared_pairs(first, second, names)
    a, b = first.judgments, second.judgments
    if shared is not None:
        a, b = (frame.filter(pl.col("pair_id").is_in(sorted(shared))) for frame in (a, b))
        output_console(stderr=True, highlight=False).print(f"note: {note}")
    if judges:
        _check_names("--judge", judges, sorted(set(a["judge"].to_list()) | set(b["judge"].to_list())))
        a, b = a.filter(pl.col("judge").is_in(list(judges))), b.filter(pl.col("judge").is_in(list(judges)))
    changed = changed_verdicts(a, b)
    common = a.join(b.select(_KEY), on=_KEY, how="inner").height
    rows = list(changed.iter_rows(named=True))
    for row in rows[:limit] if limit is not None else rows:
        console.rule(
            f"{escape(row['pair_id'])} · {escape(row['subset'])} · {escape(row['judge'])} · "
            f"{escape(row['context'])}",
            align="left",
        )
        for name, suffix in zip(names, ("", "_b"), strict=True):
            outcome = outcome_of({"status": row[f"status{suffix}"], "correct": row[f"correct{suffix}"]})
            console.print(
                f"[bold]{escape(name)}[/bold]: {outcome}, verdict {row[f'verdict{suffix}'] or '—'}"
                f" (status {row[f'status{suffix}']})",
                highlight=False,
            )
        for name, suffix in zip(names, ("", "_b"), strict=True):
            reply = row[f"reply{suffix}"]
            if reply is not None:
                _block(console, f"Reply of {escape(name)}", reply)
    better = sum(1 for r in rows if r["correct_b"] and not r["correct"])
    worse = sum(1 for r in rows if r["correct"] and not r["correct_b"])
    console.print(
        f"{len(rows)} of {common} shared judgments changed from {names[0]} to {names[1]} ({better} now "
        f"correct, {worse} no longer correct)",
        highlight=False,
    )
    seed = first.summary.get("seed")
    for comparison in compare_runs(a, b, seed=seed if isinstance(seed, int) else 42):
        console.print(escape(change_line(comparison)), highlight=False)
    return 0


def change_line(c: Comparison) -> str:
    """One entry's accuracy in A and in B on the pairs both answered, the change with its 95% interval, and
    the paired test: `judge · context: 61.0% → 64.0% on 200 pairs: +3.0 pts (95% CI −1.2 to +7.1, over 40
    users); clustered McNemar (Obuchowski, 40 users) p=0.21 (5 lost, 11 gained)`."""
    unit = f"over {c.users} users" if c.users is not None else "over pairs"
    test = McNemarResult(c.second_only, c.first_only, c.p_value, c.method, c.users)  # type: ignore[arg-type]  # compare_pair wrote a Method
    # The test decides: with few users the interval is approximate (bench/small_users.py), the test exact.
    verdict = "significant" if c.p_value < ALPHA else "not significant"
    return (
        f"{c.first}: {fmt.percent_sign(c.accuracy_second)} → {fmt.percent_sign(c.accuracy_first)} on {c.n} pairs "
        f"answered in both: {fmt.points(c.difference)} pts (95% CI {fmt.points(c.ci_low)} to "
        f"{fmt.points(c.ci_high)}, {unit}); {test.describe()}: {verdict} at α = {ALPHA:g}"
    )
