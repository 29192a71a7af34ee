"""How often `prbj calibrate` finds a threshold, and how often the one it finds breaks its promise: simulated
judges whose true error at every confidence is known, the sequence of candidates started where it used to be
(n_half: the fewest kept at which an error of half the target passes) and where it starts now
(prbj.analysis.selective.sequence_start, picked from the confidences alone).

    python bench/calibrate_power.py [runs] [judgments ...]

Printed per judge and run size: the share of runs that find a threshold, the mean coverage (share of the
judgments kept), and the guarantee's empirical error rate: the share of runs whose threshold's true error
exceeds the target (at most δ by the guarantee). Target 10%, δ 5%.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np

from prbj.analysis.selective import half_target_kept, learn_then_test

TARGET, DELTA = 0.10, 0.05
Judge = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]


def judges() -> dict[str, Judge]:
    """Name → a draw of (confidence, true probability of a right verdict) for n judgments."""

    def sharp_top(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        # Modest confidences, but the surest third is nearly always right (the 150-pair run).
        confidence = rng.uniform(0.5, 1.0, n)
        return confidence, np.where(confidence > 0.82, 0.995, 0.7)

    def informative(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        confidence = rng.uniform(0.5, 1.0, n)
        return confidence, np.clip(4 * confidence - 2, 0, 1)

    def calibrated(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        confidence = 0.5 + 0.5 * rng.beta(2.0, 1.2, n)
        return confidence, confidence

    def overconfident(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        confidence = 0.5 + 0.5 * rng.beta(3.0, 1.0, n)
        return confidence, np.clip(confidence - 0.05, 0, 1)

    def uninformative(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        return rng.uniform(0.5, 1.0, n), np.full(n, 0.85)

    return {
        "right above 0.82": sharp_top,
        "never wrong above 0.75": informative,
        "calibrated": calibrated,
        "overconfident by 0.05": overconfident,
        "85% right at any confidence": uninformative,
    }


def true_error(judge: Judge, threshold: float) -> float:
    """The error among a large population's verdicts at or above the threshold."""
    confidence, chance = judge(np.random.default_rng(5), 400_000)
    kept = confidence >= threshold
    return float(1.0 - chance[kept].mean()) if kept.any() else 0.0


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    sizes = [int(a) for a in sys.argv[2:]] or [150, 400, 1500]
    print(f"target error {TARGET:.0%}, δ {DELTA:.0%}, {runs} runs per judge and size")
    print(
        f"  {'judge':<28} {'pairs':>5} │ {'before: found':>13} {'coverage':>8} {'broken':>6}"
        f" │ {'now: found':>10} {'coverage':>8} {'broken':>6} │ {'ms/run now':>10}"
    )
    for name, judge in judges().items():
        for n in sizes:
            figures = []
            for old in (True, False):
                rng = np.random.default_rng(123)
                found = coverage = broken = 0.0
                spent = 0.0
                for _ in range(runs):
                    confidence, chance = judge(rng, n)
                    correct = rng.uniform(size=n) < chance
                    started = time.process_time()
                    start = half_target_kept(n, TARGET, DELTA) if old else None
                    picked = learn_then_test(
                        confidence, correct, target_error=TARGET, delta=DELTA, start=start
                    )
                    spent += time.process_time() - started
                    if picked.threshold is not None:
                        found += 1
                        coverage += picked.coverage
                        broken += true_error(judge, picked.threshold) > TARGET
                figures.append((found / runs, coverage / runs, broken / runs, 1000 * spent / runs))
            (f0, c0, b0, _), (f1, c1, b1, ms) = figures
            print(
                f"  {name:<28} {n:5d} │ {f0:13.1%} {c0:8.3f} {b0:6.1%} │ {f1:10.1%} {c1:8.3f} {b1:6.1%}"
                f" │ {ms:10.2f}"
            )


if __name__ == "__main__":
    main()
