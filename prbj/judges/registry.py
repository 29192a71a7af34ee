"""Turn `--provider` values into judges."""

from __future__ import annotations

from collections.abc import Sequence

from prbj.errors import ConfigError
from prbj.judges.base import Judge
from prbj.judges.baselines import BASELINES, DEFAULT_JUDGES, make_baseline


def known_judges() -> list[str]:
    return list(BASELINES)


def resolve_judges(specs: Sequence[str], *, seed: int) -> list[Judge]:
    """Judges for the given specs, in order, without duplicates; the offline baselines when none are given."""
    judges: list[Judge] = []
    seen: set[str] = set()
    for spec in specs or DEFAULT_JUDGES:
        if spec in seen:
            continue
        seen.add(spec)
        if spec in BASELINES:
            judges.append(make_baseline(spec, seed=seed))
        else:
            raise ConfigError(
                f"--provider {spec!r}: unknown judge; offline judges are {', '.join(BASELINES)}"
            )
    return judges
