"""The flat per-judgment table every export is made from: one row per judgment, a stable column set
(docs/export.md lists it; TABLE_COLUMNS is the contract), the pair's texts joined in, the user's texts left out.

Replies and error messages are the judge's own words, and an LLM judge may quote the profile it was shown:
without `include_profiles` such quotes are cut (prbj.export.privacy), and when the run's pairs cannot be read
(so quotes cannot be found) replies and errors are left out altogether rather than exported unchecked.

A run made under any `--personal-data` policy but `any` exports no text at all (question, answers, replies,
context blocks; an error says its cause, never its message) unless asked (`include_texts`, `include_profiles`),
and then the texts as they were sent: pseudonymized (the caller hands in the pairs with the run's pseudonym
table applied, and the replies from the private store)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import polars as pl

from prbj.analysis.run_data import RunData
from prbj.data.schema import Pair
from prbj.export.models import JudgeModel, judge_model
from prbj.export.privacy import ProfileScrubber
from prbj.export.source import Benchmark, benchmark_of
from prbj.privacy.guard import public_error

TABLE_COLUMNS: tuple[str, ...] = (
    "run_id",
    "benchmark",
    "benchmark_version",
    "pair_id",
    "subset",
    "judge",
    "model",
    "provider",
    "context",
    "order",
    "status",
    "cause",
    "error",
    "verdict",
    "correct",
    "tie",
    "p_chosen",
    "score_chosen",
    "score_rejected",
    "question",
    "chosen_answer",
    "rejected_answer",
    "other_answers",
    "reply",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "cached",
    "latency_s",
    "sample_index",
    "sample_hash",
)
# Only with include_profiles: what the judge was shown about the user (profile posts, planner aspects, or the
# narrative in the oracle setting).
PROFILE_COLUMNS: tuple[str, ...] = ("context_block",)

TABLE_SCHEMA: dict[str, Any] = {
    **{name: pl.String for name in TABLE_COLUMNS},
    "correct": pl.Boolean,
    "tie": pl.Boolean,
    "cached": pl.Boolean,
    "p_chosen": pl.Float64,
    "score_chosen": pl.Float64,
    "score_rejected": pl.Float64,
    "cost_usd": pl.Float64,
    "latency_s": pl.Float64,
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "sample_index": pl.Int64,
    **{name: pl.String for name in PROFILE_COLUMNS},
}

# judgments.parquet column → table column, where the names differ.
_RENAMED = {"chosen_position": "order"}
_FROM_JUDGMENTS = (
    "pair_id", "subset", "judge", "context", "chosen_position", "status", "cause", "error", "verdict", "correct",
    "tie", "p_chosen", "score_chosen", "score_rejected", "reply", "prompt_tokens", "completion_tokens",
    "cost_usd", "cached", "latency_s", "sample_index", "context_block",
)  # fmt: skip


def _withheld_error(row: dict[str, Any], policy: str) -> str | None:
    if row.get("error") is None:
        return None
    return public_error(
        str(row["status"]), row.get("cause"), where=f"message withheld (--personal-data {policy})"
    )


def shown_answers(row: dict[str, Any]) -> list[str] | None:
    """A table row's answers in the order the judge saw them (the chosen one first for judges that score each
    alone); every candidate of a best-of-k item, the preferred one first. None when the texts are not exported."""
    chosen, rejected = row.get("chosen_answer"), row.get("rejected_answer")
    if chosen is None or rejected is None:
        return None
    if row.get("other_answers"):
        return [chosen, rejected, *json.loads(row["other_answers"])]
    return [rejected, chosen] if row.get("order") == "B" else [chosen, rejected]


def _finite(value: Any) -> Any:
    """NaN and infinities are no JSON value and no figure: exported as missing."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


@dataclass(frozen=True)
class ExportRun:
    """A run on its way out: the run, its pairs (empty when they cannot be read, with the reason) and whether
    profile text may travel."""

    run: RunData
    pairs: dict[str, Pair]
    pairs_note: str | None = None
    include_profiles: bool = False
    # Under a guarded policy: the texts were asked for, and `pairs` and the replies are as they were sent.
    include_texts: bool = False

    @property
    def policy(self) -> str:
        return self.run.policy

    @property
    def texts_withheld(self) -> bool:
        """A guarded run exported without its texts."""
        return self.policy != "any" and not (self.include_texts or self.include_profiles)

    @cached_property
    def benchmark(self) -> Benchmark:
        config = self.run.run.get("config")
        return benchmark_of(self.run.dataset, config.get("benchmark") if isinstance(config, dict) else None)

    @cached_property
    def judges(self) -> dict[str, JudgeModel]:
        names = sorted(set(self.run.judgments["judge"].to_list()))
        return {name: judge_model(self.run, name) for name in names}

    @property
    def replies_dropped(self) -> bool:
        """Replies and errors are left out: they could quote a profile no one can check them against."""
        return not self.include_profiles and not self.pairs

    @cached_property
    def rows(self) -> list[dict[str, Any]]:
        frame = self.run.judgments
        present = [c for c in _FROM_JUDGMENTS if c in frame.columns]
        # A synthesized persona is about its user as much as the profile it was written from.
        personas = (
            frame.filter(pl.col("context") == "synthesized")["context_block"].drop_nulls().unique().to_list()
            if "context_block" in frame.columns
            else []
        )
        scrubber = ProfileScrubber(self.pairs.values(), also=personas)
        out = []
        for judged in frame.select(present).iter_rows(named=True):
            row: dict[str, Any] = {_RENAMED.get(k, k): _finite(v) for k, v in judged.items()}
            pair = self.pairs.get(str(row["pair_id"]))
            model = self.judges[row["judge"]]
            if self.texts_withheld:
                row["reply"] = row["context_block"] = None
                row["error"] = _withheld_error(row, self.policy)
                pair = None
            elif self.replies_dropped:
                row["reply"] = row["error"] = None
            elif not self.include_profiles:
                row["reply"], row["error"] = (
                    scrubber.scrub(row.get("reply")),
                    scrubber.scrub(row.get("error")),
                )
            row.update(
                run_id=self.run.run_id,
                benchmark=self.benchmark.slug,
                benchmark_version=self.benchmark.version,
                model=model.called,
                provider=model.provider,
                question=pair.question if pair else None,
                chosen_answer=pair.chosen if pair else None,
                rejected_answer=pair.rejected if pair else None,
                other_answers=json.dumps(list(pair.others), ensure_ascii=False)
                if pair and pair.others
                else None,
                sample_hash=self.benchmark.sample_hash(str(row["pair_id"])),
            )
            columns = (*TABLE_COLUMNS, *(PROFILE_COLUMNS if self.include_profiles else ()))
            out.append({name: row.get(name) for name in columns})
        return out

    def table(self) -> pl.DataFrame:
        columns = (*TABLE_COLUMNS, *(PROFILE_COLUMNS if self.include_profiles else ()))
        return pl.DataFrame(self.rows, schema={c: TABLE_SCHEMA[c] for c in columns}, strict=False)
