"""The options of `prbj judge` that measure beyond accuracy (--samples, --jury, --slice, --compare), taken out
of the command's keyword arguments in one place, and what the run does with them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl
from rich.console import Console

from prbj.analysis.beyond import beyond_figures
from prbj.analysis.jury import JurySpec, JuryStats, add_juries, parse_jury
from prbj.analysis.slice_kinds import SLICE_KINDS
from prbj.display.width import print_whole
from prbj.errors import ConfigError
from prbj.judges.base import Judge
from prbj.judges.generative import LLMJudgeBase
from prbj.judges.sampling import samplable, with_samples


@dataclass(frozen=True)
class BeyondOptions:
    samples: int = 1
    juries: tuple[JurySpec, ...] = ()
    slices: tuple[str, ...] = ()
    compare: bool = False

    @classmethod
    def pop_from(cls, options: dict[str, Any]) -> BeyondOptions:
        juries = tuple(parse_jury(text) for text in options.pop("jury", ()) or ())
        names = [j.name for j in juries]
        if len(set(names)) != len(names):
            raise ConfigError("--jury: two juries have the same name")
        return cls(
            samples=int(options.pop("samples", 1) or 1),
            juries=juries,
            slices=expand_slices(options.pop("slices", ()) or ()),
            compare=bool(options.pop("compare", False)),
        )

    def sampled(self, judges: Sequence[Judge]) -> list[Judge]:
        """The judges, LLM ones sampled --samples times; a jury naming a judge that will not run fails here,
        before any call."""
        names = {judge.name for judge in judges}
        for jury in self.juries:
            missing = [m for m in jury.members if m not in names]
            if missing:
                raise ConfigError(
                    f"--jury {jury.name}: {', '.join(missing)} is not among the judges of this run "
                    f"({', '.join(sorted(names))}); add it with --provider"
                )
        if self.samples > 1:
            greedy = sorted({j.name for j in judges if isinstance(j, LLMJudgeBase) and not samplable(j)})
            notes = Console(stderr=True, highlight=False)
            for name in greedy:
                print_whole(
                    notes,
                    f"note: --samples {self.samples}: {name} decodes greedily (in-process), so it is judged "
                    "once; with --confidence its probabilities come from its logits",
                )
        return with_samples(judges, self.samples)

    def juried(self, frame: pl.DataFrame) -> tuple[pl.DataFrame, list[JuryStats]]:
        return add_juries(frame, list(self.juries)) if self.juries else (frame, [])

    def figures(self, frame: pl.DataFrame, juries: Sequence[JuryStats], *, seed: int) -> dict[str, Any]:
        return beyond_figures(frame, seed=seed, juries=juries, slices=self.slices, compare=self.compare)


def expand_slices(kinds: Sequence[str]) -> tuple[str, ...]:
    """`all` stands for every slice; the order is always SLICE_KINDS'."""
    asked = set(kinds)
    unknown = asked - set(SLICE_KINDS) - {"all"}
    if unknown:
        raise ConfigError(f"--slice {sorted(unknown)[0]}: expected one of {', '.join(SLICE_KINDS)}, all")
    return tuple(k for k in SLICE_KINDS if k in asked or "all" in asked)
