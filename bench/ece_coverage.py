"""How often the ECE interval holds the true ECE: simulated judges whose true (binned) ECE is known.

    python bench/ece_coverage.py [judgments] [trials]

Each trial draws `judgments` confidences (0.5 + 0.5·Beta(2, 1.2): mostly sure, as LLM judges are) and whether
each verdict is right from the judge's true accuracy at that confidence, then computes the figures as a run
does (2,000 bootstrap resamples). Printed per judge: the true ECE, the mean plug-in and debiased ECE, and the
share of trials whose 95% interval holds the true ECE, for the percentile interval of the plug-in ECE (what
prbj reported before) and for the interval it reports now (prbj.analysis.calibration.BinGaps), with their
mean widths. Brier's percentile interval is shown beside them as a reference that does cover.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

from prbj.analysis.calibration import Resamples, calibrate, resampled_figures

Accuracy = Callable[[np.ndarray], np.ndarray]


def judges() -> dict[str, tuple[Accuracy, float]]:
    """Name → (true accuracy at each confidence, true ECE)."""
    from scipy.stats import beta

    sure_share = float(beta.sf(0.6, 2.0, 1.2))  # P(confidence > 0.8): the bins (0.8, 0.9] and (0.9, 1]
    return {
        "perfectly calibrated": (lambda c: c, 0.0),
        "overconfident by 0.03": (lambda c: c - 0.03, 0.03),
        "overconfident by 0.07": (lambda c: c - 0.07, 0.07),
        "overconfident by 0.12": (lambda c: c - 0.12, 0.12),
        "overconfident above 0.8": (lambda c: np.where(c > 0.8, c - 0.08, c), 0.08 * sure_share),
        "underconfident by 0.05": (lambda c: np.minimum(c + 0.05, 1.0), float("nan")),
    }


def true_ece(accuracy: Accuracy, draws: int = 4_000_000) -> float:
    """The binned ECE of the judge over its whole population of confidences (by simulation, for judges whose
    gap is not one number)."""
    from prbj.analysis.calibration import ECE_BINS, bin_of

    confidence = 0.5 + 0.5 * np.random.default_rng(99).beta(2.0, 1.2, draws)
    gaps = np.bincount(bin_of(confidence), accuracy(confidence) - confidence, minlength=ECE_BINS) / draws
    return float(np.abs(gaps).sum())


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    rng = np.random.default_rng(7)
    print(f"{n} judgments per run, {trials} runs per judge, 95% intervals")
    header = (
        f"  {'judge':<26} {'true ECE':>8} {'plug-in':>8} {'debiased':>8} │ {'before: covers':>14} {'width':>6}"
        f" │ {'now: covers':>11} {'width':>6} │ {'Brier covers':>12}"
    )
    print(header)
    for name, (accuracy, stated) in judges().items():
        truth = stated if np.isfinite(stated) else true_ece(accuracy)
        brier_truth = None
        rows = []
        for trial in range(trials):
            confidence = 0.5 + 0.5 * rng.beta(2.0, 1.2, n)
            correct = (rng.uniform(size=n) < accuracy(confidence)).astype(float)
            p_chosen = np.where(correct > 0, confidence, 1.0 - confidence)
            resamples = Resamples(seed=trial)
            figures = calibrate(confidence, correct, p_chosen, resamples=resamples)
            _, drawn, _ = resampled_figures(confidence, correct, p_chosen, resamples)
            before = np.quantile(drawn.ece, [0.025, 0.975])
            # The Brier score's truth: E[(p_chosen − 1)²] over the same judge, from a large draw once.
            if brier_truth is None:
                big = 0.5 + 0.5 * np.random.default_rng(98).beta(2.0, 1.2, 2_000_000)
                right = accuracy(big)
                brier_truth = float(np.mean(right * (1 - big) ** 2 + (1 - right) * big**2))
            rows.append(
                (
                    figures["ece"],
                    figures["ece_debiased"],
                    before[0] <= truth <= before[1],
                    before[1] - before[0],
                    figures["ece_ci_low"] <= truth <= figures["ece_ci_high"],
                    figures["ece_ci_high"] - figures["ece_ci_low"],
                    figures["brier_ci_low"] <= brier_truth <= figures["brier_ci_high"],
                )
            )
        plug, debiased, old, old_width, new, new_width, brier = np.array(rows, dtype=float).mean(axis=0)
        print(
            f"  {name:<26} {truth:8.4f} {plug:8.4f} {debiased:8.4f} │ {old:14.1%} {old_width:6.3f}"
            f" │ {new:11.1%} {new_width:6.3f} │ {brier:12.1%}"
        )


if __name__ == "__main__":
    main()
