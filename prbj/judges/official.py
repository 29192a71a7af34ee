"""`--protocol official`: the settings of the official Personalized-RewardBench scripts, reproduced so that a
prbj figure can stand next to the paper's (docs/protocol.md lists every difference and why prbj's default
differs).

prbj ships none of the official prompt text: the official prompts are read from the user's clone of the official
repository (`--official-repo PATH`). What is reproduced here is behaviour: the A/B draw, the verdict rule, the
layout of a reward model's input and the gold judge's list reply.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from prbj.data.schema import Pair, ProfilePost
from prbj.errors import ConfigError
from prbj.prompts import Template

Protocol = Literal["prbj", "official"]
PROTOCOLS: tuple[Protocol, ...] = ("prbj", "official")
# What `--scalar-input` selects: prbj's (the message list tokenised once, middle truncation) or the official
# one (the chat formatted to text and tokenised again, right truncation).
ScalarInput = Literal["chat", "official"]

# Files of the official repository that official mode reads, relative to its root.
PAIRWISE_SYSTEM = "prompts/pairwise_system.txt"
PAIRWISE_USER = "prompts/pairwise_user.txt"
GOLD_PROMPT = "prompts/evaluation.txt"
# The gold judge's system line is written inline in this script, not in a prompt file.
GOLD_SCRIPT = "BoN/evaluate.py"
# Official limits: the gold judge may answer in 32 tokens; the served LLM judge's score lies on [0, 1].
GOLD_MAX_TOKENS = 32
SERVED_SCALE = (0.0, 1.0)
OFFICIAL_MAX_LENGTH = 8192

_SYSTEM_LINE = re.compile(r"""["']role["']\s*:\s*["']system["']\s*,\s*["']content["']\s*:\s*(["'])(.+?)\1""")
_LIST = re.compile(r"\[([^\]]+)\]")
_NUMBER = re.compile(r"-?\d+\.?\d*")


@dataclass(frozen=True)
class OfficialRepo:
    """The user's clone of the official repository; every read names the missing file on failure."""

    root: Path

    def path(self, relative: str) -> Path:
        found = self.root / relative
        if not found.is_file():
            raise ConfigError(
                f"--official-repo {self.root}: {relative} is missing (clone "
                "https://github.com/Martin-qyma/Personalized-RewardBench and pass its folder)"
            )
        return found

    def text(self, relative: str) -> str:
        # The official scripts strip their templates when loading them.
        return self.path(relative).read_text(encoding="utf-8").strip()

    def template(self, relative: str) -> Template:
        return Template(f"official:{relative}", self.text(relative))

    def system_line(self, script: str = GOLD_SCRIPT) -> str:
        """The system message a script writes inline (the gold judge's), read from the user's clone."""
        match = _SYSTEM_LINE.search(self.text(script))
        if match is None:
            raise ConfigError(f"--official-repo {self.root}: no system message found in {script}")
        return match.group(2)


def require_repo(repo: Path | None, protocol: Protocol) -> OfficialRepo | None:
    """The official repository when the official protocol runs (then it is required); None otherwise. A folder
    given that is not there is refused whether or not a judge would read it (a typo must not pass unseen)."""
    if repo is not None and not repo.is_dir():
        raise ConfigError(
            f"--official-repo {repo}: no such folder (your clone of "
            "https://github.com/Martin-qyma/Personalized-RewardBench)"
        )
    if protocol != "official":
        return None
    if repo is None:
        raise ConfigError(
            "--protocol official needs --official-repo PATH (your clone of the official repository: prbj "
            "does not ship its prompts)"
        )
    return OfficialRepo(repo)


def official_positions(pairs: Sequence[Pair], seed: int) -> dict[str, str]:
    """Where the chosen answer goes, as the official script draws it: one stream reseeded with `seed` for each
    subset, one draw per pair in dataset order, chosen shown as A when the draw is below 0.5. With --limit the
    selected pairs are the first of their subset, so their draws are the official ones too."""
    positions: dict[str, str] = {}
    streams: dict[str, random.Random] = {}
    for pair in pairs:
        stream = streams.setdefault(pair.category, random.Random(seed))
        positions[pair.id] = "A" if stream.random() < 0.5 else "B"
    return positions


def parse_official_verdict(reply: str | None) -> str | None:
    """The official rule: after the last `</think>`, with `"` and `*` removed, the text following the *first*
    `result:` (case-insensitive) starts with a or b. Unlike the official script, a reply without one is None
    (a counted parse error), never "A"."""
    if not reply:
        return None
    text = reply.strip().split("</think>")[-1].strip()
    text = text.replace('"', "").replace("*", "").strip().lower()
    if "result:" not in text:
        return None
    section = text.split("result:")[1].strip()
    if section.startswith("a"):
        return "A"
    if section.startswith("b"):
        return "B"
    return None


def official_posts(posts: Sequence[ProfilePost], k: int = 10) -> str:
    """Profile posts laid out as the official best-of-N data has them: numbered, with their category."""
    return "\n".join(
        f"Post {n} (Category: {post.category}):\n{post.text}" for n, post in enumerate(posts[:k], start=1)
    )


def official_user_turn(question: str, profile: str) -> str:
    """The official BoN/PPO reward-model user turn: question and profile concatenated with nothing between."""
    return question + profile


def official_aspects(aspects: Sequence[str]) -> str:
    """Aspect names only, joined with ", ", as the official gold prompt shows them."""
    return ", ".join(aspects)


def parse_official_scores(reply: str | None) -> list[float] | None:
    """The official gold reply: the numbers inside the first `[...]`, else every number in the reply. None when
    there is none (the official script scores that 0; prbj counts it as a failed grade)."""
    if not reply:
        return None
    text = reply.strip()
    found = _LIST.search(text)
    numbers = _NUMBER.findall(found.group(1) if found else text)
    return [float(n) for n in numbers] or None


def to_served_scale(score: float, low: float, high: float) -> float:
    """A score on prbj's [low, high] judge scale mapped linearly onto the official served scale [0, 1]."""
    lo, hi = SERVED_SCALE
    return lo + (score - low) * (hi - lo) / (high - low)
