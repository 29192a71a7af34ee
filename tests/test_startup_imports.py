"""`prbj --help` starts fast because it loads nothing it does not print (issue 35: it took 0.33-0.40 s, as
prbj.data's package imported the loaders and Polars with them). What it imports is checked here, not how long
it takes: a timing belongs in bench/, and an import of one heavy module is what makes it slow."""

from __future__ import annotations

import pytest
from module_probe import after_cli, loaded_of

# Modules (and everything under them) that `prbj --help` must not load: data frames, numerics, the LLM stack,
# web servers and templates, the terminal renderer, and prbj's own layers that bring them.
HEAVY = (
    "polars",
    "numpy",
    "scipy",
    "pyarrow",
    "rich",
    "litellm",
    "openai",
    "anthropic",
    "google.genai",
    "httpx",
    "aiohttp",
    "jinja2",
    "torch",
    "transformers",
    "huggingface_hub",
    "diskcache",
    "tenacity",
    "wordllama",
    "yaml",
    "prbj.data.loaders",
    "prbj.data.files",
    "prbj.llm",
    "prbj.local",
    "prbj.judges",
    "prbj.runs",
    "prbj.report",
    "prbj.display",
    "prbj.view",
    "prbj.bon",
    "prbj.build",
    "prbj.serve",
    "prbj.export",
)


def _loaded(*args: str) -> list[str]:
    probe = after_cli(*args)
    assert "Usage: prbj" in probe.stdout, probe.stdout + probe.stderr
    return sorted(probe.modules)


def _heavy(modules: list[str]) -> list[str]:
    return sorted(loaded_of(modules, HEAVY))


@pytest.mark.parametrize("args", [["--help"], ["judge", "--help"]])
def test_help_loads_no_heavy_module(args: list[str]) -> None:
    modules = _loaded(*args)
    assert "prbj.cli" in modules and "click" in modules
    assert _heavy(modules) == []


def test_the_guard_sees_a_heavy_import() -> None:
    """The check itself works: importing the loaders, as prbj.data's package used to, is caught."""
    modules = _loaded("--help")
    caught = _heavy([*modules, "prbj.data.loaders", "polars.dataframe"])
    assert sorted(caught) == ["polars.dataframe", "prbj.data.loaders"]
