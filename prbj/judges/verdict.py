"""Read a judge's final verdict (A/B) or score from its reply, and nothing else.

The official script reads the text after `Result:` and counts anything unparseable as "A", which is silently
right half the time. Here an unreadable reply is `None` (a counted parse error). The verdict comes from the
judge's final answer: reasoning before `</think>` is dropped, copies of the answers it was shown are cut out
(an answer may itself contain "Result: B"), and the last explicit verdict wins.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

PARSER_VERSION = "1"

_THINK_END = re.compile(r"</think(?:ing)?>", re.I)
_VERDICT_PATTERNS = [
    # Result: B / **Result:** B / Final verdict - [B] / Answer: "A"
    re.compile(
        r"(?:result|verdict|final\s+answer|answer|winner|choice|preferred|better\s+answer)\s*\**\s*[:=\-]\s*\**\s*"
        r"[\[\(\"'“]*\s*(?:answer|response|assistant|output)?\s*([AB])\b(?![\w'])",
        re.I,
    ),
    re.compile(r"\[\[\s*([AB])\s*\]\]", re.I),
]
_BARE = re.compile(r"^[\s\*\[\(\"'`]*(?:answer|response)?\s*([AB])[\s\*\]\)\"'`.]*$", re.I)
_SCORE = re.compile(r"(?:score|rating)\s*\**\s*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)(?:\s*/\s*10)?", re.I)


def final_part(reply: str) -> str:
    """What the judge said after its reasoning: text after the last `</think>`."""
    parts = _THINK_END.split(reply)
    return parts[-1] if len(parts) > 1 else reply


def strip_quotes(text: str, shown: Sequence[str]) -> str:
    """Cut out verbatim copies of the texts the judge was shown, and lines quoted from them."""
    for original in sorted((s for s in shown if s.strip()), key=len, reverse=True):
        text = text.replace(original.strip(), " ")
    quoted_lines = {
        line.strip() for original in shown for line in original.splitlines() if len(line.strip()) >= 12
    }
    kept = []
    for line in text.splitlines():
        bare = line.strip().lstrip(">").strip().strip("\"'“”")
        if bare and any(bare in quoted for quoted in quoted_lines) and len(bare) >= 12:
            continue
        kept.append(line)
    return "\n".join(kept)


def parse_verdict(reply: str | None, shown: Sequence[str] = ()) -> str | None:
    """'A', 'B' or None when the reply holds no readable final verdict."""
    if not reply:
        return None
    text = strip_quotes(final_part(reply), shown)
    found: list[tuple[int, str]] = []
    for pattern in _VERDICT_PATTERNS:
        found.extend((m.start(), m.group(1).upper()) for m in pattern.finditer(text))
    if found:
        return max(found)[1]
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if lines:
        bare = _BARE.match(lines[-1])
        if bare:
            return bare.group(1).upper()
    return None


def parse_score(
    reply: str | None, shown: Sequence[str] = (), *, low: float = 1, high: float = 10
) -> float | None:
    """The last `Score: N` in the final answer, if it lies on the stated scale."""
    if not reply:
        return None
    text = strip_quotes(final_part(reply), shown)
    matches = list(_SCORE.finditer(text))
    if not matches:
        bare = text.strip().splitlines()[-1].strip(" *`.") if text.strip() else ""
        if re.fullmatch(r"-?\d+(?:\.\d+)?", bare):
            value = float(bare)
            return value if low <= value <= high else None
        return None
    value = float(matches[-1].group(1))
    return value if low <= value <= high else None
