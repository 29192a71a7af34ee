"""Read a judge's final verdict (A/B) or score from its reply, and nothing else.

The official script reads the text after `Result:` and counts anything unparseable as "A", which is silently
right half the time. Here an unreadable reply is `None` (a counted parse error). The verdict comes from the
judge's final answer: copies of the answers it was shown are cut out first (an answer may itself contain
"Result: B", "[[A]]" or even "</think>"), then reasoning before `</think>` is dropped, verdicts the judge cites
between quotation marks are ignored, and the last explicit verdict wins.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from prbj.llm.thinking import THINK_END, after_thinking

PARSER_VERSION = "3"
# Between the replies of one judgment's calls (both orders, two answers scored, a repair turn) in the
# `reply` column of judgments.parquet: LLM judges join them with it, the viewer splits them again.
REPLY_SEPARATOR = "\n\n----- next call -----\n\n"

# The verdict letter: a capital A/B, or a lone lower-case a/b that ends the line or a clause, so the article in
# "Verdict: a tie" is not read as A; "A and B", "A/B" or "A or B" name both answers and are no verdict.
_LETTER = (
    r"((?-i:[AB])|[ab](?=[ \t]*(?:$|[\r\n.,;:!)\]*\"'`])))"
    r"\b(?![\w'])(?!\s*(?:and|or|&|/)\s*[AB]\b)"
)
_VERDICT_PATTERNS = [
    # Result: B / **Result:** B / Final verdict - [B] / Answer: "A"
    re.compile(
        r"(?:result|verdict|final\s+answer|answer|winner|choice|preferred|better\s+answer)\s*\**\s*[:=\-]\s*\**\s*"
        r"[\[\(\"'“]*\s*(?:answer|response|assistant|output)?\s*" + _LETTER,
        re.I,
    ),
    re.compile(r"\[\[\s*([AB])\s*\]\]", re.I),
]
_OPEN_QUOTES = set("\"'“‘`")
_CLOSE_QUOTES = set("\"'”’`")
_BARE = re.compile(r"^[\s\*\[\(\"'`]*(?:answer|response)?\s*([AB])[\s\*\]\)\"'`.]*$", re.I)
_SCORE = re.compile(r"(?:score|rating)\s*\**\s*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)(?:\s*/\s*10)?", re.I)


def final_part(reply: str) -> str:
    """What the judge said after its reasoning: text after the last `</think>`."""
    return after_thinking(reply)


def strip_quotes(text: str, shown: Sequence[str]) -> str:
    """Cut out verbatim copies of the texts the judge was shown, and lines quoted from them."""
    for original in sorted((s for s in shown if s.strip()), key=len, reverse=True):
        text = text.replace(original.strip(), " ")
    shown_lines: set[str] | None = None  # built only when a line could be a quote: most replies have none
    # A line found in no shown text is in none of its lines: one search of them all rules most lines out.
    everything_shown: str | None = None
    kept = []
    for line in text.splitlines():
        blockquote = line.lstrip().startswith(">")
        bare = line.strip().lstrip(">").strip().strip("\"'“”")
        # A markdown block quote of any length is a quote; a plain line only when long enough to be one.
        if bare and (blockquote or len(bare) >= 12):
            if everything_shown is None:
                everything_shown = "\n".join(shown)
            if bare not in everything_shown:
                kept.append(line)
                continue
            if shown_lines is None:
                shown_lines = {
                    row.strip() for original in shown for row in original.splitlines() if row.strip()
                }
            if any(bare in quoted for quoted in shown_lines):
                continue
        kept.append(line)
    return "\n".join(kept)


def _inside_quotes(text: str, start: int, end: int) -> bool:
    """A verdict written between quotation marks is cited ('the answer says "Result: A"'), not given."""
    before = text[start - 1] if start > 0 else ""
    after = text[end : end + 2].lstrip(" *.,")[:1]
    return before in _OPEN_QUOTES and after in _CLOSE_QUOTES


def _final_answer(reply: str, shown: Sequence[str]) -> str:
    # Quotes go first: an answer may itself contain `</think>`, and splitting on a quoted one would drop the
    # judge's real verdict written before the quote.
    return final_part(strip_quotes(reply, shown))


def verdict_spans(text: str) -> list[tuple[int, int, str]]:
    """Every explicit verdict in `text` that is not cited between quotes: (start, end, letter), by start.
    parse_verdict takes the last; the viewer marks it in the reply."""
    found: list[tuple[int, int, str]] = []
    for pattern in _VERDICT_PATTERNS:
        found.extend(
            (m.start(), m.end(), m.group(1).upper())
            for m in pattern.finditer(text)
            if not _inside_quotes(text, m.start(), m.end())
        )
    return sorted(found)


def bare_verdict(line: str) -> str | None:
    """A last line that is only a letter ("B", "**Answer A**"): the verdict when no explicit one was given."""
    bare = _BARE.match(line)
    return bare.group(1).upper() if bare else None


def parse_verdict(reply: str | None, shown: Sequence[str] = ()) -> str | None:
    """'A', 'B' or None when the reply holds no readable final verdict."""
    if not reply:
        return None
    text = _final_answer(reply, shown)
    found = verdict_spans(text)
    if found:
        # The last explicit verdict wins; of two starting at one place, the higher letter (as before).
        return max((start, letter) for start, _, letter in found)[1]
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return bare_verdict(lines[-1]) if lines else None


def verdict_position(reply: str | None, shown: Sequence[str] = ()) -> tuple[str, int] | None:
    """The verdict `parse_verdict` reads and where its letter stands in `reply` (a character offset), so that
    the token the model generated there can be found. The same reading as parse_verdict, on a copy of the
    reply in which what it would cut out is blanked instead (quoted answers, quoted lines, reasoning before
    `</think>`), so that offsets keep pointing into the reply; None when there is no verdict, or in the rare
    reply where the blanked copy reads otherwise than parse_verdict (no position rather than a wrong one)."""
    letter = parse_verdict(reply, shown)
    if letter is None or not reply:
        return None
    text = _blanked_final_answer(reply, shown)
    found: list[tuple[int, str, int]] = []
    for pattern in _VERDICT_PATTERNS:
        found.extend(
            (m.start(), m.group(1).upper(), m.start(1))
            for m in pattern.finditer(text)
            if not _inside_quotes(text, m.start(), m.end())
        )
    if found:
        _, read, at = max(found)
    else:
        last = _last_line(text)
        bare = _BARE.match(text[last[0] : last[1]]) if last is not None else None
        if last is None or bare is None:
            return None
        read, at = bare.group(1).upper(), last[0] + bare.start(1)
    return (letter, at) if read == letter else None


def verdict_and_reasoning(reply: str, shown: Sequence[str] = ()) -> tuple[str | None, str]:
    """The verdict `parse_verdict` reads and the reasoning written before it: the reply's visible text (after
    the last `</think>`) up to the line holding the verdict, that line's own start ("Result: ") left out; ""
    when nothing came before it or the verdict's place is not found."""
    verdict = parse_verdict(reply, shown)
    position = verdict_position(reply, shown)
    if verdict is None or position is None:
        return verdict, ""
    before = after_thinking(reply[: position[1]])
    line_start = before.rfind("\n")
    return verdict, before[:line_start].strip() if line_start >= 0 else ""


def _blanked_final_answer(reply: str, shown: Sequence[str]) -> str:
    """`_final_answer` with every cut replaced by spaces of the same length: same offsets as `reply`."""
    text = reply
    for original in sorted((s for s in shown if s.strip()), key=len, reverse=True):
        quoted = original.strip()
        text = text.replace(quoted, " " * len(quoted))
    shown_lines = {row.strip() for original in shown for row in original.splitlines() if row.strip()}
    pieces = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        bare = body.strip().lstrip(">").strip().strip("\"'“”")
        quoted_line = bare and (body.lstrip().startswith(">") or len(bare) >= 12)
        if quoted_line and any(bare in quoted for quoted in shown_lines):
            line = " " * len(body) + line[len(body) :]
        pieces.append(line)
    text = "".join(pieces)
    ends = [m.end() for m in THINK_END.finditer(text)]
    return " " * ends[-1] + text[ends[-1] :] if ends else text


def _last_line(text: str) -> tuple[int, int] | None:
    """(start, end) of the last line holding anything but whitespace."""
    spans = [(m.start(), m.end()) for m in re.finditer(r"[^\r\n]*", text) if m.group().strip()]
    return spans[-1] if spans else None


def parse_score(
    reply: str | None, shown: Sequence[str] = (), *, low: float = 1, high: float = 10
) -> float | None:
    """The last `Score: N` in the final answer, if it lies on the stated scale."""
    if not reply:
        return None
    text = _final_answer(reply, shown)
    matches = list(_SCORE.finditer(text))
    if not matches:
        bare = text.strip().splitlines()[-1].strip(" *`.") if text.strip() else ""
        if re.fullmatch(r"-?\d+(?:\.\d+)?", bare):
            value = float(bare)
            return value if low <= value <= high else None
        return None
    value = float(matches[-1].group(1))
    return value if low <= value <= high else None
