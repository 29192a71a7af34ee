"""The optional dependencies (pyproject.toml's extras) and the one check every feature that needs one makes where
it is used, before it writes anything: one line naming what is missing, the extra and the command that installs
it (exit 2), never a ModuleNotFoundError traceback halfway through a run.

The check asks whether a module can be found (`importlib.util.find_spec`), which imports nothing: a feature that
goes on to use the module pays its import once, where it uses it."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from prbj.errors import ConfigError

# PyPI's torch wheel for Linux is the CUDA build (several GB of nvidia-* wheels); PyTorch's own CPU index has the
# CPU build. A GPU machine drops the --index-url (or names the CUDA index of its driver).
TORCH_CPU = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"


@dataclass(frozen=True, slots=True)
class Extra:
    """One extra of pyproject.toml: its name and what it brings, as (module imported, package pip installs)."""

    name: str
    modules: tuple[tuple[str, str], ...]

    def missing(self) -> list[str]:
        """The packages of this extra that cannot be imported here (by their pip names)."""
        return [package for module, package in self.modules if not importable(module)]

    def install(self, missing: list[str]) -> str:
        command = f"pip install 'prbj[{self.name}]'"
        # torch first, from the CPU index, so that installing the extra does not pull in the CUDA build.
        return f"{TORCH_CPU} && {command}" if "torch" in missing else command

    def require(self, feature: str, *, plural: bool = False) -> None:
        """Raise MissingExtra when `feature` (how the user asked for it: `-p hf:models/rm`, `--ray`; `plural`:
        several things, which "need") cannot run here."""
        missing = self.missing()
        if missing:
            raise MissingExtra(self, feature, missing, plural=plural)


class MissingExtra(ConfigError):
    """A feature's optional dependency is not installed: exit 2, one line."""

    def __init__(self, extra: Extra, feature: str, missing: list[str], *, plural: bool = False) -> None:
        self.extra = extra
        self.missing = missing
        names = " and ".join(missing)
        verb = "is" if len(missing) == 1 else "are"
        super().__init__(
            f"{feature} {'need' if plural else 'needs'} {names}, which {verb} not installed (the '{extra.name}' "
            "extra): "
            f"{extra.install(missing)}"
        )


def importable(module: str) -> bool:
    """Whether `module` can be imported, asked of the import system (nothing is imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing, or a module without a spec
        return False


# In-process models: scalar reward models (`hf:`) and local generative judges (`hf-local:`).
LOCAL = Extra("local", (("torch", "torch"), ("transformers", "transformers")))
# --ray: local models in Ray actors across a cluster.
RAY = Extra("ray", (("ray", "ray"),))
# --personal-data pseudonymized: Presidio's analyzer, and spaCy (which it brings) for its tokenizer.
PRIVACY = Extra("privacy", (("presidio_analyzer", "presidio-analyzer"), ("spacy", "spacy")))
# prbj export --format inspect: logs written through inspect-ai's own API.
INSPECT = Extra("inspect", (("inspect_ai", "inspect-ai"),))
