"""Turn `--provider` values into judges.

- offline baselines by name (`random`, `length`, `bm25-profile`, `embed-profile`);
- LLM judges: a provider profile name (`gemini-3-flash`, see `prbj providers`), `litellm:<model-id>` or
  `hf-local:<path-or-id>`;
  one judge per `--context` setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from prbj.data.schema import Context
from prbj.errors import ConfigError
from prbj.judges.base import Judge
from prbj.judges.baselines import BASELINES, DEFAULT_JUDGES, make_baseline
from prbj.judges.scalar import HF_PREFIX, ScalarOptions, make_scalar_judge
from prbj.llm.cache import ResponseCache
from prbj.prompts import Template

# LLM judges see the ranked profile unless told otherwise: the benchmark is about fitting one user, and a
# judge without any user context cannot know who that is. `--context none` reproduces the official script.
DEFAULT_LLM_CONTEXT: Context = "profile"


@dataclass
class JudgeSettings:
    """Everything a judge factory may need besides its spec. Families of judges add their own fields."""

    seed: int = 42
    cache: ResponseCache | None = None
    gateway: object | None = None  # prbj.llm.gateway.Gateway; typed loosely to keep this module import-light
    planner: object | None = None  # prbj.context.planner.Planner
    contexts: tuple[Context, ...] = ()
    mode: Literal["pairwise", "pointwise"] = "pairwise"
    order: Literal["random", "both"] = "random"
    repair: bool = False
    profile_k: int = 10
    system_template: Template | None = None
    user_template: Template | None = None
    providers_dir: Path | None = None
    api_base: str | None = None
    require_keys: bool = True
    extra: dict[str, object] = field(default_factory=dict)
    scalar: ScalarOptions = field(default_factory=ScalarOptions)


def known_judges() -> list[str]:
    return list(BASELINES)


def resolve_judges(specs: Sequence[str], settings: JudgeSettings | None = None) -> list[Judge]:
    """Judges for the given specs, in order, without duplicates; the offline baselines when none are given."""
    settings = settings or JudgeSettings()
    judges: list[Judge] = []
    seen: set[str] = set()
    for spec in specs or DEFAULT_JUDGES:
        if spec in seen:
            continue
        seen.add(spec)
        judges.extend(resolve_judge(spec, settings))
    return judges


def resolve_judge(spec: str, settings: JudgeSettings) -> list[Judge]:
    if spec in BASELINES:
        return [make_baseline(spec, seed=settings.seed)]
    if spec.startswith(HF_PREFIX):
        # Scalar RMs follow the official protocol by default: the user turn holds the question only.
        contexts = settings.contexts or ("none",)
        from prbj.llm.gateway import Gateway

        if not isinstance(settings.gateway, Gateway):
            raise ConfigError("internal: scalar judges need a gateway in JudgeSettings")
        return [
            make_scalar_judge(
                spec.removeprefix(HF_PREFIX),
                context=context,
                options=settings.scalar,
                gateway=settings.gateway,
                seed=settings.seed,
            )
            for context in contexts
        ]
    from prbj.llm.providers import is_provider_name

    if is_provider_name(spec, settings.providers_dir):
        return _llm_judges(spec, settings)
    raise ConfigError(
        f"--provider {spec!r}: unknown judge; offline judges are {', '.join(BASELINES)}; LLM judges are the "
        f"profiles listed by `prbj providers`, litellm:<model-id> or hf-local:<path-or-id>; scalar RMs are "
        f"hf:<path-or-hub-id>"
    )


def _llm_judges(spec: str, settings: JudgeSettings) -> list[Judge]:
    from prbj.context.planner import Planner
    from prbj.judges.generative import (
        ContextBuilder,
        PairwiseLLMJudge,
        PointwiseLLMJudge,
        check_template_shows_context,
    )
    from prbj.llm.gateway import Gateway
    from prbj.local.provider import resolve_provider

    gateway = settings.gateway
    if not isinstance(gateway, Gateway):
        raise ConfigError("internal: LLM judges need a gateway in JudgeSettings")
    provider = resolve_provider(
        spec,
        providers_dir=settings.providers_dir,
        api_base=settings.api_base,
        gateway=gateway,
        require_key=settings.require_keys,
    )
    planner = settings.planner if isinstance(settings.planner, Planner) else None
    judges: list[Judge] = []
    for context in settings.contexts or (DEFAULT_LLM_CONTEXT,):
        builder = ContextBuilder(context, profile_k=settings.profile_k, planner=planner)
        if settings.user_template is not None:
            check_template_shows_context(
                settings.user_template, context, "--judge-template-user", system=settings.system_template
            )
        if settings.mode == "pointwise":
            judges.append(
                PointwiseLLMJudge(
                    provider,
                    gateway,
                    context=context,
                    contexts=builder,
                    system=settings.system_template,
                    user=settings.user_template,
                    repair=settings.repair,
                )
            )
        else:
            judges.append(
                PairwiseLLMJudge(
                    provider,
                    gateway,
                    context=context,
                    contexts=builder,
                    order=settings.order,
                    order_seed=settings.seed,
                    system=settings.system_template,
                    user=settings.user_template,
                    repair=settings.repair,
                )
            )
    return judges
