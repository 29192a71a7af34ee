"""Every confidence figure of a benchmark-sized run, timed: 5,660 judgments (2,830 pairs × 2 orders) × 10 judges.

    python bench/bench_confidence.py [judgments] [judges]

What a `prbj judge --confidence ... --escalate-to ...` run computes after judging (probabilities per judgment from
log-probabilities, both orders and scores; calibration with three bootstrap intervals per judge; position
fairness; a cascade), plus what `prbj calibrate` computes (a Learn-then-Test threshold per judge) and applying the
thresholds. Target: under 2 s in all. Beside it, the same intervals from a plain loop that draws each bootstrap
resample as an index array and recomputes the three figures (timed on one judge, multiplied by the judges).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import polars as pl
from scipy.stats import rankdata

from prbj.analysis.calibration import bin_of
from prbj.analysis.cascade import CascadePlan, escalated_label
from prbj.analysis.confidence import CONFIDENCE, P_CHOSEN, with_confidence
from prbj.analysis.selective import apply_threshold, learn_then_test
from prbj.analysis.stats import BOOTSTRAP_RESAMPLES
from prbj.runs.confidence import ConfidenceOptions, finish, prepare

SOURCES = ("logprobs", "orders", "scores")


def synthetic_run(judgments: int, judges: int, seed: int = 0) -> pl.DataFrame:
    """`judges` judges over the same pairs: a third with verdict-token probabilities, a third judged in both
    orders, a third with scores; each right more often when surer."""
    rng = np.random.default_rng(seed)
    frames = []
    for j in range(judges):
        source = SOURCES[j % 3]
        p = rng.beta(3, 1.5, judgments)  # P(chosen is better), mostly above 0.5
        chosen = rng.uniform(size=judgments) < p
        columns: dict[str, object] = {
            "pair_id": [f"p{i}" for i in range(judgments)],
            "subset": ["s"] * judgments,
            "judge": [f"judge-{j}"] * judgments,
            "context": ["profile"] * judgments,
            "status": ["ok"] * judgments,
            "verdict": np.where(chosen, "chosen", "rejected"),
            "correct": chosen,
            "tie": np.zeros(judgments, dtype=bool),
            "cost_usd": rng.uniform(0, 1e-3, judgments),
            "original_cost_usd": rng.uniform(0, 1e-3, judgments),
            "chosen_position": ["both" if source == "orders" else "A"] * judgments,
            "verdict_chosen_a": np.where(chosen | (rng.uniform(size=judgments) < 0.2), "chosen", "rejected"),
            "verdict_chosen_b": np.where(chosen, "chosen", "rejected"),
            "score_chosen": np.log(p) if source == "scores" else np.full(judgments, np.nan),
            "score_rejected": np.log1p(-p) if source == "scores" else np.full(judgments, np.nan),
            P_CHOSEN: p if source == "logprobs" else np.full(judgments, np.nan),
            "confidence_source": ["logprobs" if source == "logprobs" else None] * judgments,
        }
        frame = pl.DataFrame(columns).with_columns(
            pl.col("score_chosen", "score_rejected", P_CHOSEN).fill_nan(None)
        )
        frames.append(frame)
    return pl.concat(frames)


def plain_loop_intervals(confidence: np.ndarray, correct: np.ndarray, p_chosen: np.ndarray) -> None:
    """The obvious way: a fresh index array per resample, the figures recomputed from scratch."""
    rng = np.random.default_rng(1)
    n = confidence.size
    values = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        pick = rng.integers(0, n, n)
        c, y, p = confidence[pick], correct[pick], p_chosen[pick]
        bins = bin_of(c)
        ece = sum(abs(y[bins == b].sum() - c[bins == b].sum()) for b in range(10)) / n
        right = y > 0
        ranks = rankdata(c)
        auroc = (ranks[right].sum() - right.sum() * (right.sum() + 1) / 2) / (right.sum() * (~right).sum())
        values.append((ece, np.mean((p - 1) ** 2), auroc))
    np.quantile(np.array(values), [0.025, 0.975], axis=0)


def main() -> None:
    judgments = int(sys.argv[1]) if len(sys.argv) > 1 else 5660
    judges = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    frame = synthetic_run(judgments, judges)
    options = ConfidenceOptions(confidence="available", escalate_to="judge-0", escalate_below=0.7)
    plan = CascadePlan("judge-1", "judge-0", "judge-0", "profile", 0.7, second_ran_alone=True)
    timings: dict[str, tuple[float, float]] = {}

    def timed(name: str, started: tuple[float, float]) -> None:
        timings[name] = (time.perf_counter() - started[0], time.process_time() - started[1])

    def now() -> tuple[float, float]:
        return time.perf_counter(), time.process_time()

    start = now()
    prepared = prepare(frame, options)
    timed("probabilities (with_confidence)", start)
    start = now()
    result = finish(prepared, options, seed=42, plans=[plan])
    timed("calibration, position fairness, cascade", start)
    start = now()
    rated = result.frame.filter(pl.col("status") == "ok", pl.col(CONFIDENCE).is_not_null())
    for _, mine in rated.group_by("judge", maintain_order=True):
        found = learn_then_test(
            mine[CONFIDENCE].to_numpy(), mine["correct"].to_numpy(), target_error=0.1, delta=0.05
        )
        if found.threshold is not None:
            apply_threshold(
                mine[CONFIDENCE].to_numpy(),
                mine["correct"].to_numpy(),
                threshold=found.threshold,
                target_error=0.1,
            )
    timed("Learn-then-Test thresholds and applying them", start)
    total = sum(wall for wall, _ in timings.values())
    cpu = sum(used for _, used in timings.values())

    one = with_confidence(frame).filter(pl.col("judge") == "judge-0")
    start = time.perf_counter()
    plain_loop_intervals(
        one[CONFIDENCE].to_numpy(), one["correct"].cast(pl.Float64).to_numpy(), one[P_CHOSEN].to_numpy()
    )
    loop_s = (time.perf_counter() - start) * judges

    assert len(result.figures["calibration"]) == judges + 1  # the cascade is a judge of its own
    assert escalated_label("judge-0") not in set(result.frame["judge"])
    print(
        f"{judgments:,} judgments × {judges} judges (+ a cascade), {BOOTSTRAP_RESAMPLES} bootstrap resamples"
    )
    print(f"  {'':<48} {'wall':>8} {'CPU':>8}")
    for name, (wall, used) in timings.items():
        print(f"  {name:<48} {wall:7.3f}s {used:7.3f}s")
    verdict = "yes" if total < 2.0 else "NO"
    print(f"  {'every figure':<48} {total:7.3f}s {cpu:7.3f}s   (target < 2 s wall: {verdict})")
    print(
        f"  a plain resampling loop for the intervals alone: {loop_s:.1f} s wall, {loop_s / total:.0f}× the whole"
    )


if __name__ == "__main__":
    main()
