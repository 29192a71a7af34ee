"""Turn `--provider` values into judges: a table from name (or name prefix) to factory.

- offline baselines by name (`random`, `length`, `bm25-profile`, `embed-profile`);
- `hf:<path-or-hub-id>`: a scalar reward model run in-process;
- `py:FILE.py:NAME`, `py:package.module:NAME`, or the name of an installed entry point of the group
  `prbj.judges`: a reward model written in Python (prbj.judges.python_rm), one judge per `--context`;
- LLM judges: `hf-local:<path-or-id>`, `litellm:<model-id>` or a provider profile name (`gemini-3-flash`, see
  `prbj providers`), one judge per `--context` setting.

Every factory is built from what the user asked (JudgeOptions), the run's Gateway and its optional Planner.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from prbj.context.planner import Planner
from prbj.data.names import did_you_mean
from prbj.data.schema import Context
from prbj.errors import ConfigError
from prbj.judges.base import Judge
from prbj.judges.baselines import BASELINES, DEFAULT_JUDGES, make_baseline
from prbj.judges.generative import (
    ContextBuilder,
    PairwiseLLMJudge,
    PointwiseLLMJudge,
    check_template_shows_context,
)
from prbj.judges.official import PAIRWISE_SYSTEM, PAIRWISE_USER
from prbj.judges.python_rm import make_python_judges
from prbj.judges.scalar import HF_PREFIX, make_scalar_judge
from prbj.judges.setup import JudgeOptions, make_planner, resolve_provider
from prbj.llm.gateway import Gateway
from prbj.llm.providers import (
    LITELLM_PREFIX,
    LOCAL_PREFIX,
    is_provider_name,
    profile_names,
    retired_profile_message,
)
from prbj.llm.setup import GatewayOptions
from prbj.local.rm_loader import PY_PREFIX, entry_point_source, entry_points

# LLM judges see the ranked profile unless told otherwise: the benchmark is about fitting one user, and a
# judge without any user context cannot know who that is. `--context none` reproduces the official script.
DEFAULT_LLM_CONTEXT: Context = "profile"
# Scalar RMs follow the official protocol by default: the user turn holds the question only.
DEFAULT_SCALAR_CONTEXT: Context = "none"


# (spec, what the user asked, the shared model options, the run's gateway, its planner) → judges
JudgeFactory = Callable[[str, JudgeOptions, GatewayOptions, Gateway, Planner | None], list[Judge]]


def _baseline(
    spec: str, options: JudgeOptions, shared: GatewayOptions, gateway: Gateway, planner: Planner | None
) -> list[Judge]:
    return [make_baseline(spec, seed=options.seed)]


def _scalar(
    spec: str, options: JudgeOptions, shared: GatewayOptions, gateway: Gateway, planner: Planner | None
) -> list[Judge]:
    ref = spec.removeprefix(HF_PREFIX)
    return [
        make_scalar_judge(
            ref,
            context=context,
            options=options.scalar,
            gateway=gateway,
            seed=options.seed,
            profile_k=options.profile_k,
            profile_order=options.profile_order,
        )
        for context in options.contexts or (DEFAULT_SCALAR_CONTEXT,)
    ]


def _python(
    spec: str, options: JudgeOptions, shared: GatewayOptions, gateway: Gateway, planner: Planner | None
) -> list[Judge]:
    return list(make_python_judges(spec, options, gateway, planner))


def _llm(
    spec: str, options: JudgeOptions, shared: GatewayOptions, gateway: Gateway, planner: Planner | None
) -> list[Judge]:
    provider = resolve_provider(spec, shared, gateway, options.judge_params)
    system, user = options.system_template, options.user_template
    official = options.official
    default_context = DEFAULT_LLM_CONTEXT
    if official is not None and options.mode == "pairwise":
        # The official pairwise script shows no profile, with its own prompts (unless the user gives others).
        default_context = "none"
        system = system or official.template(PAIRWISE_SYSTEM)
        user = user or official.template(PAIRWISE_USER)
    judges: list[Judge] = []
    for context in options.contexts or (default_context,):
        builder = ContextBuilder(
            context, profile_k=options.profile_k, planner=planner, profile_order=options.profile_order
        )
        if user is not None:
            check_template_shows_context(user, context, "--judge-template-user", system=system)
        if options.mode == "pointwise":
            judges.append(
                PointwiseLLMJudge(
                    provider,
                    gateway,
                    context=context,
                    contexts=builder,
                    system=system,
                    user=user,
                    repair=options.repair,
                    retry_failed=options.retry_failed,
                )
            )
        else:
            judges.append(
                PairwiseLLMJudge(
                    provider,
                    gateway,
                    context=context,
                    contexts=builder,
                    order=options.order,
                    order_seed=options.seed,
                    system=system,
                    user=user,
                    repair=options.repair,
                    retry_failed=options.retry_failed,
                    protocol=options.protocol,
                )
            )
    return judges


# Exact names first, then prefixes; a name matching neither is looked up among the provider profiles.
BY_NAME: dict[str, JudgeFactory] = {name: _baseline for name in BASELINES}
BY_PREFIX: dict[str, JudgeFactory] = {
    HF_PREFIX: _scalar,
    LOCAL_PREFIX: _llm,
    LITELLM_PREFIX: _llm,
    PY_PREFIX: _python,
}


def factory_for(spec: str, shared: GatewayOptions) -> JudgeFactory:
    return judge_factory(spec, shared.providers_dir)


def judge_factory(spec: str, providers_dir: Path | None) -> JudgeFactory:
    """What builds the judge `spec` names; a name that is no judge is a one-line ConfigError with the nearest
    names. Nothing is loaded or called, so an experiment file checks its names with it when it is read."""
    if spec in BY_NAME:
        return BY_NAME[spec]
    for prefix, factory in BY_PREFIX.items():
        if spec.startswith(prefix):
            return factory
    if is_provider_name(spec, providers_dir):
        return _llm
    retired = retired_profile_message(spec, providers_dir)
    if retired is not None:
        raise ConfigError(retired)
    # A reward model installed with pip registers its name as an entry point.
    if entry_point_source(spec) is not None:
        return _python
    installed = [ep.name for ep in entry_points()]
    near = did_you_mean(spec, [*BASELINES, *profile_names(providers_dir), *installed])
    raise ConfigError(
        f"--provider {spec!r}: unknown judge;{near} offline judges are {', '.join(BASELINES)}; LLM judges are the "
        f"profiles listed by `prbj providers`, litellm:<model-id> or hf-local:<path-or-id>; scalar RMs are "
        f"hf:<path-or-hub-id>; your own reward model is py:FILE.py:NAME (docs/plugins.md)"
    )


def known_judges() -> list[str]:
    return list(BASELINES)


def resolve_judges(
    specs: Sequence[str],
    options: JudgeOptions,
    shared: GatewayOptions,
    gateway: Gateway,
    planner: Planner | None = None,
) -> list[Judge]:
    """Judges for the given specs, in order, without duplicates; the offline baselines when none are given."""
    judges: list[Judge] = []
    for spec in dict.fromkeys(specs or DEFAULT_JUDGES):
        judges.extend(factory_for(spec, shared)(spec, options, shared, gateway, planner))
    return judges


def build_judges(
    specs: Sequence[str], options: JudgeOptions, shared: GatewayOptions, gateway: Gateway
) -> tuple[list[Judge], Planner | None]:
    """The judges a command asked for and the planner they share, all on the run's gateway (one cache, one
    budget). Planner and templates are checked before any judge is built, so a bad option fails first."""
    planner = make_planner(options, shared, gateway)
    # Read the template files now: a bad one fails before any judge is built, even with offline judges only.
    _ = options.system_template, options.user_template, options.official
    return resolve_judges(specs, options, shared, gateway, planner), planner
