"""Inspect eval logs, built through inspect-ai's own classes (its maintainers call the file format unstable and
point to the Python API), so `inspect view`, Inspect's dataframe readers and EEE's Inspect converter read them.

One log per judge × context (Inspect's unit: one task, one model): one sample per judgment, whose input is the
question and the two answers in the order the judge saw them, whose output is the judge's reply, and whose
score is C (right), I (wrong or tie) or N (no verdict: the judgment failed or abstained; its status and cause
are in the score's metadata). The run's configuration is the eval spec; usage is summed per model.

inspect-ai is an optional dependency (`pip install 'prbj[inspect]'`) and slow to import: it is imported here,
inside the function, and only by `prbj export --format inspect`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from prbj import __version__
from prbj.analysis.headline import Headline, headline_of
from prbj.analysis.stats import ALL_SUBSETS, BOOTSTRAP_RESAMPLES, CONFIDENCE, GroupStats
from prbj.data.files import safe_name
from prbj.export.models import IN_PROCESS, OFFLINE, ROUTE_DEVELOPERS, UNKNOWN, JudgeModel
from prbj.export.table import ExportRun, shown_answers
from prbj.extras import INSPECT

SCORER = "prbj_verdict"
# LiteLLM provider family → Inspect's provider name (Inspect spells models `provider/model`).
_INSPECT_PROVIDERS = {
    "gemini": "google",
    "vertex_ai": "google",
    "anthropic": "anthropic",
    "openai": "openai",
    "mistral": "mistral",
    "groq": "groq",
    "together_ai": "together",
    "fireworks_ai": "fireworks",
    "openrouter": "openrouter",
    "ollama": "ollama",
    "hosted_vllm": "vllm",
    "xai": "grok",
    "deepseek": "deepseek",
}


def headline_metric(
    headline: Headline, row: GroupStats
) -> tuple[str, float, float | None, float | None] | None:
    """The run's headline as an Inspect metric (name, value, interval) where it is not plain accuracy, which
    follows as `accuracy`."""
    value = headline.value(row)
    if value is None or (headline.native and not headline.is_users(row)):
        return None
    name = "user_accuracy" if headline.is_users(row) else headline.short
    return (name, value, *headline.interval(row))


# Inspect providers that are their makers' own APIs, and hosts whose Inspect names spell the developer next.
_MAKERS_APIS = frozenset({"google", "anthropic", "openai", "mistral", "deepseek", "grok"})
_HOSTED_WITH_DEVELOPER = frozenset({"openrouter", "together", "vllm"})


@dataclass(frozen=True)
class InspectLog:
    file_name: str
    log: Any  # inspect_ai.log.EvalLog


def inspect_model_name(model: JudgeModel) -> str:
    """The judge as Inspect names models, in a form Every Eval Ever's Inspect converter reads a developer from
    (its first part must be a provider the converter knows): `google/gemini-3-flash-preview` for a maker's own
    API, `openai-api/Qwen/Qwen3-8B` for a developer's model on another platform, `hf/<developer>/<model>` for a
    model prbj ran in-process, and `hf/prbj/<judge>` for an offline baseline (prbj's own, run in-process: the
    converter has no name for "no model")."""
    if model.platform in (IN_PROCESS, OFFLINE):
        return f"hf/{model.model_id}"
    family = model.called.split("/", 1)[0]
    provider = _INSPECT_PROVIDERS.get(family)
    if provider in _MAKERS_APIS and model.developer == ROUTE_DEVELOPERS.get(family):
        return f"{provider}/{model.model_name}"
    if provider == "ollama" and model.developer == UNKNOWN:
        return f"ollama/{model.model_name}"
    hosted = provider if provider in _HOSTED_WITH_DEVELOPER else "openai-api"
    return f"{hosted}/{model.model_id}"


def _letters(row: dict[str, Any]) -> tuple[str, str | None]:
    """(target, answer): where the chosen answer was shown, and the letter the judge picked (of a best-of-k item,
    whose preferred answer is listed first, A when the judge picked it; which other it picked is not recorded)."""
    target = "B" if row.get("order") == "B" else "A"
    other = None if row.get("other_answers") else "A" if target == "B" else "B"
    verdict = row.get("verdict")
    answer = {"chosen": target, "rejected": other, "tie": "tie"}.get(str(verdict)) if verdict else None
    return target, answer


def _input_text(row: dict[str, Any], include_profiles: bool, missing: str) -> tuple[str, list[str] | None]:
    shown = shown_answers(row)
    if shown is None:
        return row.get("question") or f"pair {row['pair_id']} ({missing})", None
    alone = "" if row.get("order") else " (scored alone)"
    parts = []
    if include_profiles and row.get("context_block"):
        parts.append(str(row["context_block"]).strip())
    parts.append(f"Question:\n{row.get('question') or ''}")
    parts += [f"Answer {chr(ord('A') + n)}{alone}:\n{text}" for n, text in enumerate(shown)]
    return "\n\n".join(parts), shown


def _sample_ids(rows: list[dict[str, Any]]) -> list[str]:
    """Pair ids, made unique where a pair was judged several times (--samples K): `<pair>#<sample index>`."""
    counts = Counter(str(r["pair_id"]) for r in rows)
    return [
        str(r["pair_id"])
        if counts[str(r["pair_id"])] == 1
        else f"{r['pair_id']}#{r.get('sample_index') or 0}"
        for r in rows
    ]


def inspect_logs(export: ExportRun) -> list[InspectLog]:
    INSPECT.require("--format inspect")
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalPlan,
        EvalPlanStep,
        EvalResults,
        EvalSample,
        EvalScore,
        EvalSpec,
        EvalStats,
    )
    from inspect_ai.model import (
        ChatCompletionChoice,
        ChatMessageAssistant,
        ChatMessageUser,
        GenerateConfig,
        ModelOutput,
        ModelUsage,
    )
    from inspect_ai.scorer import CORRECT, INCORRECT, NOANSWER, Score
    from inspect_ai.viewer import ViewerConfig

    run = export.run
    bench = export.benchmark
    started = str(run.run.get("started") or "")
    finished = str(run.run.get("finished") or started)
    logs = []
    missing = (
        f"texts withheld: --personal-data {export.policy}"
        if export.texts_withheld
        else "its texts could not be read"
    )
    for judge, model in export.judges.items():
        name = inspect_model_name(model)
        short = name.split("/", 1)[1]
        params = model.params
        generate = GenerateConfig(
            temperature=params.get("temperature"),
            top_p=params.get("top_p"),
            max_tokens=params.get("max_tokens"),
            reasoning_effort=params.get("reasoning_effort"),
        )
        for context in sorted({r["context"] for r in export.rows if r["judge"] == judge}):
            rows = [r for r in export.rows if r["judge"] == judge and r["context"] == context]
            samples = []
            total = ModelUsage()
            for sample_id, row in zip(_sample_ids(rows), rows, strict=True):
                text, shown = _input_text(row, export.include_profiles, missing)
                target, answer = _letters(row)
                reply = row.get("reply") or ""
                tokens_in, tokens_out = row.get("prompt_tokens") or 0, row.get("completion_tokens") or 0
                usage = ModelUsage(
                    input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=tokens_in + tokens_out,
                    total_cost=row.get("cost_usd"),
                )  # fmt: skip
                total = total + usage
                ok = row["status"] == "ok"
                value = (CORRECT if row.get("correct") else INCORRECT) if ok else NOANSWER
                metadata = {
                    key: row.get(key)
                    for key in (
                        "pair_id",
                        "subset",
                        "context",
                        "order",
                        "status",
                        "cause",
                        "cost_usd",
                        "sample_hash",
                    )
                }
                if export.include_profiles and row.get("context_block"):
                    metadata["context_block"] = row["context_block"]
                samples.append(
                    EvalSample(
                        id=sample_id,
                        epoch=1,
                        input=text,
                        choices=shown,
                        target=target,
                        messages=[
                            ChatMessageUser(content=text),
                            ChatMessageAssistant(content=reply, model=short),
                        ],
                        output=ModelOutput(
                            model=short,
                            choices=[
                                ChatCompletionChoice(message=ChatMessageAssistant(content=reply, model=short))
                            ],
                            completion=reply,
                            usage=usage,
                            time=row.get("latency_s"),
                        ),
                        scores={
                            SCORER: Score(
                                value=value,
                                answer=answer,
                                explanation=None
                                if ok
                                else f"{row['status']}: {row.get('cause') or row.get('error') or ''}",
                                metadata={
                                    "verdict": row.get("verdict"),
                                    "p_chosen": row.get("p_chosen"),
                                    "status": row["status"],
                                    "tie": row.get("tie"),
                                },
                            )
                        },
                        metadata=metadata,
                        model_usage={name: usage},
                    )
                )
            overall = next(
                (
                    r
                    for r in run.results
                    if r.judge == judge and r.context == context and r.subset == ALL_SUBSETS
                ),
                None,
            )
            metrics = {}
            # The headline first: Inspect shows a score's first metric as the task's figure.
            headline = headline_of(run.summary)
            if overall is not None and (lead := headline_metric(headline, overall)) is not None:
                lead_name, lead_value, low, high = lead
                metrics[lead_name] = EvalMetric(
                    name=lead_name,
                    value=lead_value,
                    metadata={
                        "ci_low": low,
                        "ci_high": high,
                        "confidence": CONFIDENCE,
                        "headline": headline.name,
                    },
                )
            if overall is not None and overall.accuracy is not None:
                metrics["accuracy"] = EvalMetric(
                    name="accuracy",
                    value=overall.accuracy,
                    metadata={
                        "ci_low": overall.ci_low, "ci_high": overall.ci_high, "confidence": CONFIDENCE,
                        "bootstrap_resamples": BOOTSTRAP_RESAMPLES, "failed": overall.failed,
                    },
                )  # fmt: skip
            subsets = {
                r.subset: r.accuracy
                for r in run.results
                if r.judge == judge and r.context == context and r.subset != ALL_SUBSETS
            }
            scored = sum(1 for r in rows if r["status"] == "ok")
            spec = EvalSpec(
                eval_id=f"{run.run_id}-{judge}-{context}",
                run_id=run.run_id,
                created=started,
                task=f"prbj/{bench.slug}",
                task_display_name=f"{bench.name} · {judge} · context {context}",
                task_args={"context": context},
                dataset=EvalDataset(
                    name=bench.slug,
                    # A hub repo id for the official data; for anything else a name that is plainly no hub
                    # repo, so readers (EEE's converter) file it as a private source, not a Hugging Face one.
                    location=bench.hf_repo or f"prbj:{bench.slug}",
                    samples=len(samples),
                    sample_ids=[s.id for s in samples],
                ),
                model=name,
                model_generate_config=generate,
                config=EvalConfig(),
                packages={"prbj": __version__},
                metadata={
                    "prbj_run_id": run.run_id,
                    "benchmark": bench.name,
                    "benchmark_version": bench.version,
                    "benchmark_public": bench.public,
                    "judge": model.setup,
                    "run_config": {
                        k: v
                        for k, v in (run.run.get("config") or {}).items()
                        if k not in ("dataset", "official_repo")
                    },
                    "subset_accuracy": subsets,
                },
                viewer=ViewerConfig(trust_content=False),
            )
            log = EvalLog(
                version=2,
                status="success",
                eval=spec,
                plan=EvalPlan(
                    name="prbj",
                    steps=[
                        EvalPlanStep(
                            solver=f"prbj_{model.setup.get('mode') or model.kind}", params=model.setup
                        )
                    ],
                    config=generate,
                ),
                results=EvalResults(
                    total_samples=len(samples),
                    completed_samples=len(samples),
                    scores=[
                        EvalScore(
                            name=SCORER,
                            scorer=SCORER,
                            scored_samples=scored,
                            unscored_samples=len(samples) - scored,
                            metrics=metrics,
                        )
                    ],
                ),
                stats=EvalStats(started_at=started, completed_at=finished, model_usage={name: total}),
                samples=samples,
            )
            logs.append(InspectLog(f"{safe_name(f'{run.run_id}_{judge}_{context}')}.eval", log))
    return logs
