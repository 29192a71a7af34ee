"""Turn `--provider` values into judges."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from prbj.errors import ConfigError
from prbj.judges.base import Judge
from prbj.judges.baselines import BASELINES, DEFAULT_JUDGES, make_baseline
from prbj.judges.scalar import HF_PREFIX, ScalarOptions, make_scalar_judge
from prbj.llm.cache import ResponseCache


@dataclass
class JudgeSettings:
    """Everything a judge factory may need besides its spec. Families of judges add their own fields."""

    seed: int = 42
    cache: ResponseCache | None = None
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
        judges.append(resolve_judge(spec, settings))
    return judges


def resolve_judge(spec: str, settings: JudgeSettings) -> Judge:
    if spec in BASELINES:
        return make_baseline(spec, seed=settings.seed)
    if spec.startswith(HF_PREFIX):
        return make_scalar_judge(spec.removeprefix(HF_PREFIX), settings)
    raise ConfigError(f"--provider {spec!r}: unknown judge; offline judges are {', '.join(BASELINES)}")
