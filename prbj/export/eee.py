"""Every Eval Ever (schema 0.3.0): per judge, one aggregate JSON and its instance-level JSONL, filed as the EEE
datastore files them (`data/<benchmark>/<developer>/<model>/<uuid>.json` and `<uuid>_samples.jsonl`), so that
`every_eval_ever validate` accepts them where they are written.

The encoding, and why (docs/export.md says the same to readers):
- The judge is the model under evaluation, so it is `model_info`, not `metric_config.llm_scoring`: EEE's
  llm_scoring names an LLM that grades another model's output, and here nothing grades the judge but the
  benchmark's own label (which answer was written for the user).
- One result per context × subset: accuracy as a proportion with its 95% percentile-bootstrap interval, the
  count it was computed over (successful judgments: failures are not in it, they are counted in `details`),
  and the user accuracy where the run has user-level figures.
- EEE has no pairwise interaction: a judgment is a `single_turn` whose `input.raw` is the question, whose
  `input.choices` are the two answers in the order the judge was shown them, and whose `input.reference` is the
  answer written for the user; the judge's reply is `output.raw`, its verdict the extracted value. Each line
  points to its context's overall result (one line per judgment; its subset is in `metadata`).
- `sample_hash` hashes ids (benchmark, pair id), never a text; no profile text travels unless asked for.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from dataclasses import dataclass
from typing import Any

from prbj import __version__
from prbj.analysis.headline import AUTHORS_RESAMPLES, Headline, headline_of
from prbj.analysis.small_samples import SMALL_SAMPLE
from prbj.analysis.stats import ALL_SUBSETS, BOOTSTRAP_RESAMPLES, CONFIDENCE, GroupStats, uses_bootstrap
from prbj.data.files import safe_name
from prbj.export.models import JudgeModel
from prbj.export.table import ExportRun, shown_answers

SCHEMA_VERSION = "0.3.0"
ACCURACY = "accuracy"
USER_ACCURACY = "prbj.user_accuracy"
# A headline that is neither accuracy nor user accuracy (a card's unit of judgments, its authors' own rules).
HEADLINE = "prbj.headline"
ACCURACY_DESCRIPTION = (
    "Share of pairs on which the judge preferred the answer written for this user over an equally good "
    "answer written for someone else; ties count as not correct; failed judgments are left out and counted "
    "apart (details.failed)."
)
USER_DESCRIPTION = "Mean over users of each user's accuracy (users with several pairs weigh as one)."


@dataclass(frozen=True)
class EeeFiles:
    aggregate_path: str  # relative to the output folder: data/<benchmark>/<developer>/<model>/<uuid>.json
    aggregate: dict[str, Any]
    samples_path: str
    samples_text: str  # the JSONL, one line per judgment


def _strings(values: dict[str, Any]) -> dict[str, str]:
    """EEE's additional_details hold strings only."""
    return {
        key: value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        for key, value in values.items()
        if value is not None
    }


def file_uuid(run_id: str, judge: str) -> str:
    """A version-4-shaped UUID drawn from the run and judge: exporting a run again rewrites the same files."""
    return str(uuid.UUID(bytes=hashlib.sha256(f"{run_id}\x00{judge}".encode()).digest()[:16], version=4))


def _interval(low: float | None, high: float | None, method: str) -> dict[str, Any] | None:
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return None
    return {"lower": low, "upper": high, "confidence_level": CONFIDENCE, "method": method}


def _subset_label(subset: str) -> str:
    return "all subsets" if subset == ALL_SUBSETS else subset


def result_name(export: ExportRun, context: str, subset: str) -> str:
    return f"{export.benchmark.name} · {_subset_label(subset)} · context {context}"


def _source_data(export: ExportRun) -> dict[str, Any]:
    bench = export.benchmark
    details = _strings(
        {"public": str(bench.public).lower(), "version": bench.version, "origin": bench.origin}
    )
    if bench.hf_repo:
        return {
            "dataset_name": bench.slug,
            "source_type": "hf_dataset",
            "hf_repo": bench.hf_repo,
            "hf_split": "test",
            **({"samples_number": bench.n_pairs} if bench.n_pairs is not None else {}),
            "additional_details": details,
        }
    # EEE's `source_data_private` shape: neither a URL nor a hub dataset. `public` says whether it is.
    return {"dataset_name": bench.slug, "source_type": "other", "additional_details": details}


def _generation_config(model: JudgeModel) -> dict[str, Any]:
    params = model.params
    args: dict[str, Any] = {}
    for name in ("temperature", "top_p", "top_k"):
        if isinstance(params.get(name), int | float) and not isinstance(params.get(name), bool):
            args[name] = params[name]
    tokens = params.get("max_tokens")
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 1:
        args["max_tokens"] = tokens
    if "reasoning_effort" in params:
        args["reasoning"] = str(params["reasoning_effort"]).lower() not in ("none", "")
    details = _strings({k: v for k, v in params.items() if k not in args and k != "reasoning_effort"})
    details.update(_strings({f"prbj.{k}": v for k, v in model.setup.items() if k not in ("name", "context")}))
    if "reasoning_effort" in params:
        details["reasoning_effort"] = str(params["reasoning_effort"])
    return {"generation_args": args, **({"additional_details": details} if details else {})}


def _metric_config(
    metric_id: str, name: str, description: str, context: str, subset: str, *, headline: bool = False
) -> dict[str, Any]:
    details = {
        "prbj.context": context,
        "prbj.subset": subset,
        **({"prbj.headline": "true"} if headline else {}),
    }
    return {
        "evaluation_description": description,
        "metric_id": metric_id,
        "metric_name": name,
        "metric_kind": "accuracy",
        "metric_unit": "proportion",
        "lower_is_better": False,
        "score_type": "continuous",
        "min_score": 0.0,
        "max_score": 1.0,
        "additional_details": details,
    }


def _counts(row: GroupStats) -> dict[str, str]:
    return _strings({
        "n": row.n, "n_ok": row.n_ok, "correct": row.correct, "ties": row.ties, "failed": row.failed,
        "parse_errors": row.parse_errors, "api_errors": row.api_errors,
        "length_controlled_accuracy": row.length_controlled_accuracy, "position_bias": row.position_bias,
    })  # fmt: skip


def _results(export: ExportRun, model: JudgeModel) -> list[dict[str, Any]]:
    """Per context × subset: the headline first (EEE has no primary flag: the first result is the one readers
    show; it also says `prbj.headline` in its metric details), then accuracy and user accuracy."""
    common = {
        "source_data": _source_data(export),
        "evaluation_timestamp": str(export.run.run.get("started") or ""),
        "generation_config": _generation_config(model),
    }
    headline = headline_of(export.run.summary)
    users_resampled = any(r.user_accuracy is not None for r in export.run.results)
    method = (
        "Korn-Graubard over users"
        if users_resampled
        else f"Clopper-Pearson under {SMALL_SAMPLE} pairs, else percentile bootstrap over pairs"
    )
    out: list[dict[str, Any]] = []
    for row in export.run.results:
        if row.judge != model.judge or row.accuracy is None or not math.isfinite(row.accuracy):
            continue
        name = result_name(export, row.context, row.subset)
        users_lead = headline.is_users(row)
        uncertainty: dict[str, Any] = {"num_samples": row.n_ok}
        if not users_resampled and _bootstrapped(row):
            uncertainty["num_bootstrap_samples"] = BOOTSTRAP_RESAMPLES
        interval = _interval(row.ci_low, row.ci_high, method)
        if interval:
            uncertainty["confidence_interval"] = interval
        lead = headline.native and not users_lead
        results = [{
            "evaluation_result_id": f"{ACCURACY}:{row.context}:{row.subset}",
            "evaluation_name": name,
            **common,
            "metric_config": _metric_config(
                ACCURACY, "Accuracy", ACCURACY_DESCRIPTION, row.context, row.subset, headline=lead
            ),
            "score_details": {"score": row.accuracy, "details": _counts(row), "uncertainty": uncertainty},
        }]  # fmt: skip
        user_accuracy = row.user_accuracy
        if user_accuracy is not None and math.isfinite(user_accuracy):
            users: dict[str, Any] = {}
            if isinstance(row.n_users_decided, int):
                users["num_samples"] = row.n_users_decided
            user_interval = _interval(
                row.user_ci_low, row.user_ci_high,
                "Korn-Graubard over users",
            )  # fmt: skip
            if user_interval:
                users["confidence_interval"] = user_interval
            user_result = {
                "evaluation_result_id": f"{USER_ACCURACY}:{row.context}:{row.subset}",
                "evaluation_name": name,
                **common,
                "metric_config": _metric_config(
                    USER_ACCURACY, "User accuracy", USER_DESCRIPTION, row.context, row.subset, headline=users_lead
                ),
                "score_details": {"score": user_accuracy, "uncertainty": users},
            }  # fmt: skip
            results.insert(0 if users_lead else 1, user_result)
        own = _headline_result(headline, row, name, common)
        out.extend([*([own] if own is not None else []), *results])
    return out


def _bootstrapped(row: GroupStats) -> bool:
    """Whether the interval of accuracy over independent pairs was the percentile bootstrap's (not Clopper–Pearson's:
    prbj.analysis.stats.accuracy_interval), so that EEE's resample count is claimed only where resamples were
    drawn."""
    return uses_bootstrap(row.n_ok or 0, row.correct or 0)


def _headline_result(
    headline: Headline, row: GroupStats, name: str, common: dict[str, Any]
) -> dict[str, Any] | None:
    """The headline as a result of its own, where it is neither accuracy nor user accuracy."""
    value = headline.value(row)
    if headline.native or value is None or not math.isfinite(value):
        return None
    source = headline.rules.source if headline.protocol == "official" else None
    description = headline.name + (f"; the authors' protocol, read in {source}" if source else "")
    # prbj's interval over users draws no resample (prbj.analysis.clusters.accuracy_intervals).
    uncertainty: dict[str, Any] = (
        {} if headline.rules.interval == "cluster-users" else {"num_bootstrap_samples": AUTHORS_RESAMPLES}
    )
    method = {
        "cluster-users": "Korn-Graubard over users",
        "basic-bootstrap": f"basic bootstrap over {headline.unit} (scipy.stats.bootstrap)",
        "percentile-bootstrap": f"percentile bootstrap over {headline.unit} (scipy.stats.bootstrap)",
    }[headline.rules.interval]
    interval = _interval(*headline.interval(row), method)
    if interval:
        uncertainty["confidence_interval"] = interval
    title = (
        "Official (the authors' protocol)"
        if headline.protocol == "official"
        else f"Accuracy over {headline.unit}"
    )
    return {
        "evaluation_result_id": f"{HEADLINE}:{row.context}:{row.subset}",
        "evaluation_name": name,
        **common,
        "metric_config": _metric_config(HEADLINE, title, description, row.context, row.subset, headline=True),
        "score_details": {"score": value, "uncertainty": uncertainty},
    }


def _shown(row: dict[str, Any]) -> list[str] | None:
    """The two answers in the order the judge saw them (chosen first for judges that score each alone); every
    candidate of a best-of-k item, the preferred one first."""
    return shown_answers(row)


def _instance(
    export: ExportRun, model: JudgeModel, evaluation_id: str, row: dict[str, Any]
) -> dict[str, Any]:
    ok = row["status"] == "ok"
    reply = row.get("reply")
    if reply is None and row.get("score_chosen") is not None and row.get("score_rejected") is not None:
        other = "the best other" if row.get("other_answers") else "the rejected one"
        reply = (
            f"score of the chosen answer {row['score_chosen']:.6g}; of {other} {row['score_rejected']:.6g}"
        )
    extraction = "prbj verdict parser" if row.get("order") else "score comparison"
    tokens_in, tokens_out = row.get("prompt_tokens"), row.get("completion_tokens")
    metadata = {
        "pair_id": row["pair_id"], "subset": row["subset"], "context": row["context"], "order": row.get("order"),
        "status": row["status"], "cause": row.get("cause"), "verdict": row.get("verdict"), "tie": row.get("tie"),
        "p_chosen": row.get("p_chosen"), "cost_usd": row.get("cost_usd"), "cached": row.get("cached"),
        "sample_index": row.get("sample_index"), "judge": row["judge"],
    }  # fmt: skip
    if export.include_profiles and row.get("context_block"):
        metadata["context_block"] = row["context_block"]
    line: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "model_id": model.model_id,
        "evaluation_name": result_name(export, row["context"], ALL_SUBSETS),
        "evaluation_result_id": f"{ACCURACY}:{row['context']}:{ALL_SUBSETS}",
        "sample_id": row["pair_id"],
        "sample_hash": row["sample_hash"],
        "interaction_type": "single_turn",
        "input": {
            "raw": row.get("question") or "",
            "reference": [row["chosen_answer"]] if row.get("chosen_answer") is not None else [],
            "choices": _shown(row),
        },
        "output": {"raw": [reply] if reply else []},
        "answer_attribution": (
            [
                {
                    "turn_idx": 0,
                    "source": "output.raw",
                    "extracted_value": str(row.get("verdict") or ""),
                    "extraction_method": extraction,
                    "is_terminal": True,
                }
            ]
            if ok
            else []
        ),
        "evaluation": {"score": 1.0 if row.get("correct") else 0.0, "is_correct": bool(row.get("correct"))},
        "error": None if ok else f"{row['status']}: {row.get('cause') or row.get('error') or 'no detail'}",
        "metadata": _strings(metadata),
    }
    if isinstance(tokens_in, int) and isinstance(tokens_out, int) and tokens_in >= 0 and tokens_out >= 0:
        line["token_usage"] = {
            "input_tokens": tokens_in, "output_tokens": tokens_out, "total_tokens": tokens_in + tokens_out,
        }  # fmt: skip
    if isinstance(row.get("latency_s"), float) and row["latency_s"] >= 0:
        line["performance"] = {"latency_ms": row["latency_s"] * 1000.0}
    return line


def eee_files(
    export: ExportRun, *, retrieved: str, organization: str = "unknown", relationship: str = "third_party"
) -> list[EeeFiles]:
    """One EeeFiles per judge of the run. `retrieved`: when the record was made, Unix seconds as text."""
    out = []
    for judge, model in export.judges.items():
        evaluation_id = f"{export.benchmark.slug}/{model.model_id.replace('/', '_')}/{export.run.run_id}"
        # Filed as Every Eval Ever files a record: under its id's prefix, then the rest of the id (each a safe name:
        # the id comes from the run's files).
        developer_folder, model_folder = model.model_id.split("/", 1)
        model_part = safe_name(model_folder.replace("/", "_"))
        folder = f"data/{export.benchmark.slug}/{safe_name(developer_folder)}/{model_part}"
        name = file_uuid(export.run.run_id, judge)
        lines = [_instance(export, model, evaluation_id, row) for row in export.rows if row["judge"] == judge]
        text = "".join(json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n" for line in lines)
        samples_path = f"{folder}/{name}_samples.jsonl"
        run = export.run.run
        aggregate = {
            "schema_version": SCHEMA_VERSION,
            "evaluation_id": evaluation_id,
            "evaluation_timestamp": str(run.get("started") or ""),
            "retrieved_timestamp": retrieved,
            "source_metadata": {
                "source_name": "prbj",
                "source_type": "evaluation_run",
                "source_organization_name": organization,
                "evaluator_relationship": relationship,
                "additional_details": _strings({"prbj.run_id": export.run.run_id}),
            },
            "eval_library": {
                "name": "prbj",
                "version": __version__,
                "additional_details": _strings(
                    {
                        "protocol": (run.get("config") or {}).get("protocol"),
                        "seed": export.run.summary.get("seed"),
                        "prbj_version_of_run": (run.get("versions") or {}).get("prbj"),
                    }
                ),
            },
            "model_info": {
                "name": judge,
                "id": model.model_id,
                "developer": model.developer,
                "inference_platform": model.platform,
                "additional_details": _strings(
                    {
                        "deployment_type": model.deployment,
                        "model_availability": model.availability,
                        "prbj.judge_kind": model.kind,
                        "prbj.provider": model.provider,
                        "prbj.model": model.called,
                    }
                ),
            },
            "evaluation_results": _results(export, model),
            "detailed_evaluation_results": {
                "format": "jsonl",
                "file_path": samples_path,
                "hash_algorithm": "sha256",
                "checksum": hashlib.sha256(text.encode("utf-8")).hexdigest(),
                "total_rows": len(lines),
            },
        }
        out.append(EeeFiles(f"{folder}/{name}.json", aggregate, samples_path, text))
    return out
