"""An experiment file takes a list of benchmarks: every judge (and the planner) runs once per benchmark, each
reading its own dataset with its card; best-of-N and the correlation stay on Personalized RewardBench; the
report ranks the judges on every benchmark. A benchmark given wrong is one line naming file, line and field."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from prbj.cli import main
from prbj.cli.run import ClickCommandLine
from prbj.errors import ConfigError
from prbj.experiments.schema import load_experiment
from prbj.experiments.stages import CommandBuilder, stage_graph

CLI = ClickCommandLine(main)
ROOT = Path(__file__).resolve().parents[1]
INHOUSE = ROOT / "examples" / "benchmarks" / "inhouse.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.toml"
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def test_each_judge_runs_once_per_benchmark_with_its_dataset(tmp_path: Path) -> None:
    (tmp_path / "cards").mkdir()
    (tmp_path / "cards" / "mine.toml").write_text(INHOUSE.read_text().replace('sample = "inhouse"\n', ""))
    data = INHOUSE.parent / "inhouse" / "feedback.jsonl"
    path = write(
        tmp_path,
        f"""
        [experiment]
        benchmarks = ["prb", "prism", {{card = "cards/mine.toml", dataset = "{data}"}}]

        [[judges]]
        provider = "length"

        [[judges]]
        name = "bm25"
        provider = "bm25-profile"
        """,
    )
    experiment = load_experiment(path, CLI)
    assert [b.label for b in experiment.studied] == ["prb", "prism", "inhouse-support"]
    assert experiment.main.label == "prb" and experiment.dataset == "sample"
    stages = stage_graph(experiment)
    judges = [s.name for s in stages if s.kind == "judge"]
    assert judges == [
        "judge:length@prb", "judge:bm25@prb", "judge:length@prism", "judge:bm25@prism",
        "judge:length@inhouse-support", "judge:bm25@inhouse-support",
    ]  # fmt: skip
    report = next(s for s in stages if s.name == "report")
    assert set(judges) <= set(report.after)
    build = CommandBuilder(experiment, CLI, tmp_path / "out", progress=False)
    argv = build.judge(
        next(s for s in stages if s.name == "judge:bm25@inhouse-support"), max_cost=None, dry_run=False
    )
    assert argv.argv[:7] == [
        "--provider", "bm25-profile", "--dataset", str(data), "--benchmark", str(tmp_path / "cards" / "mine.toml"),
        "--seed",
    ]  # fmt: skip
    prism = build.judge(
        next(s for s in stages if s.name == "judge:length@prism"), max_cost=None, dry_run=False
    )
    assert prism.argv[2:6] == ["--dataset", "sample", "--benchmark", "prism"]
    assert build.folder(next(s for s in stages if s.name == "judge:length@prism")).name == "length_prism"


def test_a_study_of_one_dataset_keeps_its_stage_names_and_commands(tmp_path: Path) -> None:
    experiment = load_experiment(write(tmp_path, '[[judges]]\nprovider = "length"\n'), CLI)
    (stage,) = [s for s in stage_graph(experiment) if s.kind == "judge"]
    assert stage.name == "judge:length" and "benchmark" not in stage.config
    invocation = CommandBuilder(experiment, CLI, tmp_path, progress=False).judge(
        stage, max_cost=None, dry_run=False
    )
    assert "--benchmark" not in invocation.argv


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            'benchmarks = ["prizm"]',
            "study.toml:2: field 'experiment.benchmarks[1].card': --benchmark 'prizm': unknown",
        ),
        ("benchmarks = []", "study.toml:2: field 'experiment.benchmarks': expected a non-empty list"),
        (
            'benchmarks = ["prism", "prism"]',
            "study.toml:2: field 'experiment.benchmarks[2].card': prism is listed",
        ),
        (
            'benchmarks = [{card = "prism", data = "x"}]',
            "field 'experiment.benchmarks[1].data': unknown field",
        ),
        (
            'benchmarks = ["prism"]\ndataset = "sample"',
            "study.toml:3: field 'experiment.dataset': with 'benchmarks'",
        ),
    ],
)
def test_a_benchmark_given_wrong_is_one_line(tmp_path: Path, line: str, expected: str) -> None:
    path = write(tmp_path, f'[experiment]\n{line}\n\n[[judges]]\nprovider = "length"\n')
    with pytest.raises(ConfigError) as caught:
        load_experiment(path, CLI)
    assert expected in str(caught.value).replace(str(path), "study.toml")


def test_best_of_n_needs_personalized_rewardbench_among_the_benchmarks(tmp_path: Path) -> None:
    text = '[experiment]\nbenchmarks = ["prism"]\n\n[bon]\npolicy = "demo"\ngold = "demo"\nrms = ["length"]\n'
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match="field 'bon': best-of-N is graded with PRB's rubric"):
        load_experiment(path, CLI)


def test_the_shipped_benchmarks_study_runs_and_reports_every_benchmark(tmp_path: Path) -> None:
    out = tmp_path / "out"
    study = ROOT / "experiments" / "benchmarks.toml"
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    done = {name for name, record in manifest["stages"].items() if record["state"] == "done"}
    shipped = (
        "prb", "personal-reward-bench", "prism", "persona-feedback", "persona", "personamem", "personal-llm",
        "pal-tldr",
    )  # fmt: skip
    for benchmark in shipped:
        assert f"judge:length@{benchmark}" in done
        (run_dir,) = (out / "judges" / f"length_{benchmark}").iterdir()
        recorded = json.loads((run_dir / "run.json").read_text())["config"]["benchmark"]
        assert recorded["name"] == benchmark
    summary = json.loads((out / "summary.json").read_text())
    assert [b["name"] for b in summary["experiment"]["benchmarks"]] == list(shipped)
    # The report names each run's benchmark.
    report = (out / "report.md").read_text()
    for benchmark in shipped[1:]:
        assert report.count(f"| sample ({benchmark}) |") == 3
    # The table across benchmarks holds every one, with the chance level of each (best of 4 and of 8 beside
    # the pairs' 50%).
    table = next(line for line in report.splitlines() if line.startswith("| — | chance (random pick) |"))
    cells = [cell.strip() for cell in table.split("|")]
    assert cells.count("50.0") == 6 and cells.count("25.0") == 1 and cells.count("12.5") == 1
    assert (
        "Chance level (a judge picking at random; pairs 50%): personamem 25.0% (best of 4); personal-llm"
        in report
    )
