"""Issue 44 item 6: a run talks to its provider and to nothing else. LiteLLM fetches its price map from GitHub
when imported without LITELLM_LOCAL_MODEL_COST_MAP=True (an outbound call under every privacy policy, a stall
offline, prices that change under a run): every LiteLLM import goes through prbj.llm.litellm_setup, which sets
it first. Checked two ways: no module of prbj imports LiteLLM anywhere else, and a real `prbj judge` (its own
process, LiteLLM imported fresh, no model facts remembered) against the loopback provider opens sockets to that
provider only, as Python's audit hooks report every connect and name lookup."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from loopback import ProviderServer
from test_generative import DUMMY_KEYS, PROVIDERS, records, unpaced_profiles

from conftest import write_jsonl

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "prbj" / "llm" / "litellm_setup.py"
# Runs the real CLI with an audit hook that records every socket connect and name lookup of the process.
RECORDING = """
import json, os, sys
log = open(os.environ["PRBJ_TEST_NET_LOG"], "a", encoding="utf-8")
def hook(event, args):
    if event == "socket.connect":
        address = args[1]
        log.write(json.dumps(["connect", list(address) if isinstance(address, tuple) else str(address)]) + "\\n")
        log.flush()
    elif event == "socket.getaddrinfo":
        log.write(json.dumps(["lookup", str(args[0]), str(args[1])]) + "\\n")
        log.flush()
sys.addaudithook(hook)
from prbj.cli import main
main()
"""


def test_only_the_setup_module_imports_litellm() -> None:
    found = []
    for path in sorted((ROOT / "prbj").rglob("*.py")):
        if path == SETUP:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno}" for name in names if name.split(".")[0] == "litellm"
            ]
    assert found == [], "import LiteLLM through prbj.llm.litellm_setup (litellm(), litellm_part()): " + str(
        found
    )


@pytest.mark.processes
def test_a_run_connects_to_its_provider_only(tmp_path: Path) -> None:
    """Two runs sharing the remembered model-map facts, the second with another --reasoning-effort: it finds the
    models' facts remembered (no LiteLLM import for them) but not how LiteLLM maps the new parameters, so its
    first LiteLLM import is the parameter mapping's, in the middle of settling the run's providers."""
    wrapper = tmp_path / "recording.py"
    wrapper.write_text(RECORDING, encoding="utf-8")
    dataset = write_jsonl(tmp_path / "pairs.jsonl", records(2))
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    env |= DUMMY_KEYS | {
        "PYTHONPATH": str(ROOT),
        "PRBJ_MODEL_MAP_CACHE": str(tmp_path / "model-map.json"),
        "PRBJ_CACHE_DIR": str(tmp_path / "cache"),
        "HOME": str(tmp_path),
    }
    providers = unpaced_profiles(tmp_path / "providers")
    with ProviderServer() as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        for run, effort in enumerate(("low", "medium")):
            log = tmp_path / f"net-{run}.jsonl"
            command = [
                sys.executable, str(wrapper), "judge", "--no-progress", "--dataset", str(dataset),
                "--personal-data", "any", "--out", str(tmp_path / f"out-{run}"), "--api-base", server.url,
                "--providers-dir", str(providers), "--reasoning-effort", effort,
                *[arg for name in PROVIDERS for arg in ("-p", name)],
            ]  # fmt: skip
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                env=env | {"PRBJ_TEST_NET_LOG": str(log)},
                timeout=600,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
            connects = [tuple(e[1]) for e in events if e[0] == "connect"]
            lookups = {e[1] for e in events if e[0] == "lookup"}
            assert connects and all(address[:2] == ("127.0.0.1", port) for address in connects), connects
            assert lookups <= {"127.0.0.1", "localhost"}, (effort, lookups)
        assert {r.family for r in server.requests} == {family for _, family in PROVIDERS.values()}
