"""What a fresh Python process has imported: after running the prbj CLI with some arguments, or after importing
some modules. The start-up tests (tests/test_startup_imports.py, tests/test_import_guard.py) check the result
against modules a path must not load; what they check is imports, never time."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

MARK = "PRBJ-MODULES "

# Runs the CLI and, at exit (whatever the exit code), prints every loaded module on stderr.
_AFTER_MAIN = (
    "import atexit, json, sys\n"
    f"atexit.register(lambda: print({MARK!r} + json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
    "from prbj.cli import main\n"
    "main(sys.argv[1:], prog_name='prbj')\n"
)
# Imports the CLI, then each module named (after putting `path` first on sys.path), and prints what is loaded.
_AFTER_IMPORTS = (
    "import json, sys\n"
    "sys.path[:0] = json.loads(sys.argv[1])\n"
    "import prbj.cli\n"
    "for name in sys.argv[2:]:\n"
    "    __import__(name)\n"
    f"print({MARK!r} + json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
)


@dataclass(frozen=True)
class Probe:
    modules: set[str]
    stdout: str
    stderr: str


def _probe(script: str, args: Sequence[str], cwd: Path | None) -> Probe:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        check=False,
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith(MARK)]
    assert lines, done.stdout[-2000:] + done.stderr[-2000:]
    return Probe(set(json.loads(lines[-1][len(MARK) :])), done.stdout, done.stderr)


def after_cli(*args: str, cwd: Path | None = None) -> Probe:
    """`prbj args` in a fresh process: what it loaded by the time it exited."""
    return _probe(_AFTER_MAIN, args, cwd)


def after_imports(*modules: str, path: Sequence[Path] = ()) -> set[str]:
    """A fresh process that imports the CLI, then `modules`: what it loaded."""
    return _probe(_AFTER_IMPORTS, [json.dumps([str(p) for p in path]), *modules], None).modules


def loaded_of(modules: Iterable[str], names: Iterable[str]) -> set[str]:
    """The members of `modules` that are one of `names` or lie under one (`polars.dataframe` under `polars`)."""
    wanted = tuple(names)
    return {m for m in modules if any(m == name or m.startswith(name + ".") for name in wanted)}
