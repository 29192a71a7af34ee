"""Write a synthetic run directory that exercises every part of the report, render it, and print the paths.

The figures are made up (seeded draws), not measurements: the run is labelled `synthetic-demo` everywhere.
It has pairwise judges with and without position bias, a length-biased judge, recorded costs, failures and
downstream best-of-k outcomes, so that a screenshot shows every chart:

    python scripts/demo_report.py /tmp/demo-run && scripts/screenshot_report.sh /tmp/demo-run/report.html
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import polars as pl

from prbj.analysis.stats import summarize
from prbj.runs.execute import JUDGMENT_SCHEMA
from prbj.runs.report_command import write_reports

SUBSETS = ("Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture")
# name, context, accuracy, extra accuracy when the chosen answer is shown as A, pairwise, USD per call
JUDGES = (
    ("gpt-judge", "profile", 0.74, 0.02, True, 0.0021),
    ("gpt-judge", "none", 0.61, 0.16, True, 0.0016),
    ("small-judge", "profile", 0.58, 0.30, True, 0.0002),
    ("scalar-rm", "none", 0.66, 0.0, False, 0.0),
    ("length", "none", 0.5, 0.0, False, None),
)
PAIRS_PER_SUBSET = 40


def synthetic_judgments(rng: np.random.Generator) -> pl.DataFrame:
    rows = []
    for judge, context, accuracy, a_bonus, pairwise, cost in JUDGES:
        for subset in SUBSETS:
            for index in range(PAIRS_PER_SUBSET):
                chosen_longer = index % 5 < 3  # a length bias earns 60% here
                position = ("A" if rng.random() < 0.5 else "B") if pairwise else None
                p = accuracy + (a_bonus if position == "A" else -a_bonus if position == "B" else 0.0)
                if judge == "length":
                    p = 1.0 if chosen_longer else 0.0
                elif judge == "small-judge":
                    p += 0.2 if chosen_longer else -0.2
                status = "parse_error" if pairwise and rng.random() < 0.03 else "ok"
                correct = status == "ok" and rng.random() < p
                rows.append(
                    {
                        "pair_id": f"{subset[:3].lower()}-{index:03d}",
                        "subset": subset,
                        "judge": judge,
                        "context": context,
                        "status": status,
                        "verdict": None if status != "ok" else ("chosen" if correct else "rejected"),
                        "correct": correct,
                        "tie": False,
                        "chosen_position": position,
                        "chosen_words": 120 if chosen_longer else 80,
                        "rejected_words": 80 if chosen_longer else 120,
                        "error": "no 'Result:' line in the reply" if status != "ok" else None,
                        "cost_usd": cost,
                        "cached": bool(rng.random() < 0.4),
                        "latency_s": float(rng.gamma(2.0, 0.4)) if cost else None,
                    }
                )
    schema = {**JUDGMENT_SCHEMA, "cost_usd": pl.Float64, "cached": pl.Boolean, "latency_s": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def synthetic_downstream(rng: np.random.Generator) -> pl.DataFrame:
    rows = []
    # RM names as `prbj downstream` and `prbj correlate` use them: the judge, or judge@context.
    strength = {"gpt-judge": 0.9, "small-judge": 0.4, "scalar-rm": 0.7, "length": 0.1}
    for rm, skill in strength.items():
        for subset in SUBSETS:
            for k in (1, 2, 4, 8, 16, 32):
                gain = skill * 0.25 * np.log2(k) / 5
                rows.append((rm, "bon", subset, k, 0.42 + gain + float(rng.normal(0, 0.01)), 40))
        rows.append((rm, "ppo", "all", None, 0.4 + skill * 0.2, 120))
    return pl.DataFrame(
        rows, schema=["rm", "source", "subset", "k", "score", "n"], orient="row"
    ).with_columns(pl.col("k").cast(pl.Int64))


def main(out: Path) -> None:
    rng = np.random.default_rng(7)
    out.mkdir(parents=True, exist_ok=True)
    frame = synthetic_judgments(rng)
    dataset = {
        "source": "synthetic-demo",
        "fingerprint": "synthetic",
        "n_pairs": PAIRS_PER_SUBSET * len(SUBSETS),
        "subsets": list(SUBSETS),
    }
    summary = {
        "prbj_version": "demo",
        "dataset": dataset,
        "seed": 7,
        "results": [row.as_dict() for row in summarize(frame, seed=7)],
    }
    (out / "run.json").write_text(json.dumps({"run_id": out.name, "dataset": dataset}, indent=2))
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    frame.write_parquet(out / "judgments.parquet")
    synthetic_downstream(rng).write_parquet(out / "downstream.parquet")
    files = write_reports([out], title="prbj report · synthetic demo (made-up figures)")
    print(files.markdown)
    print(files.html)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "demo-run"))
