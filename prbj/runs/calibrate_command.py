"""`prbj calibrate` behind the CLI: from a run's judgments, the lowest confidence threshold per judge whose error
among the verdicts it keeps is at most --target-error with probability 1 − --delta (analysis.selective), printed
and written to selective.json for `prbj judge --selective`."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
from rich.table import Table

from prbj.analysis.confidence import CONFIDENCE, with_confidence
from prbj.analysis.selective import apply_threshold, learn_then_test
from prbj.analysis.user_counts import USER_KEY, user_expr, users_repeat
from prbj.display.fit import FittingTable
from prbj.display.width import output_console
from prbj.errors import DataError
from prbj.report import fmt
from prbj.report.confidence import consistent_cell, held_out_error
from prbj.runs import rundir
from prbj.runs.selective_file import selective_document, write_selective

PROCEDURE = (
    "Learn-then-Test, fixed-sequence testing from the highest confidence down, starting at the kept count "
    "picked from the confidences alone, exact binomial p-value P(Binomial(kept, target_error) <= errors) <= "
    "delta; bound: one-sided (1 - delta) Clopper-Pearson upper limit of the kept error. Where users repeat, "
    "kept and errors are divided by the design effect 1 + (m - 1) rho (rho: the errors' correlation within "
    "users) and the pairs split by user. Assumes calibration and later pairs are exchangeable."
)


def calibration_pairs(
    pair_ids: Sequence[str], share: float, seed: int, users: Sequence[str] | None = None
) -> set[str]:
    """The pairs that calibrate (the rest are held out): each pair's own seeded draw, so a pair stays on its
    side whatever else the run holds; with `users` (each pair's user, when users repeat) each user's draw, so
    that the held-out pairs are of other users than those that calibrated."""
    if share >= 1.0:
        return set(pair_ids)
    keys = users if users is not None else pair_ids
    return {
        p
        for p, key in zip(pair_ids, keys, strict=True)
        if random.Random(f"calibrate:{seed}:{key}").random() < share
    }


def run_calibrate_command(
    run_dir: Path,
    *,
    target_error: float,
    delta: float,
    judges: Sequence[str] = (),
    split: float = 1.0,
    seed: int = 42,
    out: Path | None = None,
) -> int:
    """0 when a threshold met the target for at least one judge (selective.json written), 1 when none did."""
    run = rundir.load_run(run_dir)
    frame = with_confidence(run.judgments)
    rated = frame.filter(pl.col("status") == "ok", pl.col(CONFIDENCE).is_not_null())
    if judges:
        rated = rated.filter(pl.col("judge").is_in(list(judges)))
    if rated.height == 0:
        raise DataError(
            f"{run_dir}: no judgment carries a probability; judge with --confidence logprobs, --order both, "
            f"--samples K, or a judge that scores answers"
            + (f" (asked for: {', '.join(judges)})" if judges else "")
        )
    picked: list[dict[str, Any]] = []
    table = Table(
        title=f"Confidence thresholds: kept error ≤ {fmt.percent(target_error)}% with probability "
        f"{fmt.percent(1 - delta)}%"
    )
    headers = ["judge", "context", "pairs", "threshold", "coverage %", "kept error %", "bound %"]
    if split < 1.0:
        headers += ["held-out pairs", "held-out error % (95% CI)", "consistent with target"]
    for header in headers:
        table.add_column(header, justify="left" if header in ("judge", "context") else "right")
    repeat = users_repeat(rated)
    if repeat:
        rated = rated.with_columns(user_expr(rated))
    for judge, context in rated.select("judge", "context").unique(maintain_order=True).iter_rows():
        mine = rated.filter(pl.col("judge") == judge, pl.col("context") == context)
        users = mine[USER_KEY].to_list() if repeat else None
        chosen = calibration_pairs(mine["pair_id"].to_list(), split, seed, users)
        calibrating = mine.filter(pl.col("pair_id").is_in(sorted(chosen)))
        held_out = mine.filter(~pl.col("pair_id").is_in(sorted(chosen)))
        found = learn_then_test(
            calibrating[CONFIDENCE].to_numpy(),
            calibrating["correct"].to_numpy(),
            target_error=target_error,
            delta=delta,
            users=calibrating[USER_KEY].to_numpy() if repeat else None,
        )
        row = [judge, context, str(found.n)]
        if found.threshold is None:
            row += ["none", "0.0", fmt.DASH, fmt.DASH]
        else:
            row += [
                f"{found.threshold:.4f}",
                fmt.percent(found.coverage),
                fmt.percent(found.error),
                fmt.percent(found.bound),
            ]
            picked.append(
                {"judge": judge, "context": context, **found.as_dict(), "calibration_pairs": sorted(chosen)}
            )
        if split < 1.0:
            row += _held_out_cells(held_out, found.threshold, target_error, repeat=repeat)
        table.add_row(*row)
    console = output_console()
    console.print(FittingTable(table, key_columns=2))
    if repeat:
        console.print(
            "users have several pairs here: each threshold was tested on its effective size (kept verdicts and "
            "errors divided by the design effect 1 + (m - 1) rho, rho the correlation of errors within users), "
            + ("the pairs split by user, " if split < 1.0 else "")
            + "and the bound is at that size"
            + "".join(
                f"; {t['judge']} · {t['context']}: design effect {t['design_effect']:.2f} (rho "
                f"{t['correlation']:.2f})"
                for t in picked
            ),
            highlight=False,
        )
    if not picked:
        console.print(
            f"[bold red]no threshold[/bold red] keeps the error at or below {fmt.percent(target_error)}% with "
            f"probability {fmt.percent(1 - delta)}% on these judgments (too few of them, or too many wrong "
            f"even among the surest): nothing written.",
            highlight=False,
        )
        return 1
    target = out if out is not None else run.run_dir / rundir.SELECTIVE_FILE
    write_selective(
        target,
        selective_document(
            target_error=target_error,
            delta=delta,
            procedure=PROCEDURE,
            source_run=run.run_id,
            fingerprint=run.dataset.get("fingerprint"),
            thresholds=picked,
        ),
    )
    console.print(
        "threshold: verdicts at or above it are kept; coverage: the share kept; bound: the one-sided "
        f"{fmt.percent(1 - delta)}% Clopper–Pearson upper limit of the kept error (Learn-then-Test, fixed "
        "sequence). The guarantee assumes later pairs are drawn like these.",
        highlight=False,
    )
    console.print(f"selective.json: {target}", highlight=False)
    return 0


def _held_out_cells(
    held_out: pl.DataFrame, threshold: float | None, target_error: float, *, repeat: bool
) -> list[str]:
    if threshold is None or held_out.height == 0:
        return [str(held_out.height), fmt.DASH, fmt.DASH]
    check = apply_threshold(
        held_out[CONFIDENCE].to_numpy(),
        held_out["correct"].to_numpy(),
        threshold=threshold,
        target_error=target_error,
        users=held_out[USER_KEY].to_numpy() if repeat else None,
    )
    return [str(check.n), held_out_error(check.as_dict()), consistent_cell(check.as_dict())]
