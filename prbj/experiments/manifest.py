"""manifest.json of an experiment directory: the experiment's hash, and per stage its state, the hash of its
inputs, what it produced (run directories, a digest of its figures), its calls and cost.

It is rewritten atomically (prbj.data.files) after every change of state, so a `prbj run` killed at any
moment leaves the last consistent manifest: a stage recorded `running` was interrupted and runs again (the
response cache makes its calls free); a stage recorded `done` whose inputs hash the same is skipped. The file
comes from disk, so it is read as untrusted input: anything malformed is a one-line error naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from prbj import __version__
from prbj.data.files import read_json, write_json
from prbj.errors import DataError
from prbj.runs.rundir import EXPERIMENT_MANIFEST_FILE as MANIFEST_FILE

State = Literal["running", "done", "failed", "waiting"]
STATES: tuple[str, ...] = ("running", "done", "failed", "waiting")


@dataclass
class StageRecord:
    state: State
    inputs: str
    outputs: str = ""
    run_dirs: list[str] = field(default_factory=list)
    started: str = ""
    finished: str = ""
    exit_code: int | None = None
    calls_sent: int = 0
    cache_hits: int = 0
    cost_usd: float = 0.0
    # How many times the stage was started with these inputs (more than one: it was resumed).
    attempts: int = 1

    @classmethod
    def parse(cls, name: str, raw: Any, path: Path) -> StageRecord:
        where = f"{path}: field 'stages.{name}'"
        if (
            not isinstance(raw, dict)
            or raw.get("state") not in STATES
            or not isinstance(raw.get("inputs"), str)
        ):
            raise DataError(f"{where}: not a stage record (state, inputs); delete the file to start over")
        known = {key: raw[key] for key in cls.__dataclass_fields__ if key in raw}
        try:
            record = cls(**known)
        except TypeError as err:
            raise DataError(f"{where}: {err}") from None
        if not isinstance(record.run_dirs, list) or not all(isinstance(d, str) for d in record.run_dirs):
            raise DataError(f"{where}.run_dirs: expected a list of folders")
        if not isinstance(record.cost_usd, int | float) or record.cost_usd < 0:
            raise DataError(f"{where}.cost_usd: expected a non-negative number")
        return record


@dataclass
class Manifest:
    path: Path
    experiment: dict[str, Any]
    stages: dict[str, StageRecord] = field(default_factory=dict)
    # Everything the experiment ever spent, reruns of edited stages included: what the total cap is held to.
    spent_usd: float = 0.0

    @classmethod
    def open(cls, directory: Path, experiment: dict[str, Any]) -> Manifest:
        path = directory / MANIFEST_FILE
        if not path.exists():
            return cls(path, experiment)
        raw = read_json(path)
        if not isinstance(raw, dict) or not isinstance(raw.get("stages", {}), dict):
            raise DataError(f"{path}: not an experiment manifest; delete it to start over")
        stages = {
            name: StageRecord.parse(name, record, path) for name, record in raw.get("stages", {}).items()
        }
        inside = directory.resolve()
        for name, record in stages.items():
            for folder in record.run_dirs:
                # Stages read, and rewrite files in, the folders recorded here: never one outside the experiment.
                if not (directory / folder).resolve().is_relative_to(inside):
                    raise DataError(
                        f"{path}: field 'stages.{name}.run_dirs': {folder} is outside {directory}"
                    )
        spent = raw.get("spent_usd", 0.0)
        if isinstance(spent, bool) or not isinstance(spent, int | float) or not spent >= 0:
            raise DataError(f"{path}: field 'spent_usd': expected a non-negative number")
        return cls(path, experiment, stages, float(spent))

    @classmethod
    def read(cls, directory: Path) -> Manifest | None:
        path = directory / MANIFEST_FILE
        if not path.exists():
            return None
        raw = read_json(path)
        experiment = raw.get("experiment", {}) if isinstance(raw, dict) else {}
        return cls.open(directory, experiment if isinstance(experiment, dict) else {})

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json(
            self.path,
            {
                "prbj_version": __version__,
                "experiment": self.experiment,
                "cost_usd": self.cost_usd(),
                "spent_usd": self.spent_usd,
                "stages": {name: asdict(record) for name, record in self.stages.items()},
            },
        )

    def folders(self, name: str) -> list[Path]:
        """The output folders (or files) of stage `name`, recorded relative to the experiment directory."""
        record = self.stages.get(name)
        return [self.path.parent / folder for folder in record.run_dirs] if record is not None else []

    def relative(self, paths: list[Path]) -> list[str]:
        directory = self.path.parent.resolve()
        return [str(Path(p).resolve().relative_to(directory)) for p in paths]

    def cost_usd(self) -> float:
        """What the stages as they stand cost (a stage rerun after an edit counts its new run only)."""
        return sum(r.cost_usd for r in self.stages.values())

    def start(self, name: str, inputs: str) -> StageRecord:
        previous = self.stages.get(name)
        resumed = previous is not None and previous.inputs == inputs and previous.state != "done"
        record = StageRecord(
            state="running",
            inputs=inputs,
            started=now(),
            attempts=previous.attempts + 1 if resumed and previous is not None else 1,
            # Money already spent on these inputs stays counted against the caps.
            cost_usd=previous.cost_usd if resumed and previous is not None else 0.0,
            calls_sent=previous.calls_sent if resumed and previous is not None else 0,
        )
        self.stages[name] = record
        self.save()
        return record

    def forget(self, names: set[str]) -> None:
        """Drop stages the experiment no longer has."""
        for name in [n for n in self.stages if n not in names]:
            del self.stages[name]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def experiment_run_dirs(paths: list[Path], is_run: Callable[[Path], bool]) -> list[Path]:
    """Each path as given, except an experiment folder (one with a manifest.json), which stands for every run
    its stages made that `is_run` accepts (the judge runs), in stage order."""
    out: list[Path] = []
    for path in paths:
        manifest = Manifest.read(path) if path.is_dir() and not is_run(path) else None
        if manifest is None:
            out.append(path)
            continue
        found = [folder for name in manifest.stages for folder in manifest.folders(name) if is_run(folder)]
        if not found:
            raise DataError(f"{path}: an experiment folder with no judge run yet (run it with prbj run)")
        out += found
    return out
