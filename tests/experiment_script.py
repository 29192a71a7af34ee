"""A small experiment for the loopback provider: planner, an LLM judge shown planner aspects, offline judges,
best-of-N with an LLM policy, reward model and gold judge (tests/bon_script.py answers those). Requests are told
apart by their system prompt, so tests count each stage's calls at the server."""

from __future__ import annotations

import textwrap
from pathlib import Path

from bon_script import GOLD_MARK, POLICY_MARK, RM_MARK
from bon_script import reply as bon_reply
from loopback import ChatRequest

PLANNER_MARK = "You help personalise answers"
KINDS = {"planner": PLANNER_MARK, "policy": POLICY_MARK, "gold": GOLD_MARK, "rm": RM_MARK}
# The stage whose calls each kind of request is.
STAGE_OF = {
    "planner": "planner",
    "judge": "judge:judge-a",
    "policy": "bon-sample",
    "rm": "bon-score",
    "gold": "bon-evaluate",
}

EXPERIMENT = """
[experiment]
name = "loop"
dataset = "sample"
limit = {limit}
seed = 42

[defaults]
api_base = "{url}"
cache_dir = "{cache}"
concurrency = 4
progress = false

[planner]
provider = "litellm:openai/planner"

[[judges]]
provider = "random"

[[judges]]
provider = "length"

[[judges]]
provider = "bm25-profile"

[[judges]]
name = "judge-a"
provider = "litellm:openai/judge-a"
context = ["none", "planner"]
{judge_extra}

[bon]
policy = "litellm:openai/policy"
gold = "litellm:openai/gold"
n = {n}
rms = ["random", "length", "bm25-profile", "litellm:openai/rm"]
"""


def kind(request: ChatRequest) -> str:
    return next((name for name, mark in KINDS.items() if mark in request.system), "judge")


def reply(request: ChatRequest) -> str:
    if kind(request) == "planner":
        return "- wants advice that fits a tight budget\n- prefers hands-on, practical steps"
    if kind(request) == "judge":
        return "Both are fine.\nResult: A"
    return bon_reply(request)


def write_experiment(
    path: Path, *, url: str, cache: Path, judge_extra: str = "", limit: int = 1, n: int = 4
) -> Path:
    text = EXPERIMENT.format(url=url, cache=cache, judge_extra=judge_extra, limit=limit, n=n)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path
