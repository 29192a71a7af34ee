"""A run that needs no model call never imports LiteLLM: prices come from the remembered model-map facts, the
answers from the cache. Real `prbj` processes against the loopback provider; the second one reports, as it
exits, whether `litellm` was ever imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from loopback import ProviderServer

# Every test here starts real prbj processes (seconds each): CI runs them in the `processes` step.
pytestmark = pytest.mark.processes

# Runs the real CLI and says on stderr, at exit, whether LiteLLM (and prbj's batch machinery) was imported.
WRAPPER = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('litellm imported:', 'litellm' in sys.modules,\n"
    "    '| batch imported:', 'prbj.llm.batch.queue' in sys.modules, file=sys.stderr))\n"
    "from prbj.cli import main\n"
    "main()\n"
)


@pytest.fixture(scope="module")
def server():
    with ProviderServer(reply=lambda request: "Weighing both.\nResult: A") as running:
        yield running


def prbj(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environment |= {
        "OPENAI_API_KEY": "sk-replay-test",
        "PRBJ_MODEL_MAP_CACHE": str(tmp_path / "model-map.json"),
        "PRBJ_CACHE_DIR": str(tmp_path / "cache"),
    }
    return subprocess.run(
        [sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, timeout=180, env=environment
    )


def judge(server, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return prbj(
        tmp_path,
        "judge",
        "--no-progress",
        "-p",
        "gpt-5.1",
        "--api-base",
        server.url,
        "--context",
        "none",
        "--out",
        str(tmp_path / "out"),
        *extra,
    )


def test_an_all_hits_rerun_never_imports_litellm(server, tmp_path) -> None:
    first = judge(server, tmp_path)
    assert first.returncode == 0, first.stderr
    assert "litellm imported: True" in first.stderr  # it sent requests: the import was needed
    sent = len(server.requests)
    assert sent > 0
    remembered = json.loads((tmp_path / "model-map.json").read_text())
    assert remembered["prices"]["openai/gpt-5.1-2025-11-13"] == [1.25e-06, 1e-05]

    for extra in ((), ("--cache-only",), ("--dry-run",)):
        again = judge(server, tmp_path, *extra)
        assert again.returncode == 0, again.stderr
        assert "litellm imported: False" in again.stderr, extra
        assert "batch imported: False" in again.stderr, extra  # only --batch needs the batch queue
    assert len(server.requests) == sent  # every answer came from the cache

    # The first listing looks up the profiles the run did not use; from then on they are remembered too.
    assert prbj(tmp_path, "providers").returncode == 0
    run_dir = next((tmp_path / "out").iterdir())
    baseline = str(tmp_path / "baseline.json")
    for command in (
        ("providers",),
        ("report", str(run_dir)),
        ("check", str(run_dir), "--baseline", baseline, "--update-baseline"),
        ("check", str(run_dir), "--baseline", baseline),
    ):
        done = prbj(tmp_path, *command)
        assert done.returncode == 0, done.stderr
        assert "litellm imported: False" in done.stderr, command


def test_remembered_facts_are_untrusted_data(server, tmp_path) -> None:
    """A malformed or foreign file is ignored (prices looked up again), never trusted. A dry run resolves the
    provider's price (`prbj providers` reads LiteLLM's price file itself and never consults the facts)."""
    facts = tmp_path / "model-map.json"
    facts.write_text(json.dumps({"litellm": "0.0.0-other", "prices": {"openai/gpt-5.1-2025-11-13": [0, 0]}}))
    # A dry run resolves the judge's price (`prbj providers` reads LiteLLM's price file without importing it).
    done = judge(server, tmp_path, "--dry-run", "--limit", "1")
    assert done.returncode == 0, done.stderr
    assert "litellm imported: True" in done.stderr
    version = json.loads(facts.read_text())["litellm"]
    assert version == metadata.version("litellm")
    assert json.loads(facts.read_text())["prices"]["openai/gpt-5.1-2025-11-13"] == [1.25e-06, 1e-05]

    for garbage in (
        '{"litellm": 1, "prices": [',
        '{"litellm": "%s", "prices": {"openai/gpt-5.1-2025-11-13": [-1, "x"]}}',
    ):
        facts.write_text(garbage % version if "%s" in garbage else garbage)
        done = judge(server, tmp_path, "--dry-run", "--limit", "1")
        assert done.returncode == 0, done.stderr
        assert "litellm imported: True" in done.stderr
        assert json.loads(facts.read_text())["prices"]["openai/gpt-5.1-2025-11-13"] == [1.25e-06, 1e-05]
