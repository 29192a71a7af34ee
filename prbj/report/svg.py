"""A very small SVG writer: enough shapes and text for the report's charts, with every string escaped.

Hand-written SVG keeps the HTML report self-contained (no script, no web font, no image file to fetch) and
prbj free of a plotting dependency.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

FONT = "DejaVu Sans, Verdana, Helvetica, Arial, sans-serif"
INK = "#222222"
MUTED = "#6b6b6b"
GRID = "#e3e3e3"
# Okabe–Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#999933")
# Only standalone .svg files need the namespace; inline SVG in HTML must not carry any URL.
SVG_NAMESPACE = "http://www.w3.org/2000/svg"


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


# Advance widths in em of DejaVu Sans (the first font asked for), by kind of character, rounded up so that a
# fallback font a little wider still fits: narrow punctuation, digits, capitals, the widest letters, the rest.
_NARROW = frozenset(" .,:;!|'`/-·()[]{}ijlfrtI")
_WIDE = frozenset("mwMW@%—")


def text_width(text: str, size: float) -> float:
    """The width `text` takes at `size`, for layout: per kind of character, a little over DejaVu Sans."""
    em = 0.0
    for char in text:
        if char in _NARROW:
            em += 0.38
        elif char in _WIDE:
            em += 1.0
        elif char.isdigit():
            em += 0.66
        elif char.isupper():
            em += 0.76
        else:
            em += 0.64
    return em * size


def _number(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def _attributes(attrs: dict[str, object]) -> str:
    parts = []
    for key, value in attrs.items():
        if value is None:
            continue
        name = key.rstrip("_").replace("_", "-")
        rendered = _number(value) if isinstance(value, float) else str(value)
        parts.append(f' {name}="{escape(rendered, quote=True)}"')
    return "".join(parts)


class Canvas:
    def __init__(self, width: float, height: float, *, title: str) -> None:
        self.width = width
        self.height = height
        self.title = title
        self._parts: list[str] = []

    def element(self, tag: str, tooltip: str | None = None, **attrs: object) -> None:
        # A <title> child is the SVG tooltip: exact figures on hover without cluttering the chart.
        if tooltip:
            self._parts.append(f"<{tag}{_attributes(attrs)}><title>{escape(tooltip)}</title></{tag}>")
        else:
            self._parts.append(f"<{tag}{_attributes(attrs)}/>")

    def line(
        self,
        x1: float,
        y1: float,
        x2: float,
        y2: float,
        *,
        stroke: str = GRID,
        width: float = 1.0,
        dash: str | None = None,
        tooltip: str | None = None,
    ) -> None:
        self.element(
            "line",
            tooltip,
            x1=float(x1),
            y1=float(y1),
            x2=float(x2),
            y2=float(y2),
            stroke=stroke,
            stroke_width=float(width),
            stroke_dasharray=dash,
        )

    def rect(
        self,
        x: float,
        y: float,
        width: float,
        height: float,
        *,
        fill: str,
        opacity: float | None = None,
        tooltip: str | None = None,
    ) -> None:
        self.element(
            "rect",
            tooltip,
            x=float(x),
            y=float(y),
            width=float(max(width, 0.0)),
            height=float(max(height, 0.0)),
            fill=fill,
            fill_opacity=opacity,
        )

    def circle(
        self,
        cx: float,
        cy: float,
        r: float,
        *,
        fill: str,
        stroke: str | None = None,
        width: float | None = None,
        tooltip: str | None = None,
    ) -> None:
        self.element(
            "circle",
            tooltip,
            cx=float(cx),
            cy=float(cy),
            r=float(r),
            fill=fill,
            stroke=stroke,
            stroke_width=None if width is None else float(width),
        )

    def polyline(self, points: Sequence[tuple[float, float]], *, stroke: str, width: float = 2.0) -> None:
        coords = " ".join(f"{_number(float(x))},{_number(float(y))}" for x, y in points)
        self.element("polyline", None, points=coords, fill="none", stroke=stroke, stroke_width=float(width))

    def text(
        self,
        x: float,
        y: float,
        content: str,
        *,
        size: float = 12.0,
        anchor: str = "start",
        fill: str = INK,
        bold: bool = False,
        italic: bool = False,
    ) -> None:
        attrs = _attributes(
            {
                "x": float(x),
                "y": float(y),
                "font_size": float(size),
                "text_anchor": anchor,
                "dominant_baseline": "middle",
                "fill": fill,
                "font_weight": "bold" if bold else None,
                "font_style": "italic" if italic else None,
            }
        )
        self._parts.append(f"<text{attrs}>{escape(content)}</text>")

    def render(self, *, standalone: bool = False) -> str:
        header = _attributes(
            {
                "xmlns": SVG_NAMESPACE if standalone else None,
                "width": float(self.width),
                "height": float(self.height),
                "viewBox": f"0 0 {_number(float(self.width))} {_number(float(self.height))}",
                "role": "img",
                "font_family": FONT,
            }
        )
        body = "\n".join(self._parts)
        prolog = '<?xml version="1.0" encoding="UTF-8"?>\n' if standalone else ""
        return f"{prolog}<svg{header}>\n<title>{escape(self.title)}</title>\n{body}\n</svg>"
