"""`prbj run` end to end against the loopback provider (real HTTP, LiteLLM's real client stack): planner, an
LLM judge with planner aspects, offline judges, best-of-N with an LLM policy, reward model and gold judge,
downstream, correlation and report. Requests are counted at the server, by what asked for them."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from experiment_script import STAGE_OF, kind, reply, write_experiment
from loopback import ProviderServer

from prbj.cli import main
from prbj.cli.run import ClickCommandLine
from prbj.experiments.dry_run import plan_stages
from prbj.experiments.manifest import Manifest
from prbj.experiments.runner import Runner, RunOptions
from prbj.experiments.schema import load_experiment


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer(reply=reply) as running:
        yield running


@dataclass
class Study:
    root: Path
    server: ProviderServer
    file: Path

    @classmethod
    def make(cls, root: Path, server: ProviderServer, judge_extra: str = "") -> Study:
        root.mkdir(parents=True, exist_ok=True)
        study = cls(root, server, root / "loop.toml")
        study.write(judge_extra)
        return study

    def write(self, judge_extra: str = "") -> None:
        write_experiment(self.file, url=self.server.url, cache=self.root / "cache", judge_extra=judge_extra)

    @property
    def out(self) -> Path:
        return self.root / "experiment"

    def run(self, *args: str) -> str:
        result = CliRunner().invoke(main, ["run", str(self.file), "--out", str(self.out), *args])
        assert result.exit_code == 0, result.output
        return result.output

    def plan(self) -> dict[str, tuple[int, bool]]:
        runner = Runner(load_experiment(self.file, ClickCommandLine(main)), ClickCommandLine(main), self.out,
                        options=RunOptions(dry_run=True, progress=False))  # fmt: skip
        plans, _, _ = plan_stages(runner)
        return {stage.name: (usage.planned_calls, usage.bound) for stage, usage in plans}

    def manifest(self) -> Manifest:
        found = Manifest.read(self.out)
        assert found is not None
        return found

    def sent_by_stage(self, since: int = 0) -> Counter[str]:
        return Counter(STAGE_OF[kind(r)] for r in self.server.requests[since:])


def test_dry_run_counts_equal_the_calls_the_run_makes(server: ProviderServer, tmp_path: Path) -> None:
    study = Study.make(tmp_path / "fresh", server)
    server.reset()
    plan = study.plan()
    assert not server.requests, "a dry run sends nothing"
    study.run()
    calls = {name: record.calls_sent for name, record in study.manifest().stages.items()}
    sent = study.sent_by_stage()
    # Planner aspects are bought once, by the planner stage: the judge stage that shows them plans none.
    assert plan["planner"] == (3, False) and plan["judge:judge-a"] == (6, False)
    for stage in ("planner", "judge:judge-a", "bon-sample", "bon-score"):
        assert plan[stage][0] == calls[stage] == sent[stage], stage
    assert plan["bon-score"][1], "scores of samples not yet written are an upper bound"
    # Gold grades depend on the picks: before they exist the plan is an upper bound...
    assert (
        plan["bon-evaluate"][1]
        and plan["bon-evaluate"][0] >= calls["bon-evaluate"] == sent["bon-evaluate"] > 0
    )
    assert all(
        calls[name] == 0 for name in ("judge:random", "judge:length", "judge:bm25-profile", "correlate")
    )

    # ... and exact once they do: a second study, stage by stage up to the picks, then the plan, then the rest.
    second = Study.make(tmp_path / "staged", server)
    for stage in ("planner", "judge:random", "judge:length", "judge:bm25-profile", "judge:judge-a", "bon-sample",
                  "bon-score"):  # fmt: skip
        second.run("--stage", stage)
    before = len(server.requests)
    planned = second.plan()
    assert len(server.requests) == before
    assert planned["bon-evaluate"][1] is False, "the picks exist: the count is exact"
    second.run()
    assert (
        planned["bon-evaluate"][0]
        == second.manifest().stages["bon-evaluate"].calls_sent
        == calls["bon-evaluate"]
    )


@pytest.fixture(scope="module")
def finished(server: ProviderServer, tmp_path_factory: pytest.TempPathFactory) -> Study:
    study = Study.make(tmp_path_factory.mktemp("edit"), server)
    study.run()
    return study


def test_a_rerun_of_a_finished_experiment_sends_nothing(finished: Study) -> None:
    before = len(finished.server.requests)
    first = {name: (r.finished, r.run_dirs) for name, r in finished.manifest().stages.items()}
    output = finished.run()
    assert len(finished.server.requests) == before
    assert {name: (r.finished, r.run_dirs) for name, r in finished.manifest().stages.items()} == first
    assert output.count("up to date") == len(first)


def test_editing_one_judge_reruns_only_that_judge_and_the_stages_after_it(finished: Study) -> None:
    before = {name: (r.finished, r.run_dirs, r.outputs) for name, r in finished.manifest().stages.items()}
    summary_before = json.loads((finished.out / "summary.json").read_text())
    finished.write('order = "both"')
    planned = finished.plan()
    sent_before = len(finished.server.requests)
    output = finished.run()
    after = {name: (r.finished, r.run_dirs, r.outputs) for name, r in finished.manifest().stages.items()}
    # What the run says it skipped; the manifest's times are whole seconds, and a run of this size can finish
    # within the second of the one before it, so they cannot tell a rerun stage from a skipped one.
    rerun = {name for name in before if f"{name}: up to date" not in output}
    assert rerun == {"judge:judge-a", "correlate", "report"}
    assert before["judge:judge-a"][1] != after["judge:judge-a"][1], (
        "the edited judge writes a new run directory"
    )
    assert all(before[name] == after[name] for name in before if name not in rerun)
    # Only the edited judge's new calls were bought (the answers in the other order); the planner's came from
    # the cache, and the dry run counted exactly those.
    new = finished.sent_by_stage(sent_before)
    assert set(new) == {"judge:judge-a"}
    assert new["judge:judge-a"] == planned["judge:judge-a"][0] == 6
    summary_after = json.loads((finished.out / "summary.json").read_text())
    old_rows = {(r["entry"], r["context"], r["subset"]): r for r in summary_before["accuracy"]}
    new_rows = {(r["entry"], r["context"], r["subset"]): r for r in summary_after["accuracy"]}
    assert old_rows.keys() == new_rows.keys()
    for key, row in new_rows.items():
        if key[0] != "judge-a":
            assert row == old_rows[key], key
    # The judge that always answers "A" is right only where the chosen answer was shown first: in both orders
    # it is never right on a pair.
    assert all(row["accuracy"] == 0 for key, row in new_rows.items() if key[0] == "judge-a")


def test_status_prints_every_stage_and_marks_edited_ones(finished: Study) -> None:
    finished.write('order = "random"\nrepair = true')
    output = finished.run("--status")
    stages = ("judge:", "bon-", "planner")
    lines = {line.split()[0]: line for line in output.splitlines() if line.strip().startswith(stages)}
    assert "changed" in lines["judge:judge-a"]
    assert "unchanged" in lines["judge:length"] and "unchanged" in lines["bon-evaluate"]
