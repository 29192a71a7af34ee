"""The options of `prbj judge` that ask how sure the judges are (--confidence, --selective, --escalate-to,
--escalate-below), taken out of the command's keyword arguments in one place, and what a run does with them:
probabilities per judgment, verdicts withheld below a calibrated threshold, cascades to a strong judge, and
the figures summary.json carries for them (present only when asked, so a run that asks for none of this writes
the summary.json it always did).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from prbj.analysis.confidence import CONFIDENCE, with_confidence
from prbj.analysis.position import position_fairness
from prbj.data.status import ABSTAINED
from prbj.errors import ConfigError

if TYPE_CHECKING:
    from prbj.analysis.cascade import CascadePlan
    from prbj.analysis.selective import Applied
    from prbj.runs.selective_file import SelectiveFile

# Calibration, thresholds and cascades are imported where a run asks for them: most runs ask for none, and
# every judge run would otherwise build their classes at start-up.

ConfidenceMode = Literal["logprobs", "available"]
# The held-out check's statistics (analysis.selective.Applied), meaningless over the pairs that calibrated.
_CHECK_FIELDS = ("held", "error_ci_low", "error_ci_high", "p_value", "consistent")


@dataclass(frozen=True)
class ConfidenceOptions:
    # "logprobs": also ask LLM judges for verdict-token log-probabilities; "available": only what the run
    # gives anyway (both orders, samples, scores); None: no probabilities at all (the default).
    confidence: ConfidenceMode | None = None
    selective: Path | None = None
    escalate_to: str | None = None
    escalate_below: float | None = None

    @classmethod
    def pop_from(cls, options: dict[str, Any]) -> ConfidenceOptions:
        made = cls(
            confidence=options.pop("confidence", None),
            selective=options.pop("selective", None),
            escalate_to=options.pop("escalate_to", None),
            escalate_below=options.pop("escalate_below", None),
        )
        if made.escalate_below is not None and made.escalate_to is None:
            raise ConfigError("--escalate-below needs --escalate-to PROVIDER (the judge unsure pairs go to)")
        if made.escalate_to is not None and made.escalate_below is None and made.selective is None:
            raise ConfigError(
                "--escalate-to needs --escalate-below CONF or --selective FILE (which pairs are unsure)"
            )
        return made

    @property
    def asked(self) -> bool:
        """Whether the run computes probabilities (any of these options implies them)."""
        return any(v is not None for v in (self.confidence, self.selective, self.escalate_to))

    @property
    def thresholds(self) -> SelectiveFile | None:
        from prbj.runs.selective_file import read_selective

        return read_selective(self.selective) if self.selective is not None else None


@dataclass
class ConfidenceResult:
    frame: pl.DataFrame
    figures: dict[str, Any] = field(default_factory=dict)
    # One line per selective judge: what the threshold kept, and the held-out pairs' error against the target.
    notes: list[str] = field(default_factory=list)


def withhold(
    frame: pl.DataFrame, thresholds: SelectiveFile
) -> tuple[pl.DataFrame, list[dict[str, Any]], list[str]]:
    """Verdicts below each judge's threshold become `abstained` (never a verdict); the figures of each
    threshold, measured on the held-out pairs (those not used to calibrate it)."""
    from prbj.analysis.selective import apply_threshold
    from prbj.analysis.user_counts import USER_KEY, user_expr, users_repeat

    figures: list[dict[str, Any]] = []
    notes: list[str] = []
    repeat = users_repeat(frame)
    for entry in thresholds.entries:
        mine = (pl.col("judge") == entry.judge) & (pl.col("context") == entry.context)
        rows = frame.filter(mine, pl.col("status") == "ok", pl.col(CONFIDENCE).is_not_null())
        if rows.height == 0:
            continue
        rows = rows.with_columns(user_expr(rows))
        held_out = rows.filter(~pl.col("pair_id").is_in(sorted(entry.calibration_pairs)))
        applied = apply_threshold(
            rows[CONFIDENCE].to_numpy(),
            rows["correct"].to_numpy(),
            threshold=entry.threshold,
            target_error=thresholds.target_error,
        )
        check = (
            apply_threshold(
                held_out[CONFIDENCE].to_numpy(),
                held_out["correct"].to_numpy(),
                threshold=entry.threshold,
                target_error=thresholds.target_error,
                # A user's held-out verdicts go right or wrong together: the check at their effective size.
                users=held_out[USER_KEY].to_numpy() if repeat else None,
            )
            if held_out.height
            else None
        )
        figures.append(
            {
                "judge": entry.judge,
                "context": entry.context,
                "threshold": entry.threshold,
                "target_error": thresholds.target_error,
                "delta": thresholds.delta,
                # Over every pair, calibrating ones included: no check of the target (see held_out).
                **{k: v for k, v in applied.as_dict().items() if k not in _CHECK_FIELDS},
                "held_out": None if check is None else check.as_dict(),
            }
        )
        notes.append(_note(entry.judge, entry.context, applied.as_dict(), check))
        below = mine & (pl.col("status") == "ok") & (pl.col(CONFIDENCE) < entry.threshold)
        frame = frame.with_columns(
            pl.when(below).then(pl.lit(ABSTAINED)).otherwise(pl.col("status")).alias("status"),
            pl.when(below).then(None).otherwise(pl.col("verdict")).alias("verdict"),
            pl.when(below).then(False).otherwise(pl.col("correct")).alias("correct"),
            pl.when(below).then(False).otherwise(pl.col("tie")).alias("tie"),
        )
    return frame, figures, notes


def _note(judge: str, context: str, applied: dict[str, Any], check: Applied | None) -> str:
    kept = (
        f"{judge} ({context}): kept {applied['kept']} of {applied['n']} verdicts "
        f"(coverage {applied['coverage']:.1%})"
    )
    if applied["accuracy"] is not None:
        kept += f", accuracy {applied['accuracy']:.1%} on those kept"
    if check is None:
        return (
            kept + "; no held-out pairs (every pair judged here calibrated the threshold): target unchecked"
        )
    if check.held is None:
        return kept + f"; held-out pairs: none of {check.n} kept, target unchecked"
    return kept + f"; held-out pairs: {check.kept} of {check.n} kept, {check.verdict()}"


def cascade_plans(
    frame: pl.DataFrame, options: ConfidenceOptions, strong: str, strong_ran_alone: set[str]
) -> list[CascadePlan]:
    """One cascade per first-stage judge × context (every judge of the run but the strong one)."""
    from prbj.analysis.cascade import CascadePlan, escalated_label

    plans = []
    for judge, context in frame.select("judge", "context").unique(maintain_order=True).iter_rows():
        if judge == strong or judge == escalated_label(strong):
            continue
        alone = context in strong_ran_alone
        plans.append(
            CascadePlan(
                first=judge,
                second=strong,
                second_rows=strong if alone else escalated_label(strong),
                context=context,
                below=options.escalate_below,
                second_ran_alone=alone,
            )
        )
    return plans


def escalations(frame: pl.DataFrame, plans: Sequence[CascadePlan]) -> dict[str, list[str]]:
    """Per context, the pairs the strong judge must answer that it has not answered in this run."""
    from prbj.analysis.cascade import escalated_pairs

    wanted: dict[str, list[str]] = {}
    for plan in plans:
        if plan.second_ran_alone:
            continue
        pairs = escalated_pairs(frame, plan.first, plan.context, plan.below)
        known = wanted.setdefault(plan.context, [])
        known.extend(p for p in pairs if p not in set(known))
    return wanted


def confidence_figures(frame: pl.DataFrame, *, seed: int) -> dict[str, Any]:
    from prbj.analysis.calibration import calibration

    figures: dict[str, Any] = {}
    if rows := calibration(frame, seed=seed):
        figures["calibration"] = [row.as_dict() for row in rows]
    return figures


def order_figures(frame: pl.DataFrame) -> dict[str, Any]:
    """Position consistency and preference fairness, for judges that ran both orders (in summary.json when the
    run asked how sure its judges are; the report shows them for every run with both orders)."""
    rows = position_fairness(frame)
    return {"position_fairness": [row.as_dict() for row in rows]} if rows else {}


def prepare(frame: pl.DataFrame, options: ConfidenceOptions) -> ConfidenceResult:
    """Probabilities for every judgment, and the verdicts below a --selective threshold withheld: what a
    cascade needs to know which pairs to escalate."""
    if not options.asked:
        return ConfidenceResult(frame)
    frame = with_confidence(frame)
    thresholds = options.thresholds
    if thresholds is None:
        return ConfidenceResult(frame)
    frame, selective, notes = withhold(frame, thresholds)
    return ConfidenceResult(frame, {"selective": selective}, notes)


def finish(
    prepared: ConfidenceResult,
    options: ConfidenceOptions,
    *,
    seed: int,
    plans: Sequence[CascadePlan] = (),
    second_stage: pl.DataFrame | None = None,
) -> ConfidenceResult:
    """The prepared judgments with the strong judge's second-stage rows and every cascade added, and all the
    figures summary.json carries for them."""
    from prbj.analysis.cascade import add_cascades

    frame = prepared.frame
    if not options.asked:
        # Nothing new in summary.json; the report still shows position fairness for judges of both orders.
        return ConfidenceResult(frame)
    if second_stage is not None and second_stage.height:
        frame = pl.concat([frame, with_confidence(second_stage)], how="diagonal_relaxed")
    frame, cascades = add_cascades(frame, list(plans))
    figures = {**confidence_figures(frame, seed=seed), **prepared.figures, **order_figures(frame)}
    if cascades:
        figures["cascades"] = [c.as_dict() for c in cascades]
    return ConfidenceResult(frame, figures, prepared.notes)
