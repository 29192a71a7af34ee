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

Each line gives items per second and the microseconds prbj adds per item over the bare model.

    python bench/bench_plugins.py                    # 10,000 pairs (20,000 items)
    python bench/bench_plugins.py --pairs 50000 --batch-size 256
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from prbj.data.loaders import Dataset  # noqa: E402
from prbj.data.schema import Pair, Preference  # noqa: E402
from prbj.judges.python_rm import make_python_judges  # noqa: E402
from prbj.judges.setup import JudgeOptions  # noqa: E402
from prbj.llm.cache import ResponseCache  # noqa: E402
from prbj.llm.gateway import Gateway  # noqa: E402
from prbj.local.rm_api import ScoreItem  # noqa: E402
from prbj.local.rm_loader import load, parse_spec  # noqa: E402
from prbj.runs.execute import judge_dataset  # noqa: E402

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


def time_bare(spec: str, items: list[ScoreItem], batch_size: int) -> float:
    rm = load(parse_spec(spec)).instance
    start = time.perf_counter()
    for first in range(0, len(items), batch_size):
        rm.score(items[first : first + batch_size])
    return time.perf_counter() - start


def time_prbj(spec: str, dataset: Dataset, batch_size: int, cache_dir: Path | None) -> tuple[float, int]:
    """Seconds to judge every pair, and how many requests the model answered (not the cache)."""
    gateway = Gateway(ResponseCache(cache_dir) if cache_dir is not None else None)
    options = JudgeOptions(batch_size=batch_size, mode="pointwise")
    try:
        (judge,) = make_python_judges(spec, options, gateway, None)
        start = time.perf_counter()
        judgments = asyncio.run(judge_dataset(dataset, [judge], concurrency=16, show_progress=False))
        elapsed = time.perf_counter() - start
    finally:
        gateway.close()
    assert all(j.status == "ok" for j in judgments), {j.error for j in judgments}
    return elapsed, judge.runtime.computed


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
    with tempfile.TemporaryDirectory(prefix="prbj-bench-plugins-") as tmp:
        file = Path(tmp) / "constant_rm.py"
        file.write_text(CONSTANT_RM, encoding="utf-8")
        spec = f"py:{file}:Constant"
        bare = min(time_bare(spec, items, args.batch_size) for _ in range(args.repeat))
        cold = rerun = uncached = float("inf")
        for run in range(args.repeat):
            folder = Path(tmp) / f"cache-{run}"
            seconds, computed = time_prbj(spec, dataset, args.batch_size, folder)
            assert computed == len(dataset.pairs), computed
            cold = min(cold, seconds)
            seconds, computed = time_prbj(spec, dataset, args.batch_size, folder)
            assert computed == 0, f"the rerun called the model for {computed} requests"
            rerun = min(rerun, seconds)
            uncached = min(uncached, time_prbj(spec, dataset, args.batch_size, None)[0])

    print(
        f"data: {len(dataset.pairs)} pairs of {len(dataset.pairs) // args.per_user} users ({n} items), "
        f"{args.history} earlier choices per user, context profile; batch size {args.batch_size}; "
        f"best of {args.repeat}"
    )

    def line(label: str, seconds: float) -> None:
        overhead = (seconds - bare) / n * 1e6
        print(
            f"  {label:<34} {seconds:7.3f} s  {n / seconds:>10,.0f} items/s  {overhead:6.1f} µs/item over bare"
        )

    print(f"  {'bare model, batches':<34} {bare:7.3f} s  {n / bare:>10,.0f} items/s")
    line("prbj judge path, cold cache", cold)
    line("prbj judge path, rerun from cache", rerun)
    line("prbj judge path, no cache", uncached)
    print(f"target: >= 50,000 items/s cold: {'met' if n / cold >= 50_000 else 'NOT met'} ({n / cold:,.0f})")


if __name__ == "__main__":
    main()
