"""What an experiment's stages need installed: checked before the first stage runs, so that a missing extra is
one line at the start (exit 2), not a traceback in the middle of the experiment after other stages ran."""

from __future__ import annotations

from collections.abc import Sequence

from prbj.experiments.schema import Experiment
from prbj.experiments.stages import BON_SCORE_STAGE, Stage
from prbj.extras import LOCAL, MissingExtra
from prbj.judges.scalar import HF_PREFIX
from prbj.llm.providers import LOCAL_PREFIX

_IN_PROCESS = (HF_PREFIX, LOCAL_PREFIX)


def in_process_models(stages: Sequence[Stage]) -> list[str]:
    """The models that `stages` run in-process (`hf:`, `hf-local:`), each named once: a judge by its entry's
    name, best-of-N's reward models, policy and gold judge (and a planner) by their provider."""
    named: dict[str, str] = {}  # provider → name
    for stage in stages:
        if stage.kind == "judge" and stage.judge is not None:
            wanted = [(stage.judge.provider, stage.judge.name)]
        elif stage.kind == BON_SCORE_STAGE:
            wanted = [(rm, rm) for rm in stage.config.get("rms", [])]
        else:
            wanted = [
                (str(stage.config[key]),) * 2 for key in ("provider", "policy", "gold") if key in stage.config
            ]
        for provider, name in wanted:
            if provider.startswith(_IN_PROCESS):
                named.setdefault(provider, name)
    return list(named.values())


def missing_extra(experiment: Experiment, stages: Sequence[Stage]) -> MissingExtra | None:
    """The error a run of `stages` would meet for want of an extra, or None when everything they need is here."""
    models = in_process_models(stages)
    lacking = LOCAL.missing() if models else []
    if not lacking:
        return None
    names = models[0] if len(models) == 1 else f"{', '.join(models[:-1])} and {models[-1]}"
    what = f"{experiment.path}: {names} {'runs' if len(models) == 1 else 'run'} in-process and"
    return MissingExtra(LOCAL, what, lacking, plural=len(models) > 1)
