"""Issue 45: the README's examples run after exactly the README's first install, `pip install .`, with no extra.

A fresh virtual environment gets `pip install .` alone (from the package indexes pip is configured with), so torch,
transformers, Ray, inspect-ai and Presidio are not there. Every shell example of README.md then runs as
tests/test_examples.py runs it (a scratch clone, the loopback provider for examples that need a key), but with the
`prbj` of that environment, in a process of its own. The examples that need an extra must end with the one line
naming it (exit 2); the others must work.

Slow (the install takes a minute or two): marked `examples`, which CI runs (`PRBJ_EXAMPLES_TIMING=1` prints how
long the install and the examples took)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest
import test_examples
from doc_examples import ROOT, markdown_examples
from test_examples import Background, Workspace, run_example, stop_servers, workspace  # noqa: F401

pytestmark = pytest.mark.examples

# README examples that need an extra, by what the command contains → the extra its one line must name.
NEEDS_EXTRA = {
    "prbj run experiments/sample.toml": "local",
    "--format inspect": "inspect",
    "hf:/models/": "local",
}
# README examples that cannot run without an extra because an earlier one could not (no Inspect logs to view).
AFTER_A_REFUSED_ONE = {"inspect view": "inspect-ai is not installed, and the export before it was refused"}


@pytest.fixture(scope="module")
def base_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding `pip install .` and nothing else; its bin folder."""
    folder = tmp_path_factory.mktemp("base-install")
    started = time.monotonic()
    venv.create(folder / "venv", with_pip=True)
    python = folder / "venv" / "bin" / "python"
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=1500,
        env=_clean_env(),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    if os.environ.get("PRBJ_EXAMPLES_TIMING"):
        print(f"pip install . in a fresh venv: {time.monotonic() - started:.0f} s")
    for module in ("torch", "transformers", "ray", "inspect_ai", "presidio_analyzer"):
        probe = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, env=_clean_env())
        assert probe.returncode != 0, (
            f"{module} came with `pip install .`: the base install must not pull it in"
        )
    return python.parent


def _clean_env(extra: dict[str, str | None] | None = None) -> dict[str, str]:
    """The environment without this checkout on PYTHONPATH: the venv's own installed prbj runs."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    for name, value in (extra or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def test_the_readme_examples_run_after_pip_install_dot_alone(
    base_install: Path,
    workspace: Workspace,  # noqa: F811  (tests/test_examples.py's scratch clone and loopback provider)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(workspace.root)
    ws = workspace
    ws.env["HF_HUB_OFFLINE"] = "1"
    # Servers the examples start (`prbj view`) run the venv's python: without this checkout on its path.
    ws.env["PYTHONPATH"] = None  # type: ignore[assignment]
    prbj = str(base_install / "prbj")

    def run_in_venv(words: list[str], env: dict[str, str | None]) -> tuple[int, str]:
        done = subprocess.run(
            [prbj, *words[1:]], cwd=ws.root, env=_clean_env(env), capture_output=True, text=True, timeout=600
        )
        return done.returncode, done.stdout + done.stderr

    # Every prbj the examples run, servers (`prbj view`) included, is the venv's.
    monkeypatch.setattr(test_examples, "run_prbj", run_in_venv)
    monkeypatch.setattr(sys, "executable", str(base_install / "python"))
    # The runs the README's placeholders name, made by the base install: the offline judges and an LLM judge.
    for name in ("documented", "documented-again"):
        offline = "prbj judge -p random -p length -p bm25-profile -p embed-profile -p gemini-3-flash"
        code, output = run_in_venv(
            [*shlex.split(offline), "--no-progress", "--out", f"tmp-{name}"], dict(ws.env)
        )
        assert code == 0, output
        (made,) = (ws.root / f"tmp-{name}").iterdir()
        made.rename(ws.root / "reports" / name)

    examples = list(markdown_examples(ROOT / "README.md"))
    failures: list[str] = []
    background: list[Background] = []
    started = time.monotonic()
    for index, example in enumerate(examples):
        extra = next((name for key, name in NEEDS_EXTRA.items() if key in example.command), None)
        skip = next(
            (why for key, why in AFTER_A_REFUSED_ONE.items() if example.command.startswith(key)), None
        )
        try:
            if skip is not None:
                pass
            elif extra is not None:
                words = shlex.split(ws.substitute(example.command))
                code, output = run_in_venv(words, dict(ws.env))
                lines = [line for line in output.splitlines() if line.strip()]
                assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, output)
                assert f"(the '{extra}' extra)" in lines[0] and f"pip install 'prbj[{extra}]'" in lines[0], (
                    lines[0]
                )
            else:
                run_example(ws, example, background)
        except Exception as err:  # every example's failure is collected, then reported together
            failures.append(f"{example.where}: {example.command}\n  {type(err).__name__}: {str(err)[:1500]}")
        if index + 1 == len(examples) or examples[index + 1].block != example.block:
            stop_servers(example, background, failures)
    if os.environ.get("PRBJ_EXAMPLES_TIMING"):
        print(
            f"{len(examples)} README examples after pip install . alone: {time.monotonic() - started:.0f} s"
        )
    assert not failures, f"{len(failures)} of {len(examples)} examples failed:\n" + "\n".join(failures)
