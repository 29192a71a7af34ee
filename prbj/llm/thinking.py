"""Where a model's own reasoning ends in its reply: reasoning models (and some chat templates) put their thinking
before a `</think>` (or `</thinking>`) mark, and every reader of a reply reads only what comes after the last."""

from __future__ import annotations

import re

THINK_END = re.compile(r"</think(?:ing)?>", re.I)


def after_thinking(text: str) -> str:
    """The text after the last end-of-thinking mark; all of it when there is none."""
    return THINK_END.split(text)[-1]
