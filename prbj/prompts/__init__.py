"""Prompt templates as text files; each has a content hash that goes into cache keys and run.json.

Placeholders are `{name}`. Only the names a caller supplies are replaced and every other brace is left alone, so
templates written for other tools (the official repository's prompt files, JSON examples) work unchanged.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from prbj.errors import ConfigError

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Template:
    name: str
    text: str

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:12]

    @property
    def placeholders(self) -> set[str]:
        return set(_PLACEHOLDER.findall(self.text))

    def render(self, values: Mapping[str, str]) -> str:
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), self.text)


def builtin(name: str) -> Template:
    """A template shipped in prbj/prompts/, by file stem."""
    text = (resources.files("prbj.prompts") / f"{name}.txt").read_text(encoding="utf-8")
    return Template(name, text)


def from_file(path: Path, *, option: str, required: set[str] | None = None) -> Template:
    """A user's template; `required` placeholders must appear, or the judge would never see that input."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{option} {path}: cannot read it ({err})") from None
    template = Template(str(path), text)
    missing = (required or set()) - template.placeholders
    if missing:
        raise ConfigError(f"{option} {path}: placeholder {{{sorted(missing)[0]}}} is missing")
    return template


def combined_sha(*templates: Template) -> str:
    return hashlib.sha256("\0".join(t.sha for t in templates).encode()).hexdigest()[:12]
