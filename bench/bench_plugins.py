"""How fast prbj runs a reward model written in Python: a model that returns constants, called bare and through
`prbj judge`'s path, side by side in one run.

The data are per-user preferences made here (every user with a history of earlier choices and several test
pairs, as PersonalRewardBench has them), judged in the default `profile` context: each item carries the user's
history. Timed, best of --repeat:

- bare: the model's `score` called on the items prbj would build, in batches of --batch-size (the floor: what
  the model itself costs);
- prbj, cold: every pair through the engine, items built, looked up in a fresh cache, scored in batches on the
  model's worker thread, the answers stored (what a first `prbj judge -p py:…` costs around the model);
- prbj, rerun: the same pairs again, every answer from the cache (the model is never called);
- prbj, no cache: the cold path without a cache folder, to show what the disk costs.

Each line gives items per second (wall clock, and per second of the process's CPU time: on a busy machine the
wall clock measures the neighbours too) and the microseconds prbj adds per item over the bare model. For scale,
the engine alone: the built-in `length` judge on the same pairs (prbj's fixed cost of judging a pair, with no
model and no cache).

    python bench/bench_plugins.py                    # 10,000 pairs (20,000 items)
    python bench/bench_plugins.py --pairs 50000 --batch-size 256
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from prbj.data.loaders import Dataset  # noqa: E402
from prbj.data.schema import Pair, Preference  # noqa: E402
from prbj.judges.baselines import make_baseline  # noqa: E402
from prbj.judges.python_rm import make_python_judges  # noqa: E402
from prbj.judges.setup import JudgeOptions  # noqa: E402
from prbj.llm.cache import ResponseCache  # noqa: E402
from prbj.llm.gateway import Gateway  # noqa: E402
from prbj.local.rm_api import ScoreItem  # noqa: E402
from prbj.local.rm_loader import load, parse_spec  # noqa: E402
from prbj.runs.execute import judge_dataset  # noqa: E402

# Items per second a model returning constants must be scored at, in-process (issue 40).
TARGET = 50_000
BARE = "bare model, batches"
ENGINE = "engine alone (built-in length judge)"
COLD = "prbj judge path, cold cache"
RERUN = "prbj judge path, rerun from cache"
NO_CACHE = "prbj judge path, no cache"

CONSTANT_RM = '''
class Constant:
    """Returns 1.0 for every item: all that is timed is what surrounds the model."""

    version = "1"

    def score(self, items):
        return [1.0] * len(items)
'''


def per_user_pairs(pairs: int, per_user: int, history_rows: int) -> Dataset:
    """`pairs` test pairs, `per_user` per user, each user with `history_rows` earlier choices."""
    made = []
    for user in range((pairs + per_user - 1) // per_user):
        history = tuple(
            Preference(
                f"u{user}-h{n}",
                f"Earlier question {n} of user {user} about cameras and lenses",
                f"The answer user {user} preferred, a bright prime lens, number {n}",
                f"The answer user {user} turned down, a long zoom lens, number {n}",
            )
            for n in range(history_rows)
        )
        for n in range(min(per_user, pairs - user * per_user)):
            made.append(
                Pair(
                    id=f"u{user}-t{n}",
                    category="default",
                    question=f"Which lens should I buy for portraits? (user {user}, question {n})",
                    profile=(),
                    narrative="",
                    rubric_aspects=(),
                    chosen=f"A bright 50mm prime lens suits portraits on a budget (answer {n}).",
                    rejected=f"A long zoom lens gives you reach for sports and wildlife (answer {n}).",
                    user_id=f"u{user}",
                    groups=(("age", "18-34" if user % 2 else "35+"),),
                    history=history,
                )
            )
    return Dataset("made-here", tuple(made))


def bare_items(dataset: Dataset) -> list[ScoreItem]:
    return [
        ScoreItem(p.user_id, p.id, p.question, answer, None, dict(p.groups), p.history)
        for p in dataset.pairs
        for answer in (p.chosen, p.rejected)
    ]


def time_bare(spec: str, items: list[ScoreItem], batch_size: int) -> Timing:
    rm = load(parse_spec(spec)).instance

    def run() -> None:
        for first in range(0, len(items), batch_size):
            rm.score(items[first : first + batch_size])

    return timed(run)[0]


Timing = tuple[float, float]  # wall-clock seconds, CPU seconds of the process


def timed(work: Any) -> tuple[Timing, Any]:
    start, cpu = time.perf_counter(), time.process_time()
    result = work()
    return (time.perf_counter() - start, time.process_time() - cpu), result


def time_prbj(spec: str, dataset: Dataset, batch_size: int, cache_dir: Path | None) -> tuple[Timing, int]:
    """The time to judge every pair (the cache closed, so its writes are in), and how many items the model
    scored (not the cache)."""
    gateway = Gateway(ResponseCache(cache_dir) if cache_dir is not None else None)
    options = JudgeOptions(batch_size=batch_size, mode="pointwise")
    (judge,) = make_python_judges(spec, options, gateway, None)

    def run() -> list[Any]:
        try:
            return asyncio.run(judge_dataset(dataset, [judge], concurrency=16, show_progress=False))
        finally:
            gateway.close()

    timing, judgments = timed(run)
    assert all(j.status == "ok" for j in judgments), {j.error for j in judgments}
    return timing, judge.runtime.computed


def time_engine(dataset: Dataset) -> Timing:
    judge = make_baseline("length", seed=0)
    return timed(lambda: asyncio.run(judge_dataset(dataset, [judge], concurrency=16, show_progress=False)))[0]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--per-user", type=int, default=10, help="test pairs per user")
    parser.add_argument("--history", type=int, default=10, help="earlier choices per user")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side; the best counts")
    args = parser.parse_args()

    dataset = per_user_pairs(args.pairs, args.per_user, args.history)
    items = bare_items(dataset)
    n = len(items)
    best: dict[str, Timing] = {}

    def keep(label: str, timing: Timing) -> None:
        old = best.get(label, (math.inf, math.inf))
        best[label] = (min(old[0], timing[0]), min(old[1], timing[1]))

    with tempfile.TemporaryDirectory(prefix="prbj-bench-plugins-") as tmp:
        file = Path(tmp) / "constant_rm.py"
        file.write_text(CONSTANT_RM, encoding="utf-8")
        spec = f"py:{file}:Constant"
        for run in range(args.repeat):
            keep(BARE, time_bare(spec, items, args.batch_size))
            keep(ENGINE, time_engine(dataset))
            folder = Path(tmp) / f"cache-{run}"
            timing, computed = time_prbj(spec, dataset, args.batch_size, folder)
            assert computed == n, computed
            keep(COLD, timing)
            timing, computed = time_prbj(spec, dataset, args.batch_size, folder)
            assert computed == 0, f"the rerun called the model for {computed} items"
            keep(RERUN, timing)
            keep(NO_CACHE, time_prbj(spec, dataset, args.batch_size, None)[0])

    print(
        f"data: {len(dataset.pairs)} pairs of {len(dataset.pairs) // args.per_user} users ({n} items), "
        f"{args.history} earlier choices per user, context profile; batch size {args.batch_size}; "
        f"best of {args.repeat}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(
        f"  {'':<36} {'wall s':>8} {'items/s':>10}  {'CPU s':>7} {'items/CPU-s':>11}  {'µs/item over bare (CPU)':>23}"
    )
    for label, (wall, cpu) in best.items():
        over = "" if label == BARE else f"{(cpu - best[BARE][1]) / n * 1e6:23.1f}"
        print(f"  {label:<36} {wall:8.3f} {n / wall:10,.0f}  {cpu:7.3f} {n / cpu:11,.0f}  {over}")
    cold_wall, cold_cpu = best[COLD]
    verdict = (
        "met" if n / cold_wall >= TARGET else "met per CPU-second" if n / cold_cpu >= TARGET else "NOT met"
    )
    print(
        f"target >= {TARGET:,} items/s in-process, cold cache: {n / cold_wall:,.0f} wall, {n / cold_cpu:,.0f} per "
        f"CPU-second: {verdict}"
    )


if __name__ == "__main__":
    main()
