"""An Every Eval Ever aggregate file read back as a run, so that `prbj report`, `show` and `view` can rank a
judge published by someone else beside your own runs. The file comes from elsewhere: it is validated field by
field, and anything wrong is a one-line error naming the file and the field.

What is read: `model_info` (the judge), and the results that are accuracies (`metric_id` or `metric_kind`
`accuracy`, as a proportion, or a percentage when `metric_unit` says so or `max_score` is 100); their context
and subset from prbj's own `additional_details` when the file is a prbj export, else the context is `unstated`
and the subset is `all` for a lone result or the result's name. The interval and count come from
`uncertainty`. The judgments, when the aggregate's instance-level file lies beside it, come from that file."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl

from prbj.analysis.run_data import RunData
from prbj.analysis.stats import ALL_SUBSETS, GroupStats
from prbj.data.files import refuse_lone_surrogates
from prbj.data.schema import Pair
from prbj.errors import DataError

UNSTATED = "unstated"
EEE_PREFIX = "eee:"
_ACCURACY_IDS = ("accuracy", "acc")
# prbj's own results beside accuracy (user accuracy, a card's headline): read as accuracy they would repeat a row.
_PRBJ_OTHER = ("prbj.user_accuracy", "prbj.headline")


def looks_like_eee(path: Path) -> bool:
    """A .json file whose object has EEE's two defining fields (a cheap look: the first 4 KB)."""
    if not (path.is_file() and path.suffix == ".json"):
        return False
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return b'"schema_version"' in head and b'"evaluation_id"' in head


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _field(path: Path, where: str, message: str) -> DataError:
    return DataError(f"{path}: field '{where}': {message}")


def _object(path: Path, value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _field(path, where, "expected an object")
    return value


def _text(path: Path, value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _field(path, where, "expected a non-empty string")
    return value


def _number(path: Path, value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _field(path, where, "expected a finite number")
    return float(value)


def _is_accuracy(metric: dict[str, Any]) -> bool:
    ids = {str(metric.get(key) or "").lower() for key in ("metric_id", "metric_kind", "metric_name")}
    return str(metric.get("metric_id") or "") not in _PRBJ_OTHER and bool(ids & set(_ACCURACY_IDS))


def _row(path: Path, judge: str, index: int, result: Any, lone: bool) -> GroupStats | None:
    where = f"evaluation_results[{index}]"
    result = _object(path, result, where)
    metric = _object(path, result.get("metric_config", {}), f"{where}.metric_config")
    if not _is_accuracy(metric):
        return None
    details = _dict(metric.get("additional_details"))
    name = _text(path, result.get("evaluation_name"), f"{where}.evaluation_name")
    context = str(details.get("prbj.context") or UNSTATED)
    subset = str(details.get("prbj.subset") or (ALL_SUBSETS if lone else name))
    scored = _object(path, result.get("score_details"), f"{where}.score_details")
    score = _number(path, scored.get("score"), f"{where}.score_details.score")
    scale = 100.0 if metric.get("metric_unit") == "percent" or metric.get("max_score") == 100 else 1.0
    if not 0.0 <= score <= scale:
        raise _field(
            path, f"{where}.score_details.score", f"{score:g} is not an accuracy between 0 and {scale:g}"
        )
    uncertainty = _dict(scored.get("uncertainty"))
    interval = _dict(uncertainty.get("confidence_interval"))
    low = (
        _number(path, interval["lower"], f"{where}...confidence_interval.lower") / scale
        if "lower" in interval
        else None
    )
    high = (
        _number(path, interval["upper"], f"{where}...confidence_interval.upper") / scale
        if "upper" in interval
        else None
    )
    counts = _dict(scored.get("details"))

    def count(key: str, default: int = 0) -> int:
        try:
            return max(0, int(counts.get(key, default)))
        except (TypeError, ValueError):
            raise _field(path, f"{where}.score_details.details.{key}", "expected a whole number") from None

    n_samples = uncertainty.get("num_samples")
    n_ok = (
        n_samples if isinstance(n_samples, int) and not isinstance(n_samples, bool) and n_samples >= 0 else 0
    )
    accuracy = score / scale
    failed = count("failed")
    return GroupStats(
        judge=judge, context=context, subset=subset, n=count("n", n_ok + failed), n_ok=n_ok,
        correct=round(accuracy * n_ok), ties=count("ties"), parse_errors=count("parse_errors"),
        api_errors=count("api_errors", failed - count("parse_errors")), skipped_budget=0, skipped_cache=0,
        accuracy=accuracy, ci_low=low, ci_high=high, tie_rate=None, picked_longer=None,
        length_controlled_accuracy=None,
    )  # fmt: skip


def _samples_path(path: Path) -> Path:
    return path.with_name(f"{path.stem}_samples.jsonl")


def _instance_lines(path: Path) -> list[dict[str, Any]]:
    samples = _samples_path(path)
    if not samples.is_file():
        return []
    lines = []
    for number, text in enumerate(samples.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except json.JSONDecodeError as err:
            raise DataError(f"{samples}:{number}: invalid JSON: {err.msg}") from None
        if not isinstance(line, dict) or not isinstance(line.get("sample_id"), str):
            raise DataError(f"{samples}:{number}: field 'sample_id': expected a string")
        lines.append(line)
    return lines


def _judgments(path: Path, judge: str, lines: list[dict[str, Any]], subsets: set[str]) -> pl.DataFrame:
    rows = []
    for line in lines:
        meta = _dict(line.get("metadata"))
        evaluation = _dict(line.get("evaluation"))
        output = _dict(line.get("output"))
        raw = _list(output.get("raw"))
        status = str(meta.get("status") or ("ok" if not line.get("error") else "api_error"))
        correct = evaluation.get("is_correct") is True
        rows.append({
            "pair_id": line["sample_id"],
            "subset": str(meta.get("subset") or (next(iter(subsets)) if len(subsets) == 1 else ALL_SUBSETS)),
            "judge": judge, "context": str(meta.get("context") or UNSTATED), "status": status,
            "verdict": meta.get("verdict") or (("chosen" if correct else "rejected") if status == "ok" else None),
            "correct": correct and status == "ok", "tie": meta.get("tie") == "true",
            "chosen_position": meta.get("order") or None,
            "reply": raw[0] if raw and isinstance(raw[0], str) else None,
            "error": line.get("error") if isinstance(line.get("error"), str) else None,
        })  # fmt: skip
    schema = {
        "pair_id": pl.String, "subset": pl.String, "judge": pl.String, "context": pl.String, "status": pl.String,
        "verdict": pl.String, "correct": pl.Boolean, "tie": pl.Boolean, "chosen_position": pl.String,
        "reply": pl.String, "error": pl.String,
    }  # fmt: skip
    return pl.DataFrame(rows, schema=schema)


def read_eee_run(path: Path) -> RunData:
    try:
        text = path.read_text(encoding="utf-8")
        document = json.loads(text)
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot read: {err}") from None
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: invalid JSON: {err.msg} at line {err.lineno}") from None
    refuse_lone_surrogates(path, text, document)
    document = _object(path, document, "(file)")
    _text(path, document.get("schema_version"), "schema_version")
    evaluation_id = _text(path, document.get("evaluation_id"), "evaluation_id")
    model = _object(path, document.get("model_info"), "model_info")
    judge = str(model.get("name") or _text(path, model.get("id"), "model_info.id"))
    results = document.get("evaluation_results")
    if not isinstance(results, list) or not results:
        raise _field(path, "evaluation_results", "expected a non-empty list")
    accuracy_count = sum(
        1 for r in results if isinstance(r, dict) and isinstance(r.get("metric_config"), dict)
        and _is_accuracy(r["metric_config"])
    )  # fmt: skip
    rows = [row for i, r in enumerate(results) if (row := _row(path, judge, i, r, accuracy_count == 1))]
    if not rows:
        raise _field(
            path, "evaluation_results", "no accuracy among them (metric_id or metric_kind 'accuracy')"
        )
    first = results[0] if isinstance(results[0], dict) else {}
    source = _dict(first.get("source_data"))
    extra = _dict(source.get("additional_details"))
    subsets = {r.subset for r in rows if r.subset != ALL_SUBSETS}
    dataset = {
        "source": f"{EEE_PREFIX}{path}",
        "fingerprint": str(extra.get("version") or source.get("dataset_name") or "eee"),
        "n_pairs": source.get("samples_number") if isinstance(source.get("samples_number"), int) else None,
        "subsets": sorted(subsets),
    }
    run = {
        "run_id": evaluation_id,
        "command": "eee",
        "started": str(document.get("evaluation_timestamp") or ""),
        "judges": [
            {"name": judge, "context": r.context, "kind": "published", "model": model.get("id")} for r in rows
        ],
        "dataset": dataset,
    }
    lines = _instance_lines(path)
    summary = {"dataset": dataset, "results": [r.as_dict() for r in rows]}
    return RunData(path, evaluation_id, run, summary, rows, _judgments(path, judge, lines, subsets), None)


def eee_pairs(source: str) -> dict[str, Pair]:
    """The pairs an exported EEE instance file holds (question, the answer written for the user, the other; every
    other of a best-of-k item), for `prbj show` and `view`; empty when there is no instance file or it holds no
    texts."""
    path = Path(source.removeprefix(EEE_PREFIX))
    pairs = {}
    for line in _instance_lines(path):
        given = _dict(line.get("input"))
        reference = _list(given.get("reference"))
        choices = _list(given.get("choices"))
        if len(reference) != 1 or len(choices) < 2 or reference[0] not in choices:
            continue
        others = list(choices)
        others.remove(reference[0])
        meta = _dict(line.get("metadata"))
        pairs[line["sample_id"]] = Pair(
            line["sample_id"], str(meta.get("subset") or ""), str(given.get("raw") or ""), (), "", (),
            str(reference[0]), str(others[0]), str(meta.get("user_id") or line["sample_id"]),
            others=tuple(str(other) for other in others[1:]),
        )  # fmt: skip
    return pairs
