"""Issue 24's speed figures: every page of `prbj view` on a big run, timed over real HTTP.

    python bench/bench_view.py [--pairs 5660] [--judges 10] [--repeats 5]

Builds (in a temporary folder, never committed) a benchmark-shaped dataset of --pairs pairs and a run of
--judges judges on it: 5,660 × 10 = 56,600 judgments by default, LLM-like judges with ~1,000-character replies
(half in both orders), a few failures, costs and latencies. Serves it with the real viewer on 127.0.0.1. The
viewer loads its runs (judgments, dataset, the report's figures) on a worker thread when it starts: that time
is printed apart. Then each page is timed: the first request and the median and worst of --repeats requests
after it, with the page's size. Target: every page under 300 ms, and no page carrying more than one page of the
table (the judgments page holds 50 rows, whatever the run's size).

The machine may be shared: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from bench_replay import benchmark_pairs, write_pairs  # noqa: E402
from browser import serving  # noqa: E402

from prbj.analysis.run_data import RunData  # noqa: E402
from prbj.analysis.stats import summarize  # noqa: E402
from prbj.data.loaders import load_dataset  # noqa: E402
from prbj.judges.verdict import REPLY_SEPARATOR  # noqa: E402
from prbj.runs import rundir  # noqa: E402
from prbj.runs.execute import JUDGMENT_SCHEMA  # noqa: E402

TARGET_MS = 300.0
REASONING = "The user's posts show a hands-on hobbyist on a budget who develops film at home. " * 8


def judgment_rows(pair_ids: list[str], subsets: list[str], judges: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for j in range(judges):
        judge, both = f"judge-{j:02d}", j % 2 == 0
        skill = 0.55 + 0.03 * j
        for pair_id, subset in zip(pair_ids, subsets, strict=True):
            failed = rng.random() < 0.01
            correct = not failed and rng.random() < skill
            verdict = None if failed else "chosen" if correct else "rejected"
            if both and not failed and rng.random() < 0.1:
                verdict, correct = "inconsistent", False
            reply = f"{REASONING}Result: {'A' if correct else 'B'}"
            rows.append(
                {
                    "pair_id": pair_id,
                    "subset": subset,
                    "judge": judge,
                    "context": "profile",
                    "status": "api_error" if failed else "ok",
                    "verdict": verdict,
                    "correct": correct,
                    "tie": False,
                    "chosen_position": "both" if both else rng.choice("AB"),
                    "chosen_words": 250,
                    "rejected_words": 240,
                    "cost_usd": 0.0012,
                    "prompt_tokens": 1900,
                    "completion_tokens": 220,
                    "cached": False,
                    "error": "503 Service Unavailable" if failed else None,
                    "truncated": False,
                    "sample_index": 0,
                    "reply": None if failed else (reply + REPLY_SEPARATOR + reply if both else reply),
                    "prompt_hash": "0" * 16,
                    "context_block": "Past posts of this user:\n- " + "\n- ".join(["I shoot film."] * 10),
                    "original_cost_usd": 0.0012,
                    "latency_s": round(rng.uniform(0.5, 3.0), 3),
                }
            )
    return rows


def build_run(tmp: Path, pairs: int, judges: int) -> Path:
    dataset_path = write_pairs(tmp / "pairs.jsonl", benchmark_pairs(pairs))
    dataset = load_dataset(str(dataset_path))
    ids = [p.id for p in dataset.pairs]
    subsets = [p.category for p in dataset.pairs]
    frame = pl.DataFrame(judgment_rows(ids, subsets, judges), schema=JUDGMENT_SCHEMA, orient="row")
    results = summarize(frame, seed=42)
    run_dir = tmp / "reports" / "big-run"
    run_dir.mkdir(parents=True)
    run = {
        "run_id": run_dir.name,
        "command": "judge",
        "dataset": rundir.dataset_record(dataset),
        "config": {},
    }
    summary = rundir.summary_document(dataset, 42, results)
    rundir.write_run(RunData(run_dir, run_dir.name, run, summary, results, frame, None))
    return run_dir


def fetch(url: str) -> tuple[float, int, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        body = response.read()
        status = response.status
    return (time.perf_counter() - started) * 1000, len(body), status


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=5660)
    parser.add_argument("--judges", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        started = time.perf_counter()
        run_dir = build_run(tmp, args.pairs, args.judges)
        print(f"built {args.pairs} pairs × {args.judges} judges in {time.perf_counter() - started:.1f} s")
        first_pair = "bench-00017"
        pages = [
            ("runs", "/"),
            ("run (report)", "/run/big-run"),
            ("judgments", "/run/big-run/judgments"),
            ("judgments, page 500", "/run/big-run/judgments?page=500"),
            ("judge + wrong", "/run/big-run/judgments?judge=judge-03&context=profile&outcome=wrong"),
            ("judges disagree", "/run/big-run/judgments?disagree=1&judge=judge-00&judge=judge-09"),
            ("inconsistent", "/run/big-run/judgments?inconsistent=1"),
            ("failed, by latency", "/run/big-run/judgments?outcome=failed&sort=latency_s&desc=1"),
            ("text search", "/run/big-run/judgments?q=case+4242%29"),
            ("pair", f"/run/big-run/pair/{first_pair}"),
            (
                "pair, in a filter",
                f"/run/big-run/pair/{first_pair}?outcome=wrong&judge=judge-05&context=profile",
            ),
        ]
        rows = []
        with serving([run_dir]) as (url, viewer):
            warm = viewer.warm()
            for name, path in pages:
                first, size, status = fetch(url + path)
                assert status == 200, (name, status)
                again = [fetch(url + path)[0] for _ in range(args.repeats)]
                rows.append((name, first, statistics.median(again), max(again), size))
        load = os.getloadavg()
        print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; target < {TARGET_MS:.0f} ms per page")
        print(f"loading the run at start-up (judgments, dataset, report figures): {warm:.1f} s")
        print(f"{'page':<22} {'first ms':>9} {'median ms':>10} {'max ms':>8} {'KB':>7}  under target")
        for name, first, median, worst, size in rows:
            verdict = "yes" if max(first, worst) < TARGET_MS else "no"
            print(f"{name:<22} {first:>9.0f} {median:>10.0f} {worst:>8.0f} {size / 1024:>7.0f}  {verdict}")


if __name__ == "__main__":
    main()
