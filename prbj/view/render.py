"""Pages as HTML: Jinja2 templates shipped in the package, every value escaped unless a template marks it safe
(only the report's SVG charts, whose writer escapes every string)."""

from __future__ import annotations

import math
from functools import cache
from importlib import resources
from typing import Any

import jinja2

from prbj.view.links import Links

STATIC_FILES = ("viewer.css", "viewer.js")


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "—"
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"


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
