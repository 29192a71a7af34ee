"""Run directories written the way `prbj judge` writes them, from hand-made judgment rows, for report and
check tests that need outcomes a real judge would not produce on demand (flips, position bias, costs)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from prbj.analysis.stats import summarize
from prbj.analysis.users import users_section
from prbj.runs.execute import JUDGMENT_SCHEMA

if TYPE_CHECKING:
    from prbj.analysis.headline import Headline

EXTRA_TYPES = {
    "cost_usd": pl.Float64,
    "cached": pl.Boolean,
    "latency_s": pl.Float64,
    "p_chosen": pl.Float64,
    "user_seen": pl.Boolean,
}


def judgment(
    pair_id: str,
    subset: str,
    judge: str,
    *,
    context: str = "none",
    correct: bool = True,
    status: str = "ok",
    tie: bool = False,
    position: str | None = None,
    chosen_words: int = 20,
    rejected_words: int = 10,
    error: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    ok = status == "ok"
    verdict = None if not ok else "tie" if tie else "chosen" if correct else "rejected"
    return {
        "pair_id": pair_id,
        "subset": subset,
        "judge": judge,
        "context": context,
        "status": status,
        "verdict": verdict,
        "correct": ok and correct and not tie,
        "tie": ok and tie,
        "score_chosen": None,
        "score_rejected": None,
        "margin": None,
        "chosen_position": position,
        # As pairwise judges record it: the verdict under the order the chosen answer was shown in.
        "verdict_chosen_a": verdict if position == "A" else None,
        "verdict_chosen_b": verdict if position == "B" else None,
        "chosen_words": chosen_words,
        "rejected_words": rejected_words,
        "error": error,
        **extra,
    }


def outcomes(judge: str, subset: str, pattern: Iterable[bool], *, prefix: str = "p", **kw: Any) -> list[dict]:
    """One judgment per outcome in `pattern`, on pairs prefix-000, prefix-001, ..."""
    return [judgment(f"{prefix}-{i:03d}", subset, judge, correct=c, **kw) for i, c in enumerate(pattern)]


def write_run_dir(
    run_dir: Path,
    rows: Sequence[dict[str, Any]],
    *,
    seed: int = 0,
    source: str = "hand-made",
    fingerprint: str = "hand-made-0001",
    benchmark: str | None = None,
    started: str | None = None,
    headline: Headline | None = None,
) -> Path:
    """`headline`: the figure the run ranks by, as a card's [protocol] would set it (recorded in summary.json,
    its figures in each results row)."""
    schema = dict(JUDGMENT_SCHEMA)
    for row in rows:
        for key in row:
            if key not in schema:
                schema[key] = EXTRA_TYPES.get(key, pl.String)
    frame = pl.DataFrame(list(rows), schema=schema)
    subsets = sorted(frame["subset"].unique().to_list())
    dataset = {
        "source": source,
        "fingerprint": fingerprint,
        "n_pairs": frame.select("pair_id").n_unique(),
        "subsets": subsets,
    }
    summary = {
        "prbj_version": "test",
        "dataset": dataset,
        "seed": seed,
        "bootstrap": {"resamples": 2000, "confidence": 0.95},
        "results": [row.as_dict() for row in summarize(frame, seed=seed)],
    }
    if headline is not None:
        from prbj.analysis.headline import with_headlines

        rows_ = with_headlines(summarize(frame, seed=seed), frame, headline, seed=seed)
        summary["results"] = [row.as_dict() for row in rows_]
        summary["headline"] = headline.as_dict()
    if (users := users_section(frame, seed=seed)) is not None:
        summary["users"] = users
    run_dir.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {"seed": seed}
    if benchmark is not None:
        config["benchmark"] = {"name": benchmark, "version": "1"}
    run: dict[str, Any] = {"run_id": run_dir.name, "command": "judge", "dataset": dataset, "config": config}
    if started is not None:
        run["started"] = started
    (run_dir / "run.json").write_text(json.dumps(run), encoding="utf-8")
    (run_dir / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    frame.write_parquet(run_dir / "judgments.parquet")
    return run_dir
