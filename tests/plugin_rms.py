"""Reward models written in Python for the plugin tests: each keeps a log of what prbj asked of it, one JSON line
per call, in a file beside it (`<file>.log`), so that a test reads what really reached the model, in this process,
a subprocess or a Ray actor alike."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

# The model's score of an answer: a hash of pair and answer, so that every pair's verdict is fixed and known to
# the test without asking the model.
LOGGED_RM = """
import hashlib
import json
import math
import threading
from pathlib import Path

LOG = Path(__file__).with_suffix(".log")
# What the bad-output tests make it return: "" (good scores), "raise", "count", "nan", "inf", or "nan:<pair>".
BAD = "{bad}"


def value(pair_id, response):
    digest = hashlib.sha256(f"{{pair_id}}\\x00{{response}}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32


def write(entry):
    with LOG.open("a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\\n")


class Logged:
    name = "logged"
    version = "{version}"

    def fit_user(self, user_id, history):
        write({{"method": "fit_user", "user": user_id, "history": [h.id for h in history]}})

    def score(self, items):
        write(
            {{
                "method": "score",
                "thread": threading.current_thread().name,
                "items": [
                    {{
                        "user": i.user_id,
                        "pair": i.pair_id,
                        "persona": i.persona,
                        "history": [h.id for h in i.history],
                        "groups": dict(i.groups),
                        "prompt": i.prompt,
                    }}
                    for i in items
                ],
            }}
        )
        if BAD == "raise":
            raise ValueError("the model broke\\nwith a second line")
        if BAD == "count":
            return [0.5] * (len(items) + 1)
        scores = [value(i.pair_id, i.response) for i in items]
        if BAD in ("nan", "inf"):
            return [float(BAD)] * len(items)
        if BAD.startswith("nan:"):
            return [math.nan if i.pair_id == BAD[4:] else s for i, s in zip(items, scores)]
        return scores
"""

# Prefers the answer shown first, always: a probe of the answer order prbj shows.
FIRST_RM = """
import json
from pathlib import Path

LOG = Path(__file__).with_suffix(".log")


class First:
    def score(self, items):
        return [0.0] * len(items)

    def prefer(self, items):
        with LOG.open("a", encoding="utf-8") as log:
            for i in items:
                log.write(json.dumps({"method": "prefer", "pair": i.pair_id, "first": i.first}) + "\\n")
        return [0.9] * len(items)
"""


def write_rm(folder: Path, *, bad: str = "", version: str = "1", name: str = "logged_rm.py") -> Path:
    path = folder / name
    path.write_text(LOGGED_RM.format(bad=bad, version=version), encoding="utf-8")
    return path


def expected_score(pair_id: str, response: str) -> float:
    """What the logged model scores (its `value`), computed here without it."""
    digest = hashlib.sha256(f"{pair_id}\x00{response}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32


def read_log(rm: Path) -> list[dict[str, Any]]:
    log = rm.with_suffix(".log")
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def clear_log(rm: Path) -> None:
    rm.with_suffix(".log").unlink(missing_ok=True)
