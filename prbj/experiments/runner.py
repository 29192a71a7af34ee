"""Run an experiment's stages in order: skip those done with the same inputs, run (or resume) the others, and
record each one in the manifest.

A stage's input hash covers its own configuration, the outputs of the stages it depends on (their run
directories and a digest of their figures) and the files it reads. A stage whose record says `done` with the
same input hash, and whose outputs are still there, is skipped; any other stage runs. A stage killed in the
middle is simply run again: every model call it had already made is answered by the response cache, so
nothing is paid twice (a request on the wire at the moment of a SIGKILL excepted: it was paid and its answer
lost).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from rich.console import Console

from prbj import __version__
from prbj.analysis.downstream import STORE_FILE
from prbj.bon.rundir import SAMPLES_FILE
from prbj.data.names import did_you_mean
from prbj.errors import ConfigError, PrbjError
from prbj.experiments.commandline import CommandLine
from prbj.experiments.manifest import Manifest, StageRecord, now
from prbj.experiments.needs import missing_extra
from prbj.experiments.planner_stage import PLANNER_FILE, run_planner
from prbj.experiments.schema import Experiment
from prbj.experiments.stages import (
    BON_EVALUATE_STAGE,
    BON_SAMPLE_STAGE,
    BON_SCORE_STAGE,
    CORRELATE_STAGE,
    DOWNSTREAM,
    PLANNER,
    REPORT,
    CommandBuilder,
    Invocation,
    Stage,
    stage_graph,
)
from prbj.experiments.usage import stage_usage
from prbj.llm.setup import watched_gateways
from prbj.runs import rundir

# What a stage leaves behind, by kind: a folder is complete when it holds this file.
_COMPLETE = {"judge": rundir.SUMMARY_FILE, BON_SAMPLE_STAGE: SAMPLES_FILE}
# Files bon-score writes into the BoN run directory: removed before it runs again, so that an RM dropped from
# the experiment does not linger in them.
_SCORE_FILES = ("scores.parquet", "picks.parquet")


class PlannedStop(PrbjError):
    """The experiment stops on purpose (batch jobs submitted with --no-wait): its message is the outcome."""

    exit_code = 0


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def file_digest(path: Path) -> str:
    if path.is_dir():
        return digest({p.name: file_digest(p) for p in sorted(path.iterdir())})
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def frame_digest(frame: pl.DataFrame, columns: Sequence[str]) -> str:
    """A digest of what a table says (the given columns, rows sorted), not of how its file was written."""
    kept = [c for c in columns if c in frame.columns]
    return hashlib.sha256(frame.select(kept).sort(kept, nulls_last=True).write_csv().encode()).hexdigest()


def dataset_digest(dataset: str) -> str:
    """A local dataset's bytes (an edited file reruns the stages that read it); the bundled sample and hub ids
    by name and prbj version."""
    path = Path(dataset)
    if dataset != "sample" and path.exists():
        return file_digest(path)
    return digest([dataset, __version__])


@dataclass
class RunOptions:
    dry_run: bool = False
    only: str | None = None
    progress: bool = True


class Runner:
    def __init__(
        self,
        experiment: Experiment,
        cli: CommandLine,
        directory: Path,
        *,
        console: Console | None = None,
        options: RunOptions | None = None,
    ) -> None:
        self.experiment = experiment
        self.cli = cli
        self.directory = directory
        self.console = console or Console()
        self.options = options or RunOptions()
        self.stages = stage_graph(experiment)
        self.commands = CommandBuilder(experiment, cli, directory, progress=self.options.progress)
        self.manifest = Manifest.open(directory, self.experiment_record())

    def experiment_record(self) -> dict[str, Any]:
        return {
            "name": self.experiment.name,
            "file": str(self.experiment.path),
            "digest": self.experiment.digest,
        }

    def stage(self, name: str) -> Stage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        names = [s.name for s in self.stages]
        raise ConfigError(
            f"--stage {name!r}: no such stage;{did_you_mean(name, names)} stages: {', '.join(names)}"
        )

    # --- hashing ------------------------------------------------------------------------------------------
    def input_hash(self, stage: Stage) -> str:
        upstream = {}
        for name in stage.after:
            record = self.manifest.stages.get(name)
            upstream[name] = (
                [record.outputs, record.run_dirs] if record is not None and record.state == "done" else None
            )
        return digest(
            {
                "stage": stage.name,
                "config": stage.config,
                "upstream": upstream,
                "files": {str(p): file_digest(p) for p in stage.files},
                "dataset": dataset_digest(str(stage.config["dataset"]))
                if "dataset" in stage.config
                else None,
            }
        )

    def _done(self, name: str) -> bool:
        record = self.manifest.stages.get(name)
        return record is not None and record.state == "done"

    def _fresh(self, stage: Stage, record: StageRecord | None, inputs: str) -> bool:
        if record is None or record.state != "done" or record.inputs != inputs:
            return False
        return all(folder.exists() for folder in self.manifest.folders(stage.name))

    # --- running ------------------------------------------------------------------------------------------
    def run(self) -> int:
        chosen = [self.stage(self.options.only)] if self.options.only else self.stages
        lacking = missing_extra(self.experiment, chosen)
        if lacking is not None:  # before anything runs or is written
            raise lacking
        self.manifest.experiment = self.experiment_record()
        self.manifest.forget({s.name for s in self.stages})
        self.directory.mkdir(parents=True, exist_ok=True)
        self.manifest.save()
        for stage in chosen:
            missing = [name for name in stage.after if not self._done(name)]
            if missing:
                raise ConfigError(
                    f"stage {stage.name} needs {', '.join(missing)} first: run 'prbj run FILE' (or --stage) for them"
                )
            inputs = self.input_hash(stage)
            if not self.options.only and self._fresh(stage, self.manifest.stages.get(stage.name), inputs):
                self.console.print(f"[dim]✓ {stage.name}: up to date[/dim]")
                continue
            code = self.execute(stage, inputs)
            if code != 0:
                return code
        what = f"stage {self.options.only}" if self.options.only else f"experiment {self.experiment.name}"
        self.console.print(f"{what}: done; ${self.manifest.spent_usd:.4f} spent in all; {self.directory}")
        return 0

    def remaining_cap(self, stage: Stage) -> float | None:
        """The --max-cost a stage runs with: what is left of its own cap and of the experiment's total."""
        spent_here = self.manifest.stages[stage.name].cost_usd if stage.name in self.manifest.stages else 0.0
        caps = []
        if stage.max_cost is not None:
            caps.append(stage.max_cost - spent_here)
        if self.experiment.max_cost is not None:
            caps.append(self.experiment.max_cost - self.manifest.spent_usd)
        return max(0.0, min(caps)) if caps else None

    def execute(self, stage: Stage, inputs: str) -> int:
        record = self.manifest.start(stage.name, inputs)
        self.console.rule(
            f"stage {stage.name}" + (f" (attempt {record.attempts})" if record.attempts > 1 else "")
        )
        cap = self.remaining_cap(stage)
        code = 1
        with watched_gateways() as seen:
            try:
                code, run_dirs = self._run(stage, cap)
            finally:
                usage = stage_usage(seen)
                record.calls_sent += usage.calls_sent
                record.cache_hits = usage.cache_hits
                record.cost_usd += usage.cost_usd
                self.manifest.spent_usd += usage.cost_usd
                record.finished = now()
                record.exit_code = code
                record.state = "failed"
                self.manifest.save()
        if code == 0 and run_dirs is None:
            record.state = "waiting"  # --batch --no-wait: jobs submitted, nothing to record yet
            self.manifest.save()
            raise PlannedStop(
                f"{stage.name}: batch jobs submitted; rerun 'prbj run {self.experiment.path}' once they end "
                "(prbj batch status) to collect them and go on"
            )
        if code != 0:
            self.console.print(f"[bold red]stage {stage.name} failed (exit {code})[/bold red]")
            return code
        assert run_dirs is not None
        record.run_dirs = self.manifest.relative(run_dirs)
        record.outputs = self.output_digest(stage, run_dirs)
        record.state = "done"
        self.manifest.save()
        return 0

    def _invoke(self, invocation: Invocation) -> int:
        self.console.print(f"[dim]$ {invocation.shell()}[/dim]", soft_wrap=True, highlight=False)
        return self.cli.run(invocation.command, invocation.argv)

    def _run(self, stage: Stage, cap: float | None) -> tuple[int, list[Path] | None]:
        build = self.commands
        folder = build.folder(stage)
        if stage.kind == PLANNER:
            code = run_planner(
                self.experiment,
                folder,
                max_cost=cap,
                dry_run=False,
                progress=self.options.progress,
                benchmark=stage.benchmark,
            )
            return code, [folder] if code == 0 else []
        if stage.kind == "judge":
            return self._new_run(stage, folder, build.judge(stage, max_cost=cap, dry_run=False))
        if stage.kind == BON_SAMPLE_STAGE:
            return self._new_run(stage, folder, build.bon_sample(stage, max_cost=cap, dry_run=False))
        bon_dir = self._bon_dir()
        if stage.kind == BON_SCORE_STAGE:
            assert bon_dir is not None
            for name in _SCORE_FILES:
                (bon_dir / name).unlink(missing_ok=True)
            return self._invoke(build.bon_score(bon_dir, max_cost=cap, dry_run=False)), [bon_dir]
        if stage.kind == BON_EVALUATE_STAGE:
            assert bon_dir is not None
            return self._invoke(build.bon_evaluate(bon_dir, max_cost=cap, dry_run=False)), [bon_dir]
        if stage.kind == DOWNSTREAM:
            shutil.rmtree(folder, ignore_errors=True)
            for invocation in build.downstream(stage, bon_dir):
                code = self._invoke(invocation)
                if code != 0:
                    return code, []
            return 0, [folder]
        if stage.kind == CORRELATE_STAGE:
            runs = self.judge_run_dirs(main_only=True)
            return self._invoke(build.correlate(stage, runs, context_maps(runs))), [folder]
        if stage.kind == REPORT:
            from prbj.experiments.summary import write_experiment_report

            write_experiment_report(self.experiment, self.manifest, folder, self.console)
            return 0, [folder / "summary.json"]
        raise AssertionError(f"unknown stage kind {stage.kind}")

    def _new_run(self, stage: Stage, folder: Path, invocation: Invocation) -> tuple[int, list[Path] | None]:
        """Run a command that creates a run directory in `folder`; keep the new one, drop the ones earlier
        attempts left (a killed run's half-written folder, a run of a since-edited entry)."""
        folder.mkdir(parents=True, exist_ok=True)
        before = {p.name for p in folder.iterdir()}
        code = self._invoke(invocation)
        if code != 0:
            return code, []
        complete = _COMPLETE[stage.kind]
        made = sorted(p for p in folder.iterdir() if p.name not in before and (p / complete).exists())
        if not made:
            return 0, None
        kept = made[-1]
        for old in folder.iterdir():
            if old != kept and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
        return 0, [kept]

    def _bon_dir(self) -> Path | None:
        record = self.manifest.stages.get(BON_SAMPLE_STAGE)
        folders = self.manifest.folders(BON_SAMPLE_STAGE)
        return folders[0] if record is not None and folders else None

    def judge_run_dirs(self, *, main_only: bool = False) -> list[Path]:
        """The judge stages' run directories (`main_only`: those on the main benchmark, which the correlation
        is about)."""
        dirs = []
        for stage in self.stages:
            record = self.manifest.stages.get(stage.name)
            if main_only and stage.benchmark != self.experiment.main:
                continue
            if stage.kind == "judge" and record is not None and record.state == "done":
                dirs += self.manifest.folders(stage.name)
        return dirs

    def output_digest(self, stage: Stage, run_dirs: Sequence[Path]) -> str:
        return digest([_output_digest(stage.kind, Path(d)) for d in run_dirs])


def _output_digest(kind: str, path: Path) -> str:
    """What a stage produced, as a digest of its figures (not of file bytes that hold times or cache flags)."""
    if kind == "judge":
        judgments = pl.read_parquet(path / rundir.JUDGMENTS_FILE)
        columns = (
            "pair_id",
            "judge",
            "context",
            "status",
            "correct",
            "verdict",
            "score_chosen",
            "score_rejected",
        )
        return digest([file_digest(path / rundir.SUMMARY_FILE), frame_digest(judgments, columns)])
    if kind == BON_SAMPLE_STAGE:
        return frame_digest(
            pl.read_parquet(path / SAMPLES_FILE), ("pair_id", "sample_index", "text", "status")
        )
    if kind == BON_SCORE_STAGE:
        picks = path / "picks.parquet"
        return (
            frame_digest(pl.read_parquet(picks), ("rm", "pair_id", "k", "sample_index"))
            if picks.exists()
            else ""
        )
    if kind == BON_EVALUATE_STAGE:
        return file_digest(path / STORE_FILE)
    if kind == PLANNER:
        return file_digest(path / PLANNER_FILE)
    if kind == CORRELATE_STAGE:
        document = json.loads((path / "correlation.json").read_text(encoding="utf-8"))
        return digest(document.get("comparisons"))
    return file_digest(path)


def context_maps(run_dirs: Sequence[Path]) -> list[str]:
    """`--map judge@context=judge@context` for every context of a judge but its first, so that a judge that ran
    in several contexts gives one benchmark column per context and its first context carries its plain name
    (as the report names downstream RMs)."""
    seen: dict[str, list[str]] = {}
    for run_dir in run_dirs:
        summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text(encoding="utf-8"))
        for row in summary.get("results", []):
            contexts = seen.setdefault(str(row["judge"]), [])
            if row["context"] not in contexts:
                contexts.append(str(row["context"]))
    return [f"{judge}@{c}={judge}@{c}" for judge, contexts in seen.items() for c in contexts[1:]]
