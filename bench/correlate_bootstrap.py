"""Batched bootstrap vs a Python loop over resamples, side by side: same resamples, same values, time ratio.

python bench/correlate_bootstrap.py [n_rms] [resamples]
"""

from __future__ import annotations

import sys
import time

import numpy as np

from prbj.analysis.correlate import bootstrap_over_rms, metric_functions


def loop_bootstrap(x: np.ndarray, y: np.ndarray, seed: int, resamples: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, x.size, size=(resamples, x.size))
    functions = metric_functions()
    return {name: np.array([float(fn(x[p], y[p])) for p in picks]) for name, fn in functions.items()}


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    resamples = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    rng = np.random.default_rng(0)
    x, y = rng.random(n), rng.random(n)
    start = time.perf_counter()
    batched = bootstrap_over_rms(x, y, metric_functions(), seed=1, resamples=resamples)
    batched_s = time.perf_counter() - start
    start = time.perf_counter()
    looped = loop_bootstrap(x, y, seed=1, resamples=resamples)
    loop_s = time.perf_counter() - start
    for name, interval in batched.items():
        finite = looped[name][np.isfinite(looped[name])]
        low, high = np.quantile(finite, [0.025, 0.975])
        assert np.isclose(low, interval.low) and np.isclose(high, interval.high), name
    print(
        f"{n} RMs, {resamples} resamples, 6 metrics: batched {batched_s:.3f}s, loop {loop_s:.3f}s, "
        f"loop/batched = {loop_s / batched_s:.1f}x (identical intervals)"
    )


if __name__ == "__main__":
    main()
