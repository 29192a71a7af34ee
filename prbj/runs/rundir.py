"""The run directory of `prbj judge`: the one place that knows its file names, writes it and reads it back.

    <run-id>/run.json            how the run was made: command, times, config, judges, dataset, versions, usage
    <run-id>/summary.json        the figures: a pure function of data, judges and seed (byte-identical reruns)
    <run-id>/judgments.parquet   one row per judgment
    <run-id>/planner.jsonl       the planner's aspects per pair, when a planner ran
    <run-id>/personas.jsonl      the synthesizer's persona per user, when the `synthesized` context ran
    <run-id>/report.md, report.html, plots/*.svg   the rendered report
    <run-id>/downstream.parquet  downstream outcomes, when the directory holds some (a prbj BoN run writes them)
    <run-id>/labels.jsonl        human labels of pairs, appended one line at a time by `prbj view`
    <run-id>/labels_agreement.json   their agreement with the benchmark and between reviewers (`prbj build agreement`)
    <run-id>/selective.json      confidence thresholds `prbj calibrate` picked from the run (runs.selective_file)

Analyses and reports never touch these files: they get the runs this module loads (`RunData`) and hand back
what to write. Runs written by other versions of prbj may carry more or fewer columns and fields; the reader
takes what it knows and only insists on what a report cannot do without.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import platform
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

from prbj import __version__
from prbj.analysis.downstream import STORE_FILE, outcomes_frame, read_outcomes
from prbj.analysis.run_data import RunData, result_rows
from prbj.analysis.stats import BOOTSTRAP_RESAMPLES, CONFIDENCE, GroupStats
from prbj.data.files import json_problem, read_json, write_json, write_jsonl, write_parquet, write_text
from prbj.data.labels import Label, checked, parse_label_lines
from prbj.data.loaders import Dataset
from prbj.data.user_columns import with_user_ids
from prbj.errors import DataError
from prbj.export.eee_read import looks_like_eee, read_eee_run
from prbj.report.content import ReportContent
from prbj.report.writer import RenderedReport

RUN_FILE = "run.json"
SUMMARY_FILE = "summary.json"
JUDGMENTS_FILE = "judgments.parquet"
PLANNER_FILE = "planner.jsonl"
PERSONAS_FILE = "personas.jsonl"
MARKDOWN_FILE = "report.md"
HTML_FILE = "report.html"
PLOTS_DIR = "plots"
LABELS_FILE = "labels.jsonl"
LABEL_AGREEMENT_FILE = "labels_agreement.json"
SELECTIVE_FILE = "selective.json"
# Beside a leaderboard of runs on several benchmarks: judges × benchmarks (prbj.analysis.across).
ACROSS_FILES = ("benchmarks.md", "benchmarks.html", "benchmarks.json")
# A run directory holding downstream outcomes holds them as a downstream store does.
DOWNSTREAM_FILE = STORE_FILE

# Columns a report cannot do without; everything else in judgments.parquet is optional.
REQUIRED_JUDGMENT_COLUMNS = frozenset({"pair_id", "subset", "judge", "context", "status", "correct"})

# Packages whose versions a run records, when installed: the ones that can change a figure.
_RECORDED_PACKAGES = ("polars", "numpy", "litellm", "wordllama", "torch", "transformers")


@dataclass(frozen=True)
class ReportFiles:
    markdown: Path
    html: Path
    plots: list[Path]
    content: ReportContent


def package_versions() -> dict[str, str]:
    versions = {"prbj": __version__, "python": platform.python_version()}
    for package in _RECORDED_PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions


# Writing -----------------------------------------------------------------------------------------------------


def new_run_dir(out_dir: Path, started: datetime, config_hash: str, *, prefix: str = "") -> Path:
    """A fresh `<out_dir>/<prefix><yyyymmdd-hhmmss>-<hash>[-n]` folder, created here so two runs never share
    one."""
    stem = f"{prefix}{started:%Y%m%d-%H%M%S}-{config_hash}"
    candidate = out_dir / stem
    suffix = 1
    while candidate.exists():
        suffix += 1
        candidate = out_dir / f"{stem}-{suffix}"
    candidate.mkdir(parents=True)
    return candidate


def dataset_record(dataset: Dataset) -> dict[str, Any]:
    """What a run records of its data; a selection (--subset, --limit) also names the dataset it was taken
    from, so that `prbj diff` can compare it with a run on the whole of it, pair by pair."""
    record: dict[str, Any] = {
        "source": dataset.source,
        "fingerprint": dataset.fingerprint(),
        "n_pairs": len(dataset.pairs),
        "subsets": dataset.subsets,
    }
    if dataset.selected_from is not None:
        record["source_fingerprint"] = dataset.selected_from
    return record


def summary_document(
    dataset: Dataset, seed: int, results: Sequence[GroupStats], *, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The content of summary.json: a pure function of data, judges and seed (no times, no paths), so that
    two runs with the same inputs produce identical files. `extra` holds the figures beyond accuracy a run
    asked for (prbj.analysis.beyond), after `results`; without them the document is what it always was."""
    return {
        "prbj_version": __version__,
        "dataset": dataset_record(dataset),
        "seed": seed,
        "bootstrap": {"resamples": BOOTSTRAP_RESAMPLES, "confidence": CONFIDENCE},
        "results": [row.as_dict() for row in results],
        **(extra or {}),
    }


def run_document(
    run_dir: Path,
    *,
    started: datetime,
    finished: datetime,
    config: dict[str, Any],
    judges: list[dict[str, Any]],
    dataset: Dataset,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The content of run.json for `prbj judge`."""
    return {
        "run_id": run_dir.name,
        "command": "judge",
        "started": started.isoformat(timespec="seconds"),
        "finished": finished.isoformat(timespec="seconds"),
        "config": config,
        "judges": judges,
        "dataset": dataset_record(dataset),
        "versions": package_versions(),
        **(extra or {}),
    }


def write_run(run: RunData) -> None:
    """run.json, judgments.parquet, then summary.json: a folder with summary.json is a complete run."""
    write_json(run.run_dir / RUN_FILE, run.run)
    write_parquet(run.run_dir / JUDGMENTS_FILE, run.judgments)
    write_json(run.run_dir / SUMMARY_FILE, run.summary)


def write_planner_outputs(run_dir: Path, records: Iterable[dict[str, Any]]) -> Path:
    return write_jsonl(run_dir / PLANNER_FILE, records)


def write_personas(run_dir: Path, records: Iterable[dict[str, Any]]) -> Path:
    return write_jsonl(run_dir / PERSONAS_FILE, records)


def write_report(target: Path, rendered: RenderedReport) -> ReportFiles:
    """report.md, report.html and plots/*.svg in `target` (a run directory or a leaderboard folder)."""
    plots_dir = target / PLOTS_DIR
    plots_dir.mkdir(parents=True, exist_ok=True)
    plots = [write_text(plots_dir / f"{name}.svg", svg) for name, svg in rendered.plots.items()]
    markdown = write_text(target / MARKDOWN_FILE, rendered.markdown)
    html = write_text(target / HTML_FILE, rendered.html)
    return ReportFiles(markdown, html, plots, rendered.content)


def write_across(target: Path, markdown: str, html: str, document: dict[str, Any]) -> tuple[Path, Path, Path]:
    """benchmarks.md, benchmarks.html and benchmarks.json in `target` (a leaderboard folder)."""
    target.mkdir(parents=True, exist_ok=True)
    md_name, html_name, json_name = ACROSS_FILES
    return (
        write_text(target / md_name, markdown),
        write_text(target / html_name, html),
        write_json(target / json_name, document),
    )


# Reading -----------------------------------------------------------------------------------------------------


# What the other commands' directories are, by the `command` their run.json records: read by the commands that
# take judge runs, so that a BoN or build directory is named for what it is rather than misread.
OTHER_KINDS = {
    "bon": "a best-of-N run directory (prbj bon), not a judge run: prbj bon evaluate reports on it and "
    "prbj downstream add reads its outcomes",
    "build": "a build directory (prbj build), not a judge run: judge its pairs with prbj judge --dataset "
    "DIR/pairs.jsonl",
    "experiment": "an experiment directory (prbj run), not a judge run: its judge runs are under judges/",
}
# What `prbj run` keeps at the top of an experiment directory (beside a summary.json of its own figures).
EXPERIMENT_MANIFEST_FILE = "manifest.json"


def run_kind(path: Path) -> str | None:
    """ "judge" for a judge run (an Every Eval Ever aggregate file is one: prbj.export.eee_read), "bon",
    "build" or "experiment" for those commands' directories, None for anything else."""
    if looks_like_eee(path):
        return "judge"
    if not path.is_dir():
        return None
    run_path = path / RUN_FILE
    if run_path.is_file():
        try:
            command = read_json(run_path).get("command")
        except (DataError, AttributeError):  # unreadable, or not an object: judged by its files below
            command = None
        if command in OTHER_KINDS:
            return str(command)
    elif (path / EXPERIMENT_MANIFEST_FILE).is_file():
        return "experiment"
    return "judge" if (path / SUMMARY_FILE).exists() else None


def is_run_dir(path: Path) -> bool:
    return run_kind(path) == "judge"


def find_run_dirs(folder: Path, *, also: Callable[[Path], bool] | None = None) -> list[Path]:
    """The judge run directories under `folder` at any depth (`--out reports/sure`, an experiment's
    judges/<name>/<run-id>), and the folders `also` accepts, in path order. It never looks inside a run, a
    best-of-N or a build directory, a hidden folder or a symbolic link."""
    found: list[Path] = []
    for current, folders, _files in os.walk(folder):
        here = Path(current)
        kept = []
        for name in sorted(folders):
            path = here / name
            if name.startswith(".") or path.is_symlink():
                continue
            kind = run_kind(path)
            if kind == "judge" or (also is not None and also(path)):
                found.append(path)
            elif kind in (None, "experiment"):
                kept.append(name)
        folders[:] = kept
    return sorted(found)


def select_run_dirs(
    paths: Sequence[Path], note: Callable[[str], None], *, also: Callable[[Path], bool] | None = None
) -> list[Path]:
    """The runs the paths name: a run directory as given, any other folder as the runs under it at any depth
    (reports/, an experiment directory). Every path must exist. With several paths (a shell glob over
    reports/*), those holding no judge run, such as reports/baselines, an earlier leaderboard or a BoN run, are
    skipped with a `note`; a lone path that holds none is an error."""
    for path in paths:
        if not path.exists():
            raise DataError(f"{path}: no such run directory")
    runs: list[Path] = []
    for path in paths:
        kind = run_kind(path)
        if kind == "judge" or (also is not None and also(path)):
            runs.append(path)
            continue
        found = find_run_dirs(path, also=also) if kind in (None, "experiment") else []
        if found:
            runs += found
            continue
        if kind in OTHER_KINDS:
            why = OTHER_KINDS[kind]
        else:
            why = f"not a run directory ({SUMMARY_FILE} missing)"
            why += ", and no run directory under it" if path.is_dir() else ""
        if len(paths) == 1:
            raise DataError(f"{path}: {why}")
        note(f"skipped {path}: {why}")
    if not runs:
        raise DataError(f"none of the {len(paths)} paths is or holds a judge run directory")
    return runs


@dataclass(frozen=True)
class RunHeader:
    """What a run directory says about itself without its judgments: enough to list and rank it."""

    run_dir: Path
    run_id: str
    run: dict[str, Any]
    summary: dict[str, Any]
    results: list[GroupStats]

    @property
    def dataset(self) -> dict[str, Any]:
        return self.summary.get("dataset") or self.run.get("dataset") or {}


def load_run_header(run_dir: Path) -> RunHeader:
    run_dir = Path(run_dir)
    if looks_like_eee(run_dir):
        published = read_eee_run(run_dir)
        return RunHeader(run_dir, published.run_id, published.run, published.summary, published.results)
    if not run_dir.is_dir():
        raise DataError(f"{run_dir}: not a run directory (no such folder)")
    kind = run_kind(run_dir)
    if kind in OTHER_KINDS:
        raise DataError(f"{run_dir}: {OTHER_KINDS[kind]}")
    summary_path = run_dir / SUMMARY_FILE
    if not summary_path.exists():
        raise DataError(f"{run_dir}: not a run directory (no {SUMMARY_FILE})")
    summary = read_json(summary_path)
    results = result_rows(summary, summary_path)
    run_path = run_dir / RUN_FILE
    run = read_json(run_path) if run_path.exists() else {}
    if not isinstance(run, dict):
        raise DataError(f"{run_path}: expected a JSON object")
    return RunHeader(run_dir, str(run.get("run_id") or run_dir.name), run, summary, results)


def load_run(run_dir: Path) -> RunData:
    if looks_like_eee(Path(run_dir)):
        return read_eee_run(Path(run_dir))
    header = load_run_header(run_dir)
    return RunData(
        run_dir=header.run_dir,
        run_id=header.run_id,
        run=header.run,
        summary=header.summary,
        results=header.results,
        judgments=_read_judgments(header.run_dir / JUDGMENTS_FILE),
        downstream=load_downstream(header.run_dir),
    )


def _read_judgments(path: Path) -> pl.DataFrame:
    if not path.exists():
        raise DataError(f"{path.parent}: {path.name} missing")
    try:
        judgments = pl.read_parquet(path)
    except Exception as err:  # polars raises several error types for damaged files
        raise DataError(f"{path}: cannot read: {err}") from None
    missing = REQUIRED_JUDGMENT_COLUMNS - set(judgments.columns)
    if missing:
        raise DataError(f"{path}: missing columns {', '.join(sorted(missing))}")
    # A run from before users were recorded: each pair is its own user.
    return with_user_ids(judgments)


def load_downstream(run_dir: Path) -> pl.DataFrame | None:
    """Downstream outcomes a run directory holds, in the table format of `prbj downstream` (docs/downstream.md):
    columns rm, source, subset, k, score, n, std, origin."""
    path = run_dir / DOWNSTREAM_FILE
    return read_downstream(path) if path.exists() else None


def read_downstream(path: Path) -> pl.DataFrame:
    """Any input `prbj downstream add` reads without --rm: a store folder, a downstream .parquet, or CSV/JSON
    records with rm, subset, score (source, k, n, std optional)."""
    return outcomes_frame(read_outcomes(Path(path)))


def read_planner_outputs(run_dir: Path) -> dict[str, list[str]]:
    """The planner's aspects per pair id, when a planner ran (else empty). Lines that hold no aspects are left
    out: the pair's judgment says why (planner_error)."""
    path = Path(run_dir) / PLANNER_FILE
    if not path.is_file():
        return {}
    aspects: dict[str, list[str]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{number}: invalid JSON: {json_problem(err, with_line=False)}") from None
        listed = record.get("aspects") if isinstance(record, dict) else None
        if isinstance(record, dict) and isinstance(record.get("pair_id"), str) and isinstance(listed, list):
            aspects[record["pair_id"]] = [str(a) for a in listed]
    return aspects


# Labels ------------------------------------------------------------------------------------------------------


def read_labels(run_dir: Path) -> list[Label]:
    """Every label written to the run, oldest first (empty when none was); a malformed line is a DataError
    naming the file and line."""
    path = Path(run_dir) / LABELS_FILE
    try:
        fd = _open_labels(path, os.O_RDONLY)
    except FileNotFoundError:
        return []
    try:
        with os.fdopen(fd, "rb") as file:
            text = file.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot read: {err}") from None
    return parse_label_lines(str(path), text)


def _open_labels(path: Path, flags: int) -> int:
    """A descriptor on the run's own labels file: a regular file of one name. A symbolic link is not followed
    (O_NOFOLLOW: a run from elsewhere could point it at any file its reader may write, which the torn-line cut
    would truncate), and a FIFO, device, folder or a file with other names (a hard link) is refused: one line
    (DataError) naming the file. FileNotFoundError when there is none (and `flags` do not create it)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except FileNotFoundError:
        raise
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.EISDIR):
            kind = "a symbolic link" if err.errno == errno.ELOOP else "a folder"
            raise DataError(f"{path}: {kind}, not the run's own labels file; refused") from None
        raise DataError(f"{path}: cannot open: {err.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        kind = "has other names (a hard link)" if stat.S_ISREG(info.st_mode) else "not a regular file"
        raise DataError(f"{path}: {kind}, not the run's own labels file; refused")
    # Back to blocking reads and writes: O_NONBLOCK only kept the open itself from waiting on a FIFO.
    os.set_blocking(fd, True)
    return fd


def append_label(run_dir: Path, label: Label) -> Path:
    """Add one label as one line, the only write prbj makes to a finished run. The line goes out in a single
    O_APPEND write under an exclusive lock, so two writers never interleave; a line an earlier writer left
    unfinished (it died mid-write; readers never counted it) is cut off first. A label the reader would refuse
    is a DataError, and nothing is written; so is a labels file that is not the run's own regular file."""
    path = Path(run_dir) / LABELS_FILE
    data = checked(label, f"{path}: the label to write").line().encode("utf-8")
    fd = _open_labels(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            _cut_torn_line(fd, size)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the lock
    return path


def _cut_torn_line(fd: int, size: int) -> None:
    start = max(0, size - 1_000_000)
    tail = os.pread(fd, size - start, start)
    cut = tail.rfind(b"\n")
    os.ftruncate(fd, start + cut + 1 if cut >= 0 else start)


def write_label_agreement(run_dir: Path, report: dict[str, Any]) -> Path:
    return write_json(Path(run_dir) / LABEL_AGREEMENT_FILE, report)


# What a run directory is made of: the only files the viewer hands out (a folder given to it may be any folder).
RUN_FILES = frozenset(
    {
        RUN_FILE,
        SUMMARY_FILE,
        JUDGMENTS_FILE,
        PLANNER_FILE,
        MARKDOWN_FILE,
        HTML_FILE,
        LABELS_FILE,
        LABEL_AGREEMENT_FILE,
        SELECTIVE_FILE,
        DOWNSTREAM_FILE,
    }
)
PLOT_SUFFIX = ".svg"


def is_run_file_name(relative: str) -> bool:
    """Whether a relative path names one of the files a run directory is made of (RUN_FILES, plots/*.svg)."""
    if relative in RUN_FILES:
        return True
    folder, _, name = relative.partition("/")
    return (
        folder == PLOTS_DIR
        and "/" not in name
        and name.endswith(PLOT_SUFFIX)
        and len(name) > len(PLOT_SUFFIX)
    )


def run_file(run_dir: Path, relative: str) -> Path | None:
    """A file of the judge run directory `run_dir` named by a relative path from a URL, or None: when the folder
    is not a judge run, when the name is not one of the files a run is made of (is_run_file_name), or when it
    leaves the directory (`..`, an absolute path, a symlink at any level that points outside). Regular files
    only."""
    if not relative or "\x00" in relative or not is_run_file_name(relative) or not is_run_dir(Path(run_dir)):
        return None
    root = Path(run_dir).resolve()
    try:
        target = (root / relative).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not target.is_relative_to(root) or not target.is_file():
        return None
    return target
