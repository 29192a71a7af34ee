"""A probability per judgment: `p_chosen` (the judge's probability that the chosen answer is the better one),
`confidence` (its probability for the verdict it gave) and `confidence_source` (where p_chosen came from).

Sources, in this order of preference, the first one a judgment has:

    logprobs   the verdict token's log-probabilities, P(A) normalised over the two letters (judges.confidence),
               set by the judge itself (`--confidence logprobs`); with both orders, the mean of the two
    orders     judged in both orders (`--order both`): the mean of the two order-specific hard verdicts
               (1 when both picked the chosen answer, 0.5 when they disagree, 0 when both picked the other)
    samples    asked K times (`--samples K`): the share of the answered samples that picked the chosen
               answer (a tie or inconsistent sample counts one half)
    scores     a judge that scores each answer (scalar RMs, pointwise LLM judges, offline baselines):
               σ(score(chosen) − score(rejected)), Bradley–Terry

`confidence` is p_chosen for a `chosen` verdict, 1 − p_chosen for a `rejected` one, and 0.5 for a tie or an
inconsistent pair (no side taken). Only answered judgments (`ok`, and `abstained`, whose verdict was withheld
for being unsure) get a probability; a judgment no source covers (a single-order pairwise verdict without
log-probabilities) has none.
"""

from __future__ import annotations

import polars as pl

from prbj.data.status import ANSWERED_STATUSES

P_CHOSEN = "p_chosen"
CONFIDENCE = "confidence"
SOURCE = "confidence_source"
COLUMNS: dict[str, type[pl.DataType]] = {P_CHOSEN: pl.Float64, CONFIDENCE: pl.Float64, SOURCE: pl.String}
SOURCES = ("logprobs", "orders", "samples", "scores")
# Judgments whose probability means something: answered, whether or not the verdict was then withheld.
ANSWERED = ANSWERED_STATUSES
SAMPLE_COLUMN = "sample_verdicts"
# Decimals a confidence is kept to (far below any figure's resolution, far above floating-point noise).
DIGITS = 12


def _orders() -> pl.Expr:
    both = (
        (pl.col("chosen_position") == "both")
        & pl.col("verdict_chosen_a").is_not_null()
        & pl.col("verdict_chosen_b").is_not_null()
    )
    share = (
        (pl.col("verdict_chosen_a") == "chosen").cast(pl.Float64)
        + (pl.col("verdict_chosen_b") == "chosen").cast(pl.Float64)
    ) / 2.0
    return pl.when(both).then(share)


def _samples() -> pl.Expr:
    outcome = pl.element()
    vote = (
        pl.when(outcome == "chosen")
        .then(1.0)
        .when(outcome == "rejected")
        .then(0.0)
        .when(outcome.is_in(["tie", "inconsistent"]))
        .then(0.5)
        .otherwise(None)
    )
    return pl.col(SAMPLE_COLUMN).str.split("|").list.eval(vote).list.mean()


def _scores() -> pl.Expr:
    margin = pl.col("score_chosen") - pl.col("score_rejected")
    return 1.0 / (1.0 + (-margin).exp())


def with_confidence(frame: pl.DataFrame) -> pl.DataFrame:
    """The judgments with p_chosen, confidence and confidence_source filled from the best source each has.
    What is already there is kept (the judge's own log-probability p_chosen, or the figures of a run read
    back, whose withheld verdicts no longer say which side they took), so filling twice changes nothing."""
    frame = frame.with_columns(
        [
            pl.lit(None, dtype=dtype).alias(name)
            for name, dtype in COLUMNS.items()
            if name not in frame.columns
        ]
    )
    kept = pl.col(P_CHOSEN).is_not_null() & pl.col(SOURCE).is_not_null()
    # A run read back from another version may lack a source's columns: that source then gives nothing.
    present = set(frame.columns)
    candidates: list[tuple[str, pl.Expr]] = [("kept", pl.when(kept).then(pl.col(P_CHOSEN)))]
    if {"chosen_position", "verdict_chosen_a", "verdict_chosen_b"} <= present:
        candidates.append(("orders", _orders()))
    if SAMPLE_COLUMN in present:
        candidates.append(("samples", _samples()))
    if {"score_chosen", "score_rejected"} <= present:
        candidates.append(("scores", _scores()))
    answered = pl.col("status").is_in(ANSWERED)
    p_chosen = pl.coalesce([expr for _, expr in candidates])
    source = pl.coalesce(
        [pl.when(kept).then(pl.col(SOURCE))]
        + [pl.when(expr.is_not_null()).then(pl.lit(name)) for name, expr in candidates[1:]]
    )
    had_confidence = pl.col(CONFIDENCE).is_not_null() & kept
    frame = frame.with_columns(
        pl.when(answered).then(p_chosen).otherwise(None).alias(P_CHOSEN),
        pl.when(answered).then(source).otherwise(None).alias(SOURCE),
        had_confidence.alias("_had_confidence"),
    )
    verdict = pl.col("verdict")
    return frame.with_columns(
        pl.when(pl.col("_had_confidence"))
        .then(pl.col(CONFIDENCE))
        .when(pl.col(P_CHOSEN).is_null())
        .then(None)
        .when(verdict == "chosen")
        .then(pl.col(P_CHOSEN))
        .when(verdict == "rejected")
        .then(1.0 - pl.col(P_CHOSEN))
        .otherwise(0.5)
        # 1 − p and the same probability computed for the other side differ in the last bits (1 − σ(−10) is
        # not σ(10) in floating point): rounded, equal probabilities compare equal (ties stay ties in AUROC,
        # in the ECE bins and at a threshold).
        .round(DIGITS)
        .alias(CONFIDENCE)
    ).drop("_had_confidence")
