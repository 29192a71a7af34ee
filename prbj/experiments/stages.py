"""The stage graph of an experiment: which stages it has, in which order, what each depends on, and the prbj
command line each one runs.

    planner → judge:<name> (one per [[judges]] entry) → bon-sample → bon-score → bon-evaluate → downstream
            → correlate → report

A stage's `config` is everything that defines it besides its upstream stages' outputs; the runner hashes the two
together into the stage's input hash. Editing one judge entry changes only that judge stage's config, so only
it and the stages after it (correlate, report) run again.

An experiment that lists several benchmarks runs the planner and every judge once per benchmark, as
`planner@<benchmark>` and `judge:<name>@<benchmark>`; best-of-N and the correlation are about the main benchmark
(Personalized RewardBench), the report covers every run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prbj.bon.rundir import slug
from prbj.experiments.commandline import CommandLine, CommandPath, entry_argv, option_index
from prbj.experiments.schema import (
    BON_EVALUATE,
    BON_SAMPLE,
    BON_SCORE,
    CORRELATE,
    JUDGE,
    BenchmarkEntry,
    Experiment,
    JudgeEntry,
)
from prbj.judges.baselines import BASELINES
from prbj.judges.scalar import HF_PREFIX

PLANNER = "planner"
BON_SAMPLE_STAGE = "bon-sample"
BON_SCORE_STAGE = "bon-score"
BON_EVALUATE_STAGE = "bon-evaluate"
DOWNSTREAM = "downstream"
CORRELATE_STAGE = "correlate"
REPORT = "report"
JUDGE_PREFIX = "judge:"

# Folders of the experiment directory, one per kind of stage output.
JUDGES_FOLDER = "judges"
BON_FOLDER = "bon"
DOWNSTREAM_FOLDER = "downstream"
CORRELATION_FOLDER = "correlation"
PLANNER_FOLDER = "planner"


@dataclass(frozen=True)
class Stage:
    name: str
    kind: str
    after: tuple[str, ...]
    config: dict[str, Any]
    max_cost: float | None = None
    judge: JudgeEntry | None = None
    files: tuple[Path, ...] = field(default=())
    # The benchmark a planner or judge stage reads (None for the stages after them).
    benchmark: BenchmarkEntry | None = None


def judge_stage_name(judge: JudgeEntry, suffix: str = "") -> str:
    return f"{JUDGE_PREFIX}{judge.name}{suffix}"


def stage_suffix(experiment: Experiment, entry: BenchmarkEntry) -> str:
    """How a stage's name says its benchmark: nothing when the experiment studies one."""
    return f"@{entry.label}" if len(experiment.studied) > 1 else ""


def _common(experiment: Experiment, entry: BenchmarkEntry) -> dict[str, Any]:
    """What every stage reading a benchmark's pairs is defined by; `benchmark` only when one is named, so that a
    study of one dataset keeps the stage hashes it always had."""
    return {
        "dataset": entry.dataset,
        "subsets": list(experiment.subsets),
        "limit": experiment.limit,
        "seed": experiment.seed,
        **({"benchmark": entry.benchmark} if entry.benchmark is not None else {}),
    }


def _card_files(entry: BenchmarkEntry) -> tuple[Path, ...]:
    """A card file a stage reads (an edit reruns it); shipped cards change only with prbj."""
    return (
        (Path(entry.benchmark),) if entry.benchmark is not None and entry.benchmark.endswith(".toml") else ()
    )


def judge_name(judge: JudgeEntry) -> str:
    """The name the judge command gives this entry's judge (its rows in judgments and summaries)."""
    if judge.provider in BASELINES or judge.provider.startswith(HF_PREFIX):
        return judge.provider
    return (
        f"{judge.provider}:pointwise" if judge.settings.options.get("mode") == "pointwise" else judge.provider
    )


def rm_names(experiment: Experiment) -> dict[str, str]:
    """Entry name → judge name, for the entries whose two differ (an hf: folder named 'tiny-rm-s'): files of
    the experiment may name an RM by its entry's name."""
    return {j.name: judge_name(j) for j in experiment.judges if judge_name(j) != j.name}


def translated_csv(path: Path, column: str, names: Mapping[str, str], target: Path) -> Path:
    """`path` with the `column` values that are entry names replaced by judge names, written to `target`;
    `path` itself when nothing needs replacing."""
    import csv
    import io

    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    if not rows or column not in [h.strip() for h in rows[0]]:
        return path
    index = [h.strip() for h in rows[0]].index(column)
    changed = False
    for row in rows[1:]:
        if index < len(row) and row[index].strip() in names:
            row[index] = names[row[index].strip()]
            changed = True
    if not changed:
        return path
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    from prbj.data.files import write_text

    target.parent.mkdir(parents=True, exist_ok=True)
    return write_text(target, buffer.getvalue())


def stage_graph(experiment: Experiment) -> list[Stage]:
    """The experiment's stages in the order they run (each after every stage it depends on)."""
    common = _common(experiment, experiment.main)
    stages: list[Stage] = []
    planner = experiment.planner
    judge_names: list[str] = []
    main_judges: list[str] = []
    for entry in experiment.studied:
        suffix = stage_suffix(experiment, entry)
        planner_stage = f"{PLANNER}{suffix}"
        if planner is not None:
            stages.append(
                Stage(
                    planner_stage,
                    PLANNER,
                    (),
                    {
                        **_common(experiment, entry),
                        "provider": planner.provider,
                        "profile_k": planner.profile_k,
                        "repair": planner.repair,
                        "defaults": experiment.defaults,
                    },
                    max_cost=planner.max_cost,
                    files=_card_files(entry),
                    benchmark=entry,
                )
            )
        for judge in experiment.judges:
            name = judge_stage_name(judge, suffix)
            judge_names.append(name)
            if entry == experiment.main:
                main_judges.append(name)
            uses_planner = planner is not None and "planner" in _contexts(judge.settings.options)
            stages.append(
                Stage(
                    name,
                    "judge",
                    (planner_stage,) if uses_planner else (),
                    {
                        **_common(experiment, entry),
                        "provider": judge.provider,
                        "options": judge.settings.options,
                        "defaults": experiment.defaults,
                        "planner": planner.provider if planner is not None and uses_planner else None,
                    },
                    max_cost=judge.max_cost,
                    judge=judge,
                    files=_card_files(entry),
                    benchmark=entry,
                )
            )
    bon = experiment.bon
    if bon is not None:
        stages.append(
            Stage(
                BON_SAMPLE_STAGE,
                BON_SAMPLE_STAGE,
                (),
                {
                    **common,
                    "policy": bon.policy,
                    "n": bon.n,
                    "options": bon.sample.options,
                    "defaults": experiment.defaults,
                },
                max_cost=bon.max_cost,
            )
        )
        stages.append(
            Stage(
                BON_SCORE_STAGE,
                BON_SCORE_STAGE,
                (BON_SAMPLE_STAGE,),
                {
                    "rms": list(bon.rms),
                    "options": bon.score.options,
                    "seed": experiment.seed,
                    "defaults": experiment.defaults,
                },
                max_cost=bon.max_cost,
            )
        )
        stages.append(
            Stage(
                BON_EVALUATE_STAGE,
                BON_EVALUATE_STAGE,
                (BON_SCORE_STAGE,),
                {
                    "gold": bon.gold,
                    "options": bon.evaluate.options,
                    "seed": experiment.seed,
                    "defaults": experiment.defaults,
                },
                max_cost=bon.max_cost,
            )
        )
    downstream = experiment.downstream
    has_outcomes = bon is not None or (downstream is not None and (downstream.records or downstream.ppo))
    if has_outcomes:
        stages.append(
            Stage(
                DOWNSTREAM,
                DOWNSTREAM,
                (BON_EVALUATE_STAGE,) if bon is not None else (),
                {
                    "records": [str(p) for p in downstream.records] if downstream else [],
                    "source": downstream.source if downstream else None,
                    "ppo": [[p.rm, str(p.file), p.source] for p in downstream.ppo] if downstream else [],
                },
                files=downstream.files if downstream else (),
            )
        )
    if has_outcomes and judge_names:
        stages.append(
            Stage(
                CORRELATE_STAGE,
                CORRELATE_STAGE,
                (*main_judges, DOWNSTREAM),
                {
                    "options": experiment.correlate.options if experiment.correlate else {},
                    "benchmarks": str(downstream.benchmarks)
                    if downstream and downstream.benchmarks
                    else None,
                    "k": bon.k if bon is not None else "max",
                    "seed": experiment.seed,
                    "defaults": experiment.defaults,
                },
                files=(downstream.benchmarks,) if downstream and downstream.benchmarks else (),
            )
        )
    if judge_names:
        upstream = (
            *judge_names,
            *([CORRELATE_STAGE] if has_outcomes else []),
            *([DOWNSTREAM] if has_outcomes else []),
        )
        stages.append(
            Stage(
                REPORT,
                REPORT,
                upstream,
                {
                    "title": experiment.report_title,
                    "slices": list(experiment.report_slices),
                    "claims": vars(experiment.claims),
                    "params_b": {j.name: j.params_b for j in experiment.judges},
                    "seed": experiment.seed,
                },
            )
        )
    return stages


def _contexts(options: Mapping[str, Any]) -> list[str]:
    value = options.get("context", [])
    return [value] if isinstance(value, str) else list(value)


# --- command lines ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Invocation:
    """One prbj command a stage runs: `prbj <command> <argv>`."""

    command: CommandPath
    argv: list[str]

    def shell(self) -> str:
        import shlex

        return shlex.join(["prbj", *self.command, *self.argv])


class CommandBuilder:
    """Turns a stage into the command lines it runs, given where upstream stages put their outputs."""

    def __init__(
        self, experiment: Experiment, cli: CommandLine, directory: Path, *, progress: bool = True
    ) -> None:
        self.experiment = experiment
        self.progress = progress
        self.cli = cli
        self.directory = directory
        self._known = {
            command: option_index(cli.options(command))
            for command in (JUDGE, BON_SAMPLE, BON_SCORE, BON_EVALUATE, CORRELATE)
        }

    def folder(self, stage: Stage) -> Path:
        if stage.kind == "judge":
            return self.directory / JUDGES_FOLDER / slug(stage.name.removeprefix(JUDGE_PREFIX))
        return {
            # planner, or planner@<benchmark> when the experiment studies several
            PLANNER: self.directory / f"{PLANNER_FOLDER}{stage.name.removeprefix(PLANNER)}",
            DOWNSTREAM: self.directory / DOWNSTREAM_FOLDER,
            CORRELATE_STAGE: self.directory / CORRELATION_FOLDER,
            REPORT: self.directory,
        }.get(stage.kind, self.directory / BON_FOLDER)

    def _dataset(self, stage: Stage, *, benchmark: bool = True) -> list[str]:
        """--dataset (and --benchmark, for commands that take it) of the stage's benchmark, --subset, --limit."""
        e = self.experiment
        argv = ["--dataset", str(stage.config["dataset"])]
        if benchmark and stage.config.get("benchmark") is not None:
            argv += ["--benchmark", str(stage.config["benchmark"])]
        for subset in e.subsets:
            argv += ["--subset", subset]
        if e.limit is not None:
            argv += ["--limit", str(e.limit)]
        if e.personal_data is not None:
            argv += ["--personal-data", e.personal_data]
        return argv

    def _options(
        self, command: CommandPath, own: Mapping[str, Any], *, skip: Sequence[str] = ()
    ) -> list[str]:
        """The experiment's [defaults] that `command` has (unless the entry sets them itself), then the entry's."""
        known = self._known[command]
        defaults = {
            known[key].keys[0]: value
            for key, value in self.experiment.defaults.items()
            if key in known and known[key].keys[0] not in own and key not in skip
        }
        base = self.experiment.base
        return [*entry_argv(known, defaults, base=base), *entry_argv(known, own, base=base)]

    def judge(self, stage: Stage, *, max_cost: float | None, dry_run: bool) -> Invocation:
        judge = stage.judge
        assert judge is not None
        argv = ["--provider", judge.provider, *self._dataset(stage), "--seed", str(self.experiment.seed)]
        argv += self._options(JUDGE, judge.settings.options)
        planner = stage.config.get("planner")
        if planner and "planner" not in judge.settings.options:
            argv += ["--planner", planner]
            entry = self.experiment.planner
            given = "profile_k" in judge.settings.options or "profile_k" in self.experiment.defaults
            if entry is not None and not given:
                # The profile the judge's planner is shown is the planner stage's (a benchmark card may
                # default to another --profile-k): the same calls, answered by the cache.
                argv += ["--profile-k", str(entry.profile_k)]
        return Invocation(JUDGE, self._finish(argv, self.folder(stage), max_cost, dry_run))

    def bon_sample(self, stage: Stage, *, max_cost: float | None, dry_run: bool) -> Invocation:
        bon = self.experiment.bon
        assert bon is not None
        argv = [
            "--policy",
            bon.policy,
            "--n",
            str(bon.n),
            # best-of-N reads Personalized RewardBench, as it always has
            *self._dataset(stage, benchmark=False),
            "--seed",
            str(self.experiment.seed),
        ]
        argv += self._options(BON_SAMPLE, bon.sample.options)
        return Invocation(BON_SAMPLE, self._finish(argv, self.folder(stage), max_cost, dry_run))

    def bon_score(self, run_dir: Path, *, max_cost: float | None, dry_run: bool) -> Invocation:
        bon = self.experiment.bon
        assert bon is not None
        argv = [str(run_dir)]
        for rm in bon.rms:
            argv += ["--provider", rm]
        argv += ["--seed", str(self.experiment.seed), *self._options(BON_SCORE, bon.score.options)]
        return Invocation(BON_SCORE, self._finish(argv, None, max_cost, dry_run))

    def bon_evaluate(self, run_dir: Path, *, max_cost: float | None, dry_run: bool) -> Invocation:
        bon = self.experiment.bon
        assert bon is not None
        argv = [str(run_dir), "--gold", bon.gold, "--seed", str(self.experiment.seed)]
        argv += self._options(BON_EVALUATE, bon.evaluate.options)
        return Invocation(BON_EVALUATE, self._finish(argv, None, max_cost, dry_run))

    def downstream(self, stage: Stage, bon_dir: Path | None) -> list[Invocation]:
        store = self.folder(stage)
        add: CommandPath = ("downstream", "add")
        calls = []
        if bon_dir is not None:
            calls.append(Invocation(add, [str(bon_dir), "--store", str(store)]))
        downstream = self.experiment.downstream
        if downstream is not None:
            names = rm_names(self.experiment)
            for ppo in downstream.ppo:
                rm = names.get(ppo.rm, ppo.rm)
                calls.append(
                    Invocation(
                        add, [str(ppo.file), "--rm", rm, "--source", ppo.source, "--store", str(store)]
                    )
                )
            for number, record in enumerate(downstream.records, start=1):
                source = ["--source", downstream.source] if downstream.source else []
                if record.suffix.lower() == ".csv":
                    record = translated_csv(
                        record, "rm", names, self.directory / "inputs" / f"records-{number}.csv"
                    )
                calls.append(Invocation(add, [str(record), *source, "--store", str(store)]))
        return calls

    def correlate(self, stage: Stage, run_dirs: Sequence[Path], maps: Sequence[str]) -> Invocation:
        argv: list[str] = []
        for run_dir in run_dirs:
            argv += ["--run", str(run_dir)]
        own = dict(self.experiment.correlate.options) if self.experiment.correlate else {}
        if "k" not in own:
            argv += ["--k", str(stage.config["k"])]
        if "context" not in own:
            for entry in maps:
                argv += ["--map", entry]
        benchmarks = stage.config.get("benchmarks")
        if benchmarks:
            target = self.directory / "inputs" / "benchmarks.csv"
            argv += [
                "--benchmarks",
                str(translated_csv(Path(benchmarks), "rm", rm_names(self.experiment), target)),
            ]
        argv += ["--store", str(self.directory / DOWNSTREAM_FOLDER), "--seed", str(self.experiment.seed)]
        argv += self._options(CORRELATE, own)
        argv += ["--out", str(self.folder(stage))]
        return Invocation(CORRELATE, argv)

    def _finish(self, argv: list[str], out: Path | None, max_cost: float | None, dry_run: bool) -> list[str]:
        if out is not None:
            argv += ["--out", str(out)]
        if max_cost is not None:
            argv += ["--max-cost", f"{max_cost:.6f}"]
        if dry_run:
            argv.append("--dry-run")
        if not self.progress:
            argv.append("--no-progress")
        return argv
