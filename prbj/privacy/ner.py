"""Which spaCy pipeline finds names, places and organizations for `--personal-data pseudonymized`, decided
without importing spaCy (a cached rerun must not pay for it), and refused when there is none.

A pseudonymizing run without a named-entity model would send every name and city as it is while the user
believes them replaced: it fails closed instead (exit 2, one line naming how to install a model), unless
`--ner-model none` states that names and places may stay. prbj never downloads a model.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from prbj.errors import ConfigError
from prbj.extras import PRIVACY, importable

# `--ner-model none`: patterns only, names and places are sent as they are (a stated choice).
NO_NER = "none"
# spaCy's English pipelines, best first; the first installed one is used when --ner-model is not given.
DEFAULT_NER_MODELS: tuple[str, ...] = (
    "en_core_web_lg",
    "en_core_web_trf",
    "en_core_web_md",
    "en_core_web_sm",
)
# Files of a pipeline folder up to this size are hashed whole (configuration, entity-ruler patterns, meta);
# larger ones (vectors, weights) by name and size, so that naming a 500 MB model costs no read of it.
_HASHED_WHOLE = 1 << 20

NO_MODEL_MESSAGE = (
    "--personal-data pseudonymized finds names, places and organizations with a spaCy NER model, and none is "
    "installed: install one (python -m spacy download en_core_web_lg), name one with --ner-model NAME|PATH, or "
    "pass --ner-model none to send names and places as they are (docs/privacy.md)"
)


@dataclass(frozen=True)
class NerModel:
    """A spaCy pipeline to load: `name` as spacy.load takes it (a package or a folder), `identity` what a
    pseudonym table made with it is filed under (package and version, or the folder's content digest)."""

    name: str
    identity: str
    # A transformer pipeline (spacy-transformers) needs torch when it loads; the others do not.
    needs_torch: bool = False


def resolve_ner(option: str | None) -> NerModel | None:
    """The NER pipeline of a pseudonymizing run: `--ner-model` (a package, a folder, or `none`: None), else
    the first of DEFAULT_NER_MODELS installed; a ConfigError when there is none (fail closed). Without the
    privacy extra itself, that is the one line (an NER model alone would not run)."""
    PRIVACY.require("--personal-data pseudonymized")
    if option is not None and option.strip().lower() == NO_NER:
        return None
    if option is not None:
        folder = Path(option).expanduser()
        if folder.is_dir():
            return _folder_model(folder)
        if _installed(option):
            return _package_model(option)
        raise ConfigError(
            f"--ner-model {option}: not a spaCy pipeline installed here nor a folder holding one "
            f"(python -m spacy download {option}, a folder written by nlp.to_disk, or --ner-model none)"
        )
    for name in DEFAULT_NER_MODELS:
        if _installed(name):
            return _package_model(name)
    raise ConfigError(NO_MODEL_MESSAGE)


def _installed(name: str) -> bool:
    """Whether a pipeline package is importable, asked of the import system (no spaCy import)."""
    return name.isidentifier() and importable(name)


def _package_model(name: str) -> NerModel:
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return NerModel(name, f"package:{name}=={version}", needs_torch="trf" in name.split("_"))


def _folder_model(folder: Path) -> NerModel:
    if not (folder / "config.cfg").is_file():
        raise ConfigError(
            f"--ner-model {folder}: no config.cfg in this folder, so not a spaCy pipeline (one written by "
            f"nlp.to_disk or installed by spacy download)"
        )
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        size = path.stat().st_size
        digest.update(f"{path.relative_to(folder).as_posix()}\0{size}\0".encode())
        if size <= _HASHED_WHOLE:
            digest.update(path.read_bytes())
    return NerModel(str(folder), f"folder:{digest.hexdigest()[:16]}", needs_torch=_uses_transformers(folder))


def _uses_transformers(folder: Path) -> bool:
    meta = folder / "meta.json"
    try:
        pipeline = json.loads(meta.read_text(encoding="utf-8")).get("pipeline") or []
    except (OSError, ValueError, AttributeError):
        return False
    return any("transformer" in str(name) for name in pipeline)
