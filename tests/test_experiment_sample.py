"""experiments/sample.toml end to end, offline, on the bundled sample: its figures equal those of the same prbj
commands typed one by one (judge runs, best-of-N, correlation), and the experiment's own figures and claims are
computed from them. The tiny reward models score 60 pairs three times, so this takes about a minute: slow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from prbj.cli import main

pytestmark = pytest.mark.slow

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"
BASELINES = ("random", "length", "bm25-profile", "embed-profile")
TINY = tuple(f"hf:{EXPERIMENTS / 'models' / name}" for name in ("tiny-rm-s", "tiny-rm-m", "tiny-rm-l"))


def prbj(*args: str) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def only_run(folder: Path) -> Path:
    (run,) = [p for p in folder.iterdir() if p.is_dir()]
    return run


def test_the_sample_experiment_equals_its_commands_run_one_by_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PRBJ_CACHE_DIR", str(tmp_path / "cache-experiment"))
    experiment = tmp_path / "experiment"
    prbj("run", EXPERIMENTS / "sample.toml", "--out", experiment, "--no-progress")
    manifest = json.loads((experiment / "manifest.json").read_text())
    assert all(record["state"] == "done" for record in manifest["stages"].values())

    # The same study by hand, into another folder with another cache.
    monkeypatch.setenv("PRBJ_CACHE_DIR", str(tmp_path / "cache-by-hand"))
    hand = tmp_path / "by-hand"
    runs = {}
    for name in BASELINES:
        prbj("judge", "-p", name, "--dataset", "sample", "--seed", 42, "--out", hand / name, "--no-progress")
        runs[name] = only_run(hand / name)
    for name in TINY:
        folder = hand / Path(name).name
        prbj("judge", "-p", name, "--context", "none", "--context", "profile", "--seed", 42, "--out", folder,
             "--no-progress")  # fmt: skip
        runs[name] = only_run(folder)
    prbj("bon", "sample", "--policy", "demo", "--n", 8, "--dataset", "sample", "--seed", 42, "--out", hand / "bon",
         "--no-progress")  # fmt: skip
    bon = only_run(hand / "bon")
    rms = [arg for rm in (*BASELINES, *TINY) for arg in ("-p", rm)]
    prbj("bon", "score", bon, *rms, "--seed", 42, "--no-progress")
    prbj("bon", "evaluate", bon, "--gold", "demo", "--seed", 42, "--no-progress")
    prbj("downstream", "add", bon, "--store", hand / "downstream")
    benchmarks = (EXPERIMENTS / "sample-benchmarks.csv").read_text()
    for name in TINY:  # the CSV names the tiny RMs by their entries' names; by hand, by their judge names
        benchmarks = benchmarks.replace(f"{Path(name).name},", f"{name},")
    (hand / "benchmarks.csv").write_text(benchmarks)
    maps = [arg for name in TINY for arg in ("--map", f"{name}@profile={name}@profile")]
    run_args = [arg for run in runs.values() for arg in ("--run", run)]
    prbj("correlate", *run_args, *maps, "--benchmarks", hand / "benchmarks.csv", "--store", hand / "downstream",
         "--k", "max", "--seed", 42, "--out", hand / "correlation")  # fmt: skip

    # Judge runs: summary.json is a pure function of data, judges and seed: byte for byte the same.
    names = {
        "random": "random",
        "length": "length",
        "bm25-profile": "bm25-profile",
        "embed-profile": "embed-profile",
    }
    names |= {name: Path(name).name for name in TINY}
    for name, run in runs.items():
        (mine,) = [p for p in (experiment / "judges" / names[name]).iterdir() if p.is_dir()]
        assert (mine / "summary.json").read_bytes() == (run / "summary.json").read_bytes(), name
    # Best-of-N curves, and the correlation table.
    (my_bon,) = [p for p in (experiment / "bon").iterdir() if p.is_dir()]
    assert (
        json.loads((my_bon / "summary.json").read_text())["results"]
        == json.loads((bon / "summary.json").read_text())["results"]
    )
    ours = json.loads((experiment / "correlation" / "correlation.json").read_text())
    theirs = json.loads((hand / "correlation" / "correlation.json").read_text())
    assert ours["comparisons"] == theirs["comparisons"] and ours["comparisons"]

    # The experiment's own figures come from those runs: its accuracy table is theirs, row for row.
    summary = json.loads((experiment / "summary.json").read_text())
    by_hand = {
        (row["judge"], row["context"], row["subset"]): row["accuracy"]
        for run in runs.values()
        for row in json.loads((run / "summary.json").read_text())["results"]
    }
    assert {(r["judge"], r["context"], r["subset"]): r["accuracy"] for r in summary["accuracy"]} == by_hand
    assert summary["bon"] == json.loads((bon / "summary.json").read_text())["results"]
    assert [c["key"] for c in summary["claims"]] == ["a", "b", "c", "d", "e"]
    verdicts = {c["key"]: c["verdict"] for c in summary["claims"]}
    assert verdicts["a"] == verdicts["d"] == "not tested"  # no oracle context, no planner offline
    assert verdicts["b"] != "not tested" and verdicts["c"] != "not tested" and verdicts["e"] != "not tested"
    assert len(summary["parameters"]["points"]) == 3
    report = (experiment / "report.html").read_text()
    for section in (
        "Claims",
        "Accuracy against parameter count",
        "Context effects",
        "Downstream correlation",
    ):
        assert section in report
