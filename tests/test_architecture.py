"""The layout is a contract: imports run one way between layers, and no module or package imports itself
back through others. The walk reads source with `ast`, so it sees imports inside functions too."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "prbj"

# Higher layers may import lower ones, never the other way; packages on one layer do not import each other.
# analysis and report sit below runs: they are pure computation and rendering over runs already loaded in
# memory (runs needs the statistics to write summary.json, and renders reports from what it just judged);
# only runs.rundir reads and writes run-directory files, and hands the loaded runs to them.
LAYERS: dict[str, int] = {
    "data": 0,
    "prompts": 0,
    "display": 0,
    # Who may talk to prbj's HTTP servers: shared by serve and view, which sit on one layer.
    "web": 0,
    "llm": 1,
    "local": 2,
    # Pseudonyms and the private store: data and the routing below, read by runs, judges' callers and the viewer.
    "privacy": 2,
    "context": 3,
    "judges": 4,
    "analysis": 5,
    "report": 6,
    # Exports are pure, like report: runs already in memory in, documents out.
    "export": 6,
    "runs": 7,
    "bon": 8,
    "build": 8,
    "serve": 8,
    "view": 8,
    # An experiment runs best-of-N, builds and correlations as stages and reads what they write: above them.
    "experiments": 9,
    "cli": 10,
}
# Modules directly under prbj/ that every layer may use.
SHARED_TOP_LEVEL = {"__init__", "__main__", "errors", "extras"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            # `from prbj.x import y` may name a submodule y.
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "prbj" or name.startswith("prbj.")}


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in PACKAGE_ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        graph[module] = {name for name in _imports(path, module) if name in paths and name != module}
    return graph


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_at_most_three_modules_directly_under_prbj() -> None:
    top = {p.stem for p in PACKAGE_ROOT.glob("*.py")}
    assert top <= SHARED_TOP_LEVEL, f"modules directly under prbj/: {sorted(top - SHARED_TOP_LEVEL)}"


def test_every_package_has_a_layer() -> None:
    packages = {p.parent.name for p in PACKAGE_ROOT.glob("*/__init__.py")}
    assert packages == set(LAYERS), f"packages without a layer: {packages - set(LAYERS)}"


def test_no_module_import_cycle() -> None:
    assert _cycle(_graph()) is None, f"import cycle: {' → '.join(_cycle(_graph()) or [])}"


def test_no_package_import_cycle() -> None:
    packages: dict[str, set[str]] = defaultdict(set)
    for module, targets in _graph().items():
        for target in targets:
            if _top(target) != _top(module):
                packages[_top(module)].add(_top(target))
    assert _cycle(packages) is None, f"package cycle: {' → '.join(_cycle(packages) or [])}"


def test_imports_follow_the_layers() -> None:
    against = []
    for module, targets in sorted(_graph().items()):
        source = _top(module)
        for target in sorted(targets):
            dest = _top(target)
            if source == dest or dest in SHARED_TOP_LEVEL or source in SHARED_TOP_LEVEL:
                continue
            if LAYERS[dest] >= LAYERS[source]:
                against.append(f"{module} → {target}")
    assert not against, "imports against the layers:\n" + "\n".join(against)


@pytest.mark.parametrize("source", ["import prbj.llm.gateway\n", "from prbj.llm import gateway\n"])
def test_the_walk_sees_both_import_forms(tmp_path: Path, source: str) -> None:
    # Guards the guard: if the walker missed a form, the layer test above would pass vacuously.
    path = tmp_path / "m.py"
    path.write_text(source)
    assert "prbj.llm.gateway" in _imports(path, "prbj.judges.m")


def test_every_type_ignore_says_why() -> None:
    # A silenced type error must carry its reason: a comment after it on the line, or a comment line above.
    unexplained = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            if "# type: ignore" not in line:
                continue
            after = line.split("# type: ignore", 1)[1]
            explained_here = "#" in after
            explained_above = number > 1 and lines[number - 2].strip().startswith("#")
            if not (explained_here or explained_above):
                unexplained.append(f"{path.relative_to(PACKAGE_ROOT.parent)}:{number}")
    assert not unexplained, f"type: ignore without a reason: {unexplained}"
