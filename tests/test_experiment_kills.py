"""A `prbj run` killed at random moments in every stage that calls a model, and run again until it ends, gives
the figures of an uninterrupted run, and buys no answer twice: after Ctrl-C (the requests on the wire come back
and are cached) none at all, after SIGKILL at most the requests that were on the wire. Real `prbj` processes,
real HTTP, requests counted at the loopback server."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from experiment_script import STAGE_OF, kind, reply, write_experiment
from loopback import ChatRequest, ProviderServer

from prbj.cli import main

pytestmark = pytest.mark.processes

CONCURRENCY = 4  # the experiment's [defaults] concurrency: requests in flight at most


def env() -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**base, "PYTHONUNBUFFERED": "1"}


def command(experiment: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "prbj", "run", str(experiment), "--out", str(out), "--no-progress"]


def finish(experiment: Path, out: Path) -> None:
    done = subprocess.run(command(experiment, out), capture_output=True, text=True, timeout=300, env=env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def request_key(request: ChatRequest) -> str:
    """What identifies a purchase: the whole request body (model, messages, parameters, seed)."""
    return json.dumps(request.body, sort_keys=True)


CALLING_STAGES = ("planner", "judge:judge-a", "bon-sample", "bon-score", "bon-evaluate")


def running_stage(out: Path) -> str | None:
    path = out / "manifest.json"
    if not path.exists():
        return None
    manifest = json.loads(path.read_text())
    return next((name for name, record in manifest["stages"].items() if record["state"] == "running"), None)


def kill_in(
    target: str, server: ProviderServer, experiment: Path, out: Path, how: signal.Signals, rng: random.Random
) -> str:
    """Start the experiment, wait until `target` (or a later stage that calls a model) is running and sending,
    kill the process a random moment later; the stage the manifest shows running then ("finished" when the
    process ended first)."""
    later = CALLING_STAGES[CALLING_STAGES.index(target) :]
    proc = subprocess.Popen(
        command(experiment, out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env()
    )
    start = len(server.requests)
    deadline = time.monotonic() + 180
    while proc.poll() is None:
        stage = running_stage(out)
        if stage in later and any(STAGE_OF[kind(r)] == stage for r in server.requests[start:]):
            break
        assert time.monotonic() < deadline
        time.sleep(0.005)
    time.sleep(rng.uniform(0.0, 0.3))
    if proc.poll() is not None:
        assert proc.returncode == 0
        return "finished"
    running = running_stage(out) or "between stages"
    proc.send_signal(how)
    proc.wait(timeout=60)
    assert proc.returncode in (130, -signal.SIGKILL), proc.returncode
    return running


def test_killed_runs_resume_to_the_same_figures_without_paying_twice(tmp_path: Path) -> None:
    rng = random.Random(20260101)
    with ProviderServer(reply=reply) as server:
        # Long enough that a stage's calls take about a second, so that kills land inside stages.
        server.latency = 0.2
        reference = write_experiment(
            tmp_path / "reference.toml", url=server.url, cache=tmp_path / "cache-ref", limit=2
        )
        result = CliRunner().invoke(main, ["run", str(reference), "--out", str(tmp_path / "reference")])
        assert result.exit_code == 0, result.output
        uninterrupted = Counter(request_key(r) for r in server.requests)
        assert max(uninterrupted.values()) == 1

        server.reset()
        study = write_experiment(tmp_path / "study.toml", url=server.url, cache=tmp_path / "cache", limit=2)
        out = tmp_path / "study"
        # Ctrl-C once in each stage that calls a model: what is on the wire comes back and is cached.
        interrupted = [kill_in(stage, server, study, out, signal.SIGINT, rng) for stage in CALLING_STAGES]
        assert len(set(interrupted) & set(CALLING_STAGES)) >= 4, interrupted
        bought = Counter(request_key(r) for r in server.requests)
        assert max(bought.values()) == 1, "a request bought twice after Ctrl-C"

        # SIGKILL once more: a request on the wire at that moment is paid and its answer lost, nothing more.
        killed = [kill_in("bon-score", server, study, out, signal.SIGKILL, rng)]
        finish(study, out)
        bought = Counter(request_key(r) for r in server.requests)
        extra = sum(count - 1 for count in bought.values())
        assert extra <= len(killed) * CONCURRENCY
        # Every request of the uninterrupted run was bought, and no other.
        assert set(bought) == set(uninterrupted)

        manifest = json.loads((out / "manifest.json").read_text())
        assert all(record["state"] == "done" for record in manifest["stages"].values())
        assert sum(record["attempts"] > 1 for record in manifest["stages"].values()) >= 2
        ours = json.loads((out / "summary.json").read_text())
        theirs = json.loads((tmp_path / "reference" / "summary.json").read_text())
        # The two files differ in their cache folder only, so in their digest.
        assert ours.pop("experiment")["digest"] != theirs.pop("experiment")["digest"]
        assert ours == theirs and ours["bon"] and ours["accuracy"]
