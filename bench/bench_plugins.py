"""How fast prbj runs a reward model written in Python: a model that returns constants, called bare and through
`prbj judge`'s path, side by side in one run (issue 40: at least 50,000 items/s in-process).

The data are per-user preferences made here (every user with a history of earlier choices and several test
pairs, as PersonalRewardBench has them), judged in the default `profile` context: each item carries the user's
history. Timed, in each round:

- bare: the model's `score` called on the items prbj would build, in batches of --batch-size (the floor: what
  the model itself costs);
- engine alone: the built-in `length` judge on the same pairs (prbj's fixed cost of judging a pair, with no
  model and no cache);
- prbj, cold: every pair through the engine, items built, looked up in a fresh cache folder, scored in batches,
  the answers stored and the cache closed (what a first `prbj judge -p py:…` costs around the model);
- prbj, rerun: the same pairs again on that folder, every answer from the cache (the model is never called);
- prbj, no cache: the cold path without a cache folder, to show what the disk costs.

Each path's figure is the best of --repeat rounds, in items per second of wall clock and per second of the
process's CPU time (on a busy machine the wall clock measures the neighbours too; the CPU time much less so).
Each round runs in a fresh process, the paths in alternating order; with --against, a round of the other
checkout (its own prbj, this bench's code) runs after each of this one's, so that both meet the same load, and
the ratios of the two are printed.

    python bench/bench_plugins.py                            # 10,000 pairs (20,000 items), best of 5 rounds
    python bench/bench_plugins.py --against ../prbj-before   # the same, next to another checkout
    python bench/bench_plugins.py --pairs 50000 --batch-size 256
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# Items per second a model returning constants must be scored at, in-process (issue 40).
TARGET = 50_000
BARE = "bare model, batches"
ENGINE = "engine alone (built-in length judge)"
COLD = "prbj judge path, cold cache"
RERUN = "prbj judge path, rerun from cache"
NO_CACHE = "prbj judge path, no cache"
PATHS = (BARE, ENGINE, COLD, RERUN, NO_CACHE)
# The paths the target is about.
TARGETED = (COLD, RERUN)

CONSTANT_RM = '''
class Constant:
    """Returns 1.0 for every item: all that is timed is what surrounds the model."""

    version = "1"

    def score(self, items):
        return [1.0] * len(items)
'''

Timing = tuple[float, float]  # wall-clock seconds, CPU seconds of the process


def timed(work: Callable[[], Any]) -> tuple[Timing, Any]:
    start, cpu = time.perf_counter(), time.process_time()
    result = work()
    return (time.perf_counter() - start, time.process_time() - cpu), result


# --- one round, in a process of its own whose prbj is the checkout timed ----------------------------------------


def per_user_pairs(pairs: int, per_user: int, history_rows: int) -> Any:
    """`pairs` test pairs, `per_user` per user, each user with `history_rows` earlier choices."""
    from prbj.data.loaders import Dataset
    from prbj.data.schema import Pair, Preference

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


def time_bare(spec: str, dataset: Any, batch_size: int) -> Timing:
    from prbj.local.rm_api import ScoreItem
    from prbj.local.rm_loader import load, parse_spec

    rm = load(parse_spec(spec)).instance
    items = [
        ScoreItem(p.user_id, p.id, p.question, answer, None, dict(p.groups), p.history)
        for p in dataset.pairs
        for answer in (p.chosen, p.rejected)
    ]

    def run() -> None:
        for first in range(0, len(items), batch_size):
            rm.score(items[first : first + batch_size])

    return timed(run)[0]


def time_prbj(spec: str, dataset: Any, batch_size: int, cache_dir: Path | None) -> tuple[Timing, int]:
    """The time to judge every pair (the cache closed, so its writes are in), and how many items the model
    scored (not the cache)."""
    import asyncio

    from prbj.judges.python_rm import make_python_judges
    from prbj.judges.setup import JudgeOptions
    from prbj.llm.cache import ResponseCache
    from prbj.llm.gateway import Gateway
    from prbj.runs.execute import judge_dataset

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


def time_engine(dataset: Any) -> Timing:
    import asyncio

    from prbj.judges.baselines import make_baseline
    from prbj.runs.execute import judge_dataset

    judge = make_baseline("length", seed=0)
    return timed(lambda: asyncio.run(judge_dataset(dataset, [judge], concurrency=16, show_progress=False)))[0]


def one_round(args: argparse.Namespace) -> dict[str, Timing]:
    """Every path once (the order alternating with --round), on a cache folder of its own."""
    dataset = per_user_pairs(args.pairs, args.per_user, args.history)
    n = 2 * len(dataset.pairs)
    folder = Path(args.worker_dir)
    file = folder / "constant_rm.py"
    file.write_text(CONSTANT_RM, encoding="utf-8")
    spec = f"py:{file}:Constant"
    timings: dict[str, Timing] = {}

    def cold_then_rerun() -> None:
        timing, computed = time_prbj(spec, dataset, args.batch_size, folder / "cache")
        assert computed == n, computed
        timings[COLD] = timing
        timing, computed = time_prbj(spec, dataset, args.batch_size, folder / "cache")
        assert computed == 0, f"the rerun called the model for {computed} items"
        timings[RERUN] = timing

    steps: list[Callable[[], None]] = [
        lambda: timings.__setitem__(BARE, time_bare(spec, dataset, args.batch_size)),
        lambda: timings.__setitem__(ENGINE, time_engine(dataset)),
        cold_then_rerun,
        lambda: timings.__setitem__(NO_CACHE, time_prbj(spec, dataset, args.batch_size, None)[0]),
    ]
    for step in steps if args.round % 2 == 0 else reversed(steps):
        step()
    return timings


# --- the rounds, and what they add up to ------------------------------------------------------------------------


def run_round(root: Path, python: str, args: argparse.Namespace, round_index: int) -> dict[str, Timing]:
    with tempfile.TemporaryDirectory(prefix="prbj-bench-plugins-") as folder:
        command = [python, str(Path(__file__).resolve()), "--worker-root", str(root), "--worker-dir", folder]
        command += ["--round", str(round_index), "--pairs", str(args.pairs), "--per-user", str(args.per_user)]
        command += ["--history", str(args.history), "--batch-size", str(args.batch_size)]
        environment = {**os.environ, "PYTHONPATH": str(root)}
        done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    if done.returncode != 0:
        raise SystemExit(f"a round of {root} failed:\n{done.stderr[-3000:]}")
    return {label: (wall, cpu) for label, (wall, cpu) in json.loads(done.stdout.splitlines()[-1]).items()}


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.0f}" if seconds > 0 else "∞"


def report(
    args: argparse.Namespace, trees: list[tuple[str, Path]], best: dict[str, dict[str, Timing]]
) -> None:
    n = 2 * args.pairs
    users = (args.pairs + args.per_user - 1) // args.per_user
    print(
        f"data: {args.pairs} pairs of {users} users ({n} items), {args.history} earlier choices per user, context "
        f"profile; batch size {args.batch_size}; best of {args.repeat} rounds; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    names = [name for name, _ in trees]
    header = f"  {'items/s (wall) | items per CPU-second':<38}"
    for name in names:
        header += f" {name + ' wall':>18} {name + ' CPU':>18}"
    if len(trees) == 2:
        header += f" {'speed-up wall':>14} {'CPU':>6}"
    header += f" {'µs/item over bare (CPU)':>24}"
    print(header)
    this = best[names[0]]
    for label in PATHS:
        line = f"  {label:<38}"
        for name in names:
            wall, cpu = best[name][label]
            line += f" {rate(n, wall):>18} {rate(n, cpu):>18}"
        if len(trees) == 2:
            (wall_a, cpu_a), (wall_b, cpu_b) = best[names[0]][label], best[names[1]][label]
            line += f" {wall_b / wall_a:>13.2f}× {cpu_b / cpu_a:>5.2f}×" if wall_a and cpu_a else " " * 22
        over = "" if label == BARE else f"{(this[label][1] - this[BARE][1]) / n * 1e6:.1f}"
        print(line + f" {over:>24}")
    for label in TARGETED:
        wall, cpu = this[label]
        verdict = (
            "met"
            if n / wall >= TARGET
            else "met per CPU-second (the wall clock measured a busy machine)"
            if n / cpu >= TARGET
            else "NOT met"
        )
        print(
            f"target >= {TARGET:,} items/s in-process, {label.removeprefix('prbj judge path, ')}: "
            f"{rate(n, wall)} wall, {rate(n, cpu)} per CPU-second: {verdict}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--per-user", type=int, default=10, help="test pairs per user")
    parser.add_argument("--history", type=int, default=10, help="earlier choices per user")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5, help="rounds of each checkout; the best counts")
    parser.add_argument("--against", type=Path, help="another prbj checkout, timed next to this one")
    parser.add_argument(
        "--against-python", default=sys.executable, help="the Python with that checkout's deps"
    )
    # A round, in the process the bench starts for it.
    parser.add_argument("--worker-root", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--worker-dir", help=argparse.SUPPRESS)
    parser.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker_root is not None:
        sys.path[:0] = [str(args.worker_root.resolve())]
        print(json.dumps(one_round(args)))
        return
    trees = [("this", ROOT)]
    pythons = {"this": sys.executable}
    if args.against is not None:
        trees.append((args.against.name, args.against.resolve()))
        pythons[args.against.name] = args.against_python
    best: dict[str, dict[str, Timing]] = {name: {} for name, _ in trees}
    for round_index in range(args.repeat):
        for name, root in trees if round_index % 2 == 0 else trees[::-1]:
            for label, (wall, cpu) in run_round(root, pythons[name], args, round_index).items():
                old = best[name].get(label, (math.inf, math.inf))
                best[name][label] = (min(old[0], wall), min(old[1], cpu))
    report(args, trees, best)


if __name__ == "__main__":
    main()
