"""Prompt templates as text files; each has a content hash that goes into cache keys and run.json.

Placeholders are `{name}` where name is an identifier (letters, digits, underscore; not starting with a digit).
Only those patterns count, and every other brace is left alone, so JSON examples such as `{"score": 7}` and the
official repository's prompt files work unchanged.

A user's template (`from_file`) is checked before any call, and refused with its file and the offending text when
it has a placeholder outside the allowed set (for judges: JUDGE_PLACEHOLDERS), a positional `{0}` or `{}`, a
format spec `{question:>10}`, an escaped `{{question}}` (str.format's escape; here it would reach the model as
literal braces), or braces that do not balance (`{question` never closed). Without the check each of these would
be sent to the provider as literal text.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from pathlib import Path

from prbj.errors import ConfigError

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# What a judge's templates may show: the values prbj.judges.generative renders into them.
JUDGE_PLACEHOLDERS = frozenset(
    {"question", "Response_A", "Response_B", "response", "profile", "rubrics", "context"}
)
# Things str.format users write that prbj would send as literal text.
_ESCAPED = re.compile(r"\{\{\s*[A-Za-z_][A-Za-z0-9_]*\s*\}\}")
_POSITIONAL = re.compile(r"\{\s*[0-9]*\s*\}")
_FORMAT_SPEC = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*[!:][^{}\n]*\}")


@dataclass(frozen=True)
class Template:
    name: str
    text: str

    @cached_property
    def sha(self) -> str:
        # Remembered: every call's cache key names its templates, so a run asks for it once per call.
        return hashlib.sha256(self.text.encode()).hexdigest()[:12]

    @cached_property
    def utf8_bytes(self) -> int:
        # Remembered: a pairwise judge weighs its templates' size against the prompt-cache minimum per pair.
        return len(self.text.encode())

    @property
    def placeholders(self) -> set[str]:
        return set(_PLACEHOLDER.findall(self.text))

    @cached_property
    def _pieces(self) -> tuple[str, tuple[tuple[str, str, str], ...]]:
        """The text split at its placeholders once: (text before the first, then (name, as written, text after)
        for each), so that rendering, done twice per call, joins strings instead of running a regex."""
        parts = _PLACEHOLDER.split(self.text)
        names = parts[1::2]
        return parts[0], tuple(zip(names, (f"{{{n}}}" for n in names), parts[2::2], strict=True))

    def render(self, values: Mapping[str, str]) -> str:
        """The text with each `{name}` replaced by its value; a name without a value stays as written."""
        head, rest = self._pieces
        out = [head]
        for name, written, after in rest:
            out.append(values.get(name, written))
            out.append(after)
        return "".join(out)


@cache
def builtin(name: str) -> Template:
    """A template shipped in prbj/prompts/, by file stem. Read once per process: the files ship with prbj and
    never change while it runs, and some are asked for per call (the repair turns)."""
    text = (resources.files("prbj.prompts") / f"{name}.txt").read_text(encoding="utf-8")
    return Template(name, text)


def from_file(
    path: Path,
    *,
    option: str,
    required: set[str] | None = None,
    allowed: frozenset[str] | set[str] = JUDGE_PLACEHOLDERS,
) -> Template:
    """A user's template; `required` placeholders must appear, or the judge would never see that input, and
    only `allowed` ones may (see the module docstring for what else is refused)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{option} {path}: cannot read it ({err})") from None
    problem = template_problem(text, allowed)
    if problem is not None:
        raise ConfigError(f"{option} {path}: {problem}")
    template = Template(str(path), text)
    missing = (required or set()) - template.placeholders
    if missing:
        raise ConfigError(f"{option} {path}: placeholder {{{sorted(missing)[0]}}} is missing")
    return template


def template_problem(text: str, allowed: frozenset[str] | set[str]) -> str | None:
    """Why `text` would not render as its author meant, naming the line and the placeholder; None if it would."""
    checks = (
        (_ESCAPED, "escaped placeholder {found}: braces are not doubled here; write {{{name}}}"),
        (_POSITIONAL, "positional placeholder {found}: use a name, one of {allowed}"),
        (
            _FORMAT_SPEC,
            "placeholder {found}: format specs and conversions are not supported; write {{{name}}}",
        ),
    )
    for pattern, message in checks:
        match = pattern.search(text)
        if match is not None:
            found = match.group(0)
            name = found.strip("{} ").split(":")[0].split("!")[0]
            detail = message.format(found=found, name=name, allowed=_listing(allowed))
            return f"line {_line(text, match.start())}: {detail}"
    unbalanced = _unbalanced_brace(text)
    if unbalanced is not None:
        return unbalanced
    for match in _PLACEHOLDER.finditer(text):
        if match.group(1) not in allowed:
            return (
                f"line {_line(text, match.start())}: unknown placeholder {match.group(0)}; "
                f"known: {_listing(allowed)}"
            )
    return None


def _unbalanced_brace(text: str) -> str | None:
    opened: list[int] = []
    for index, char in enumerate(text):
        if char == "{":
            opened.append(index)
        elif char == "}":
            if not opened:
                return f"line {_line(text, index)}: '}}' without a matching '{{'"
            opened.pop()
    if opened:
        start = opened[-1]
        snippet = text[start : start + 30].splitlines()[0]
        return f"line {_line(text, start)}: '{{' never closed ({snippet!r})"
    return None


def _line(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _listing(names: frozenset[str] | set[str]) -> str:
    return ", ".join(f"{{{name}}}" for name in sorted(names))


def combined_sha(*templates: Template) -> str:
    return hashlib.sha256("\0".join(t.sha for t in templates).encode()).hexdigest()[:12]
