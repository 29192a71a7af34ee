"""Build judges that score one answer at a time (for `prbj bon score` and `prbj serve`) from command options.

Offline baselines come as they are; LLM judges are built in pointwise mode (1-10 per answer) on the run's
gateway, so every call goes through the same cache, limits and budget as `prbj judge`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from prbj.judges.base import Judge
from prbj.judges.registry import JudgeSettings, resolve_judges
from prbj.llm.call import Gateway
from prbj.llm.setup import GatewayOptions
from prbj.planner import Planner
from prbj.prompts import from_file


@dataclass(frozen=True)
class PointwiseJudgeOptions:
    seed: int = 42
    contexts: tuple[str, ...] = ()
    profile_k: int = 10
    planner: str | None = None
    repair: bool = False
    system_template: Path | None = None
    user_template: Path | None = None


def build_pointwise_judges(
    specs: Sequence[str], options: PointwiseJudgeOptions, shared: GatewayOptions, gateway: Gateway
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
        mode="pointwise",
        repair=options.repair,
        profile_k=options.profile_k,
        system_template=(
            from_file(options.system_template, option="--judge-template-system")
            if options.system_template
            else None
        ),
        user_template=(
            from_file(
                options.user_template, option="--judge-template-user", required={"question", "response"}
            )
            if options.user_template
            else None
        ),
        providers_dir=shared.providers_dir,
        api_base=shared.api_base,
        require_keys=shared.sends,
    )
    return resolve_judges(specs, settings), planner
