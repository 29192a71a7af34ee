"""Build judges from command options: the one place `prbj judge`, `prbj bon score` and `prbj serve` turn
their options into JudgeSettings, a planner and user templates.

Every LLM judge is built on the run's gateway, so its calls go through the same cache, limits and budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from prbj.judges.base import Judge
from prbj.judges.registry import JudgeSettings, resolve_judges
from prbj.judges.scalar import ScalarOptions
from prbj.llm.gateway import Gateway
from prbj.llm.setup import GatewayOptions
from prbj.context.planner import Planner
from prbj.prompts import Template, from_file

# What a user template must show, by mode, or the judge would never see that input.
_REQUIRED_PLACEHOLDERS = {
    "pairwise": {"question", "Response_A", "Response_B"},
    "pointwise": {"question", "response"},
}


@dataclass(frozen=True)
class JudgeOptions:
    seed: int = 42
    contexts: tuple[str, ...] = ()
    profile_k: int = 10
    planner: str | None = None
    repair: bool = False
    system_template: Path | None = None
    user_template: Path | None = None
    # Scoring one answer at a time is what best-of-N and a reward server need; `prbj judge` also offers pairwise.
    mode: Literal["pairwise", "pointwise"] = "pointwise"
    order: Literal["random", "both"] = "random"
    scalar: ScalarOptions = field(default_factory=ScalarOptions)


def _template(path: Path | None, option: str, required: set[str]) -> Template | None:
    return from_file(path, option=option, required=required) if path is not None else None


def build_judges(
    specs: Sequence[str], options: JudgeOptions, shared: GatewayOptions, gateway: Gateway
) -> tuple[list[Judge], Planner | None]:
    planner = (
        Planner(shared.provider(options.planner), gateway, profile_k=options.profile_k)
        if options.planner
        else None
    )
    settings = JudgeSettings(
        seed=options.seed,
        cache=gateway.cache,
        gateway=gateway,
        planner=planner,
        contexts=options.contexts,  # type: ignore[arg-type]
        mode=options.mode,
        order=options.order,
        repair=options.repair,
        profile_k=options.profile_k,
        system_template=_template(options.system_template, "--judge-template-system", set()),
        user_template=_template(
            options.user_template, "--judge-template-user", _REQUIRED_PLACEHOLDERS[options.mode]
        ),
        providers_dir=shared.providers_dir,
        api_base=shared.api_base,
        require_keys=shared.sends,
        scalar=options.scalar,
    )
    return resolve_judges(specs, settings), planner
