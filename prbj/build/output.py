"""The build directory: pairs in the benchmark's schema, provenance per pair, rejects with reasons, unfinished
records, build_summary.json, report.md and run.json. Every file is written whole and then renamed into place, so
an interrupted build never leaves a half file that `prbj judge` would trust."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from prbj import __version__
from prbj.build.pipeline import Builder, Outcome, word_counts
from prbj.data.files import write_json, write_jsonl, write_text
from prbj.data.lamp import LampSet

PAIRS_FILE = "pairs.jsonl"
PROVENANCE_FILE = "provenance.jsonl"
REJECTS_FILE = "rejects.jsonl"
INCOMPLETE_FILE = "incomplete.jsonl"
SUMMARY_FILE = "build_summary.json"
REPORT_FILE = "report.md"
RUN_FILE = "run.json"


@dataclass(frozen=True)
class BuildConfig:
    input: str
    subsets: Sequence[str]
    split: str
    limit: int | None
    plan: str
    profile_k: int
    max_words: int
    min_quality: float
    min_gap: float
    balance_length: bool
    concurrency: int

    def as_dict(self) -> dict[str, Any]:
        document = asdict(self)
        document["subsets"] = list(self.subsets)
        return document


def pair_record(outcome: Outcome) -> dict[str, Any]:
    """A kept pair in the official Personalized RewardBench schema."""
    record = outcome.record
    return {
        "id": record.id,
        "category": record.category,
        "question": record.question,
        "profile": [{"id": p.id, "category": p.category, "text": p.text} for p in record.profile],
        "narrative": record.narrative,
        "rubric_aspects": [
            {"aspect": a.aspect, "evidence": a.evidence, "reason": a.reason} for a in record.rubric_aspects
        ],
        "chosen": outcome.chosen,
        "rejected": outcome.rejected,
    }


def provenance_record(outcome: Outcome, builder: Builder) -> dict[str, Any]:
    """How a pair was made: the plan, models and template hashes per step, the check scores and the calls."""
    return {
        "id": outcome.record.id,
        "subset": outcome.record.category,
        "status": outcome.status,
        "plan": {"source": builder.settings.plan, "aspects": outcome.aspects},
        "models": builder.models(),
        "template_hashes": builder.template_hashes(),
        "checks": {role: scores.as_dict() for role, scores in outcome.checks.items()},
        "adherence_gap": outcome.adherence_gap,
        "words": word_counts(outcome),
        "calls": [asdict(call) for call in outcome.calls],
        "cost_usd": round(outcome.cost_usd, 8),
    }


def reject_record(outcome: Outcome, builder: Builder) -> dict[str, Any]:
    return {
        "id": outcome.record.id,
        "subset": outcome.record.category,
        "reason": outcome.reason,
        "reasons": outcome.reasons,
        "question": outcome.record.question,
        "chosen": outcome.chosen,
        "rejected": outcome.rejected,
        "unreadable_check_replies": outcome.check_replies or None,
        **{k: v for k, v in provenance_record(outcome, builder).items() if k not in ("id", "subset")},
    }


def incomplete_record(outcome: Outcome) -> dict[str, Any]:
    last = outcome.calls[-1] if outcome.calls else None
    unfinished = [c for c in outcome.calls if c.status == outcome.reason]
    step = unfinished[0] if unfinished else last
    return {
        "id": outcome.record.id,
        "subset": outcome.record.category,
        "reason": outcome.reason,
        "step": step.step if step else None,
        "error": step.error if step else None,
    }


def summary_document(
    lamp: LampSet, config: BuildConfig, builder: Builder, numbers: dict[str, Any]
) -> dict[str, Any]:
    return {
        "prbj_version": __version__,
        "input": {
            "source": lamp.source,
            "fingerprint": lamp.fingerprint(),
            "n_records": len(lamp.records),
            "subsets": lamp.subsets,
        },
        "settings": {
            "plan": config.plan,
            "max_words": config.max_words,
            "min_quality": config.min_quality,
            "min_gap": config.min_gap,
            "profile_k": config.profile_k,
        },
        "models": builder.models(),
        "template_hashes": builder.template_hashes(),
        **numbers,
    }


def write_build(
    out_dir: Path,
    outcomes: Sequence[Outcome],
    builder: Builder,
    summary: dict[str, Any],
    report: str,
    run: dict[str, Any],
) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = [o for o in outcomes if o.status == "kept"]
    write_jsonl(out_dir / PAIRS_FILE, (pair_record(o) for o in kept))
    write_jsonl(out_dir / PROVENANCE_FILE, (provenance_record(o, builder) for o in kept))
    write_jsonl(
        out_dir / REJECTS_FILE, (reject_record(o, builder) for o in outcomes if o.status == "dropped")
    )
    write_jsonl(
        out_dir / INCOMPLETE_FILE, (incomplete_record(o) for o in outcomes if o.status == "incomplete")
    )
    write_json(out_dir / SUMMARY_FILE, summary)
    write_text(out_dir / REPORT_FILE, report)
    write_json(out_dir / RUN_FILE, run)


def run_document(
    out_dir: Path,
    lamp: LampSet,
    config: BuildConfig,
    builder: Builder,
    *,
    started: datetime,
    finished: datetime,
    usage: list[dict[str, Any]],
    mode: str,
    max_cost: float | None,
    versions: dict[str, str],
) -> dict[str, Any]:
    return {
        "run_id": out_dir.name,
        "command": "build",
        "started": started.isoformat(timespec="seconds"),
        "finished": finished.isoformat(timespec="seconds"),
        "config": config.as_dict(),
        "models": builder.models(),
        "templates": builder.template_files(),
        "template_hashes": builder.template_hashes(),
        "input": {
            "source": lamp.source,
            "fingerprint": lamp.fingerprint(),
            "n_records": len(lamp.records),
            "subsets": lamp.subsets,
        },
        "versions": versions,
        "mode": mode,
        "max_cost": max_cost,
        "usage": usage,
    }
