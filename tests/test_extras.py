"""Issue 45 items 1–2: every optional dependency is checked the same way where it is used. With one hidden (as if
never installed), the command that needs it prints one line naming what is missing, its extra and the command
that installs it, exits 2 and writes nothing: no traceback, no half-made run, no empty export folder.

Each case runs `prbj` in a fresh process in which the hidden modules cannot be imported (`sys.modules[name] =
None`: `import name` fails as for a package that is not there, and importlib's find_spec answers None)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import make_record, write_jsonl
from prbj.cli import main

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[1]
TORCH_CPU = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"

# Runs the CLI with the modules named in argv[1] (comma-separated) made unimportable.
_HIDDEN_CLI = (
    "import sys\n"
    "for name in sys.argv[1].split(','):\n"
    "    sys.modules[name] = None\n"
    "from prbj.cli import main\n"
    "main(sys.argv[2:], prog_name='prbj')\n"
)

# A run that pseudonymizes: it needs the privacy extra's NER engine (presidio) and model runtime (spacy).
PSEUDONYMIZED_RUN = "judge --dataset own.jsonl -p length --personal-data pseudonymized --out out".split()
# (modules hidden, the command that needs them, the extra it must name, the install command it must give)
CASES = [
    (
        "torch",
        ["judge", "-p", "hf:experiments/models/tiny-rm-s", "--out", "out"],
        "local",
        f"{TORCH_CPU} && pip install 'prbj[local]'",
    ),
    (
        "transformers",
        ["judge", "-p", "hf:experiments/models/tiny-rm-s", "--out", "out"],
        "local",
        "needs transformers, which is not installed (the 'local' extra): pip install 'prbj[local]'",
    ),
    (
        "torch,transformers",
        ["judge", "-p", "hf-local:experiments/models/tiny-rm-s", "--out", "out"],
        "local",
        f"{TORCH_CPU} && pip install 'prbj[local]'",
    ),
    ("torch,transformers", ["run", "experiments/sample.toml"], "local", "tiny-rm-s, tiny-rm-m and tiny-rm-l"),
    ("ray", ["judge", "-p", "length", "--ray", "--out", "out"], "ray", "pip install 'prbj[ray]'"),
    (
        "inspect_ai",
        ["export", "RUN", "--format", "inspect", "--out", "exports/inspect"],
        "inspect",
        "needs inspect-ai, which is not installed (the 'inspect' extra): pip install 'prbj[inspect]'",
    ),
    (
        "presidio_analyzer",
        PSEUDONYMIZED_RUN,
        "privacy",
        "pip install 'prbj[privacy]'",
    ),
    (
        "spacy",
        PSEUDONYMIZED_RUN,
        "privacy",
        "pip install 'prbj[privacy]'",
    ),
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone's experiments/ and the reader's own pairs, and one run to export."""
    root = tmp_path_factory.mktemp("extras")
    shutil.copytree(ROOT / "experiments", root / "experiments")
    write_jsonl(root / "own.jsonl", [make_record(i) for i in range(1, 5)])
    result = CliRunner().invoke(
        main, ["judge", "-p", "length", "--limit", "3", "--no-progress", "--out", str(root / "runs")]
    )
    assert result.exit_code == 0, result.output
    return root


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _run_hidden(root: Path, hidden: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PRBJ_CACHE_DIR": str(root / "cache"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "COLUMNS": "400",
    }
    return subprocess.run(
        [sys.executable, "-c", _HIDDEN_CLI, hidden, *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("hidden", "args", "extra", "install"), CASES, ids=[c[0] + ":" + c[1][0] for c in CASES]
)
def test_a_missing_extra_is_one_line_exit_2_and_nothing_written(
    workspace: Path, hidden: str, args: list[str], extra: str, install: str
) -> None:
    (run_dir,) = (workspace / "runs").iterdir()
    args = [str(run_dir) if arg == "RUN" else arg for arg in args]
    before = _files(workspace)
    done = _run_hidden(workspace, hidden, args)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert f"(the '{extra}' extra)" in lines[0] and install in lines[0], lines[0]
    assert _files(workspace) == before, sorted(_files(workspace) - before)


def test_a_dry_run_of_the_experiment_plans_and_says_what_a_real_run_needs(workspace: Path) -> None:
    """Item 1: the plan still shows (it loads no model), and ends saying that a real run would stop at once."""
    done = _run_hidden(workspace, "torch,transformers", ["run", "experiments/sample.toml", "--dry-run"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Experiment plan" in done.stdout
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("a real run stops here: experiments/sample.toml: tiny-rm-s"), last
    assert f"{TORCH_CPU} && pip install 'prbj[local]'" in last


def test_without_playwright_the_browser_tests_skip_saying_how_to_get_it(tmp_path: Path) -> None:
    """The browser tests' own optional dependency (the `test` extra) and Chromium: a skip that says how to get
    each on a developer's machine, a failure under CI."""
    (tmp_path / "test_page.py").write_text(
        textwrap.dedent(
            """
            from browser import chromium_or_skip

            def test_page():
                with chromium_or_skip():
                    pass
            """
        )
    )
    script = (
        "import sys\nsys.modules['playwright'] = None\nimport pytest\nsys.exit(pytest.main(sys.argv[1:]))\n"
    )
    args = [
        "-q",
        "-rs",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-o",
        "addopts=",
        str(tmp_path / "test_page.py"),
    ]
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), str(ROOT)])
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "1 skipped" in done.stdout, done.stdout + done.stderr
    assert "playwright is not installed: pip install -e '.[test]'" in done.stdout, done.stdout
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=tmp_path,
        env={**env, "CI": "true"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "1 failed" in done.stdout, done.stdout + done.stderr


def test_the_extras_named_are_those_of_pyproject() -> None:
    """The install commands name extras that exist, with the packages pyproject gives them."""
    import tomllib

    from prbj.extras import INSPECT, LOCAL, PRIVACY, RAY

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in (LOCAL, RAY, PRIVACY, INSPECT):
        requirements = json.dumps(declared[extra.name]).lower()
        for module, package in extra.modules:
            if module != "spacy":  # spaCy comes with Presidio's analyzer
                assert package in requirements, (extra.name, package)
