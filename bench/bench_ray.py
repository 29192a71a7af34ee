"""The same multi-RM run local and with `--ray` on this machine: wall time of each, Ray overhead per pair, and
whether the two runs' judgments agree.

Three tiny reward models (built here, no download) judge the same pairs; each run has a fresh cache, so every
answer is computed. The Ray run starts a one-machine cluster first (its start-up is timed apart), so what is
printed as overhead is the cost of actors, serialisation and dispatch, not of starting Ray.

    python bench/bench_ray.py                 # 60 pairs
    python bench/bench_ray.py --pairs 200
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import polars as pl  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from tiny_rm import build_reward_model  # noqa: E402

from conftest import SUBSET_NAMES, make_record, write_jsonl  # noqa: E402
from prbj.cli import main  # noqa: E402

N_MODELS = 3


def _run(root: Path, name: str, dataset: Path, models: list[Path], *extra: str) -> tuple[float, Path]:
    out = root / name
    args = ["judge", "--no-progress", "--dataset", str(dataset), "--context", "none", "--out", str(out)]
    args += ["--cache-dir", str(root / f"cache-{name}"), *extra]
    for model in models:
        args += ["-p", f"hf:{model}"]
    started = time.perf_counter()
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    elapsed = time.perf_counter() - started
    if result.exit_code != 0:
        raise SystemExit(result.output)
    (run_dir,) = out.iterdir()
    return elapsed, run_dir


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=60)
    args = parser.parse_args()
    import ray

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        records = [make_record(i, SUBSET_NAMES[(i - 1) % 3]) for i in range(1, args.pairs + 1)]
        dataset = write_jsonl(root / "pairs.jsonl", records)
        texts = [dataset.read_text(encoding="utf-8")]
        models = [build_reward_model(root / f"rm-{n}", texts, seed=n) for n in range(N_MODELS)]

        local_s, local_dir = _run(root, "local", dataset, models)
        started = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        start_s = time.perf_counter() - started
        cpus = "0.5"  # three actors fit on the two CPUs of the cluster
        ray_s, ray_dir = _run(root, "ray", dataset, models, "--ray", "--cpus-per-model", cpus)
        ray.shutdown()

        columns = ["pair_id", "judge", "verdict", "score_chosen", "score_rejected"]
        a = pl.read_parquet(local_dir / "judgments.parquet").select(columns).sort("judge", "pair_id")
        b = pl.read_parquet(ray_dir / "judgments.parquet").select(columns).sort("judge", "pair_id")
        largest = max(
            (a[c] - b[c]).abs().max() or 0.0  # type: ignore[operator]
            for c in ("score_chosen", "score_rejected")
        )
        judged = args.pairs * N_MODELS
        print(f"{args.pairs} pairs x {N_MODELS} reward models = {judged} judgments, fresh cache each")
        print(f"local       {local_s:7.2f} s")
        print(f"--ray       {ray_s:7.2f} s   (cluster start-up {start_s:.2f} s, not counted)")
        print(f"overhead    {(ray_s - local_s) / judged * 1000:7.2f} ms per pair x model")
        print(f"verdicts equal: {a['verdict'].equals(b['verdict'])}; largest score difference {largest:.2e}")
        summary_equal = (local_dir / "summary.json").read_bytes() == (ray_dir / "summary.json").read_bytes()
        print(f"summary.json byte-identical: {summary_equal}")


if __name__ == "__main__":
    main_()
