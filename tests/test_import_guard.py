"""Issue 30: every command imports the heavy modules it uses, and no other. `import prbj.runs.command` once took
1.37 s, 0.9 s of it scipy.stats, which the judge path only needs for a confidence figure nobody asked for.

Checked here is what gets imported, never how long it takes (timings belong in bench/). The list of commands
is read from the CLI itself and each command's body modules from the imports its click function makes, so a new
command (or a new body module) is checked without anyone remembering to add it; only the heavy modules a command
may legitimately load are written down, in ALLOWED.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import click
import pytest
from module_probe import after_cli, after_imports

from prbj.cli import main

# Modules that cost a noticeable part of a second to import, or pull in a large stack; each is imported where it
# is used (a function body), never by a module on a command's path that does not use it.
HEAVY = (
    "scipy.stats",
    "torch",
    "transformers",
    "accelerate",
    "litellm",
    "openai",
    "anthropic",
    "google.genai",
    "ray",
    "jinja2",
    "aiohttp.web",
    "presidio_analyzer",
    "presidio_anonymizer",
    "spacy",
    "inspect_ai",
    "playwright",
    "wordllama",
    "huggingface_hub",
    "tiktoken",
    "tokenizers",
    "sklearn",
    "pandas",
)

# The heavy modules a command needs as soon as its body is imported. Everything else must wait for the function
# that uses it.
ALLOWED: dict[str, frozenset[str]] = {
    # The reward server and the viewer are aiohttp web applications; the viewer renders Jinja templates.
    "serve": frozenset({"aiohttp.web"}),
    "view": frozenset({"aiohttp.web", "jinja2"}),
}


def leaf_commands(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            found.update(leaf_commands(command, path + " "))
            if command.callback is not None and command.invoke_without_command:
                found[path] = command
        else:
            found[path] = command
    return found


def body_modules(command: click.Command) -> list[str]:
    """The prbj modules a command's click function imports in its body: where the command's work lives."""
    assert command.callback is not None
    source = textwrap.dedent(inspect.getsource(inspect.unwrap(command.callback)))
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    modules = {
        node.module
        for statement in function.body
        for node in ast.walk(statement)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("prbj.")
    }
    return sorted(modules)


def heavy(loaded: set[str]) -> set[str]:
    return {name for name in HEAVY if name in loaded}


COMMANDS = leaf_commands(main)


def test_every_command_is_found_with_its_body() -> None:
    """The guard reaches every command, the ones added since issue 30 among them; a command whose body cannot be
    found would be checked for nothing."""
    assert {"judge", "report", "check", "export", "view", "serve", "cache stats", "bon sample", "run"} <= set(
        COMMANDS
    )
    assert body_modules(COMMANDS["judge"]) == ["prbj.runs.collector", "prbj.runs.command"]
    bodiless = [name for name, command in COMMANDS.items() if not body_modules(command)]
    assert bodiless == []


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_imports_no_heavy_module_it_does_not_need(name: str) -> None:
    modules = body_modules(COMMANDS[name])
    loaded = after_imports(*modules)
    assert set(modules) <= loaded
    unneeded = heavy(loaded) - ALLOWED.get(name, frozenset())
    assert unneeded == set(), f"prbj {name} imports {sorted(unneeded)} through {modules}"


def test_the_guard_catches_a_planted_import(tmp_path: Path) -> None:
    """A top-level `import scipy.stats` in a module of the judge path (as runs/confidence.py once had, through
    analysis/selective.py) is caught: here a module on sys.path plays that module's part."""
    (tmp_path / "planted.py").write_text("import scipy.stats\n", encoding="utf-8")
    loaded = after_imports(*body_modules(COMMANDS["judge"]), "planted", path=[tmp_path])
    assert heavy(loaded) == {"scipy.stats"}


# What commands import while they run, not only when loaded: the functions on their path import lazily, and a
# lazy import on the common path is as costly as a top-level one.
def run_loaded(tmp_path: Path, *args: str) -> set[str]:
    return after_cli(*args, cwd=tmp_path).modules


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    out = tmp_path_factory.mktemp("guard-runs")
    loaded = run_loaded(out, "judge", "--no-progress", "--out", str(out / "runs"))
    return next((out / "runs").iterdir()), loaded


def test_the_default_judge_run_loads_only_what_its_judges_use(sample_run: tuple[Path, set[str]]) -> None:
    """The offline baselines embed with WordLlama (which brings its tokenizer); no LLM stack, no statistics
    library beyond what the leaderboard uses, no web stack."""
    _, loaded = sample_run
    assert heavy(loaded) <= {"wordllama", "tokenizers"}
    assert "wordllama" in loaded  # the probe sees what a run really loads


def test_a_cached_provider_run_does_not_load_litellm(tmp_path: Path) -> None:
    """A run that sends nothing (here --cache-only on an empty cache) has no use for LiteLLM: a cached rerun's
    start-up must not pay for it."""
    loaded = run_loaded(
        tmp_path,
        "judge", "--no-progress", "-p", "gpt-5.1", "--cache-only", "--limit", "3",
        "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "runs"),
    )  # fmt: skip
    assert "prbj.llm.gateway" in loaded
    assert heavy(loaded) == set()


@pytest.mark.parametrize(
    "args",
    [
        ["report", "{run}"],
        ["check", "{run}", "--baseline", "{baseline}"],
        ["show", "{run}", "--limit", "2"],
        ["export", "{run}", "--format", "csv", "--out", "{tmp}/judgments.csv"],
        ["export", "{run}", "--format", "eee", "--out", "{tmp}/eee"],
        ["providers"],
    ],
    ids=lambda args: "-".join(a for a in args[:3] if not a.startswith("{")),
)
def test_commands_on_a_run_load_no_heavy_module(
    args: list[str], sample_run: tuple[Path, set[str]], tmp_path: Path
) -> None:
    run, _ = sample_run
    baseline = Path(__file__).resolve().parents[1] / "reports" / "baselines" / "sample-offline.json"
    filled = [a.format(run=run, baseline=baseline, tmp=tmp_path) for a in args]
    assert heavy(run_loaded(tmp_path, *filled)) == set()
