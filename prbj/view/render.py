"""Pages as HTML: Jinja2 templates shipped in the package, every value escaped unless a template marks it safe
(only the report's SVG charts, whose writer escapes every string)."""

from __future__ import annotations

import math
import unicodedata
from functools import cache
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup, escape

from prbj.view.links import Links

STATIC_FILES = ("viewer.css", "viewer.js")
# What a page may load and run: its own script and stylesheet (SVG charts are inline markup). The live server
# sends it as a header (with frame-ancestors, which only a header can set); every page, the static bundle's
# too, carries it in a <meta> tag.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "form-action 'self'"
)
# Hangul fillers and the Mongolian vowel separator show as nothing, like the format characters (Cf: zero-width
# spaces and joiners, bidi marks, embeddings, overrides and isolates, the BOM, soft hyphens).
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u180e")


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "—"
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"


def _invisible(char: str) -> bool:
    return unicodedata.category(char) == "Cf" or char in _BLANK_LETTERS


def _code(char: str) -> str:
    return f"U+{ord(char):04X}"


def visible_text(value: Any) -> str:
    """Plain text with every invisible or direction-changing character written out as [U+XXXX] (a page title
    cannot hold markup)."""
    text = str(value)
    return "".join(f"[{_code(c)}]" if _invisible(c) else c for c in text)


def shown_id(value: Any) -> Markup:
    """An identifier from a dataset or run (pair id, run id) as a page shows it: isolated from the text around
    it (<bdi>: a right-to-left id cannot reorder its line), invisible characters made visible, all escaped."""
    text = str(value)
    if not any(_invisible(char) for char in text):
        return Markup("<bdi>{}</bdi>").format(text)
    parts = []
    for char in text:
        if _invisible(char):
            name = unicodedata.name(char, "format character").lower()
            parts.append(Markup('<span class="invisible" title="{}">{}</span>').format(name, _code(char)))
        else:
            parts.append(escape(char))
    return Markup("<bdi>") + Markup("").join(parts) + Markup("</bdi>")


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("prbj.view", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _number
    env.filters["id"] = shown_id
    env.filters["visible"] = visible_text
    env.globals["page_csp"] = Markup(PAGE_CSP)  # a constant of ours: its quotes need no escaping
    return env


def compile_templates() -> None:
    """Compile every template now (the viewer's warm-up), not on the first request for each page."""
    env = environment()
    for name in env.list_templates(extensions=["html"]):
        env.get_template(name)


def render(template: str, context: dict[str, Any], links: Links, **common: Any) -> str:
    """`common`: what every page may show (the reviewer's name, the write token on a live page)."""
    values = {"reviewer": "", "token": "", "saved": False, "problem": None, "hint": None, **common, **context}
    values["links"] = links
    return environment().get_template(template).render(values)


def static_file(name: str) -> bytes | None:
    """A shipped asset by its exact name (no paths), or None."""
    if name not in STATIC_FILES:
        return None
    return (resources.files("prbj.view") / "static" / name).read_bytes()
