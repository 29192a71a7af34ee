"""Issue 41 item 6: `prbj judge --dry-run` on a big per-user file beside Polars reading the same file, measured side
by side in one run (time and peak memory of each process), and the peak memory of a 1,000,000-row file.

    python bench/bench_per_user.py                      # 100,000 users × 2 rows (~183 MB), then 1,000,000 rows
    python bench/bench_per_user.py --users 20000 --no-million
    python bench/bench_per_user.py --rounds 3           # the median of three alternating rounds

The file is generated here (never committed): each user one train row (their history) and one test row, a
three-turn conversation and two answers of ~40 words, ~917 bytes a row as in the issue's measurement. prbj runs
as a user runs it (`prbj judge --dataset FILE --dry-run`: the default offline judges, which a dry run leaves to
the real run, and the plan), in a process of its own, as does Polars (`pl.read_ndjson(FILE)`); each reports its
peak RSS at exit. Targets: prbj within 4× of Polars' time; the 1,000,000-row file in ≤ 2 GB peak.

The machine may be shared: the load average is printed with the figures; compare the ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIME_TARGET = 4.0
MEMORY_TARGET_GB = 2.0
WORDS = (
    "the a of to and in is it you that for on with as are this be at or have from by not but what all were we "
    "when your can said there use an each which she do how their if will up other about out many then them these "
    "so some her would make like him into time has look two more write go see number no way could people my "
    "than first water been call who oil its now find long down day did get come made may part"
).split()
# Runs the real CLI; at exit it reports its peak RSS (kB) on stderr.
PRBJ = (
    "import atexit, resource, sys\n"
    "atexit.register(lambda: print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr))\n"
    "from prbj.cli import main\n"
    "main()\n"
)
POLARS = (
    "import resource, sys\n"
    "import polars as pl\n"
    "frame = pl.read_ndjson(sys.argv[1])\n"
    "print('ROWS', frame.height, file=sys.stderr)\n"
    "print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
)


def generate(path: Path, users: int, seed: int = 0) -> int:
    """`users` × (one train row, one test row) in the per-user layout; returns the rows written."""
    rng = random.Random(seed)

    def text(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    with path.open("w", encoding="utf-8") as out:
        for user in range(users):
            for split in ("train", "test"):
                row = {
                    "user_id": f"u{user}",
                    "context": [
                        {"role": "user", "content": text(25)},
                        {"role": "model", "content": text(30)},
                        {"role": "user", "content": text(15)},
                    ],
                    "chosen": {"role": "model", "content": text(40)},
                    "rejected": {"role": "model", "content": text(40)},
                    "split": split,
                    "type": "unguided",
                }
                out.write(json.dumps(row) + "\n")
    return 2 * users


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Seconds from start to exit and peak RSS in GB of one process (which reports its peak on stderr)."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} … failed ({done.returncode}):\n{done.stderr[-2000:]}")
    peak = next(int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("PEAK"))
    return elapsed, peak / 1024 / 1024


def prbj_dry_run(path: Path, out: Path, env: dict[str, str]) -> tuple[float, float]:
    argv = [sys.executable, "-c", PRBJ, "judge", "--dataset", str(path), "--dry-run", "--no-progress"]
    return timed([*argv, "--out", str(out)], env)


def polars_read(path: Path, env: dict[str, str]) -> tuple[float, float]:
    return timed([sys.executable, "-c", POLARS, str(path)], env)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--users", type=int, default=100_000, help="users of the side-by-side file (2 rows each)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds; the median is reported")
    parser.add_argument("--no-million", action="store_true", help="skip the 1,000,000-row memory check")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    with tempfile.TemporaryDirectory(prefix="prbj-bench-users-") as tmp:
        folder = Path(tmp)
        path = folder / "users.jsonl"
        rows = generate(path, args.users)
        size = path.stat().st_size / 1e6
        print(
            f"file: {args.users:,} users × 2 rows = {rows:,} rows, {size:.0f} MB; load average {os.getloadavg()}"
        )
        prbj_runs, polars_runs = [], []
        for _ in range(args.rounds):
            prbj_runs.append(prbj_dry_run(path, folder / "out", env))
            polars_runs.append(polars_read(path, env))
        prbj_s = statistics.median(t for t, _ in prbj_runs)
        polars_s = statistics.median(t for t, _ in polars_runs)
        prbj_gb = max(m for _, m in prbj_runs)
        polars_gb = max(m for _, m in polars_runs)
        ratio = prbj_s / polars_s
        print(f"{'':32} {'seconds':>8} {'peak GB':>8}")
        print(f"{'prbj judge --dry-run':32} {prbj_s:8.2f} {prbj_gb:8.2f}")
        print(f"{'polars read_ndjson':32} {polars_s:8.2f} {polars_gb:8.2f}")
        verdict = "within" if ratio <= TIME_TARGET else "NOT within"
        print(f"prbj/polars time: {ratio:.2f}× ({verdict} the {TIME_TARGET:g}× target)")
        if args.no_million:
            return
        path.unlink()
        million = folder / "million.jsonl"
        rows = generate(million, 500_000, seed=1)
        size = million.stat().st_size / 1e6
        seconds, peak = prbj_dry_run(million, folder / "out", env)
        verdict = "within" if peak <= MEMORY_TARGET_GB else "NOT within"
        print(
            f"1,000,000-row file ({rows:,} rows, {size:.0f} MB): prbj judge --dry-run {seconds:.1f} s, "
            f"peak {peak:.2f} GB ({verdict} the {MEMORY_TARGET_GB:g} GB target); load average {os.getloadavg()}"
        )


if __name__ == "__main__":
    main()
