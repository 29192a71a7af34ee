"""Shared helpers: hand-made records and files in the benchmark's schema."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

# Pseudonym tables and a guarded run's texts go to an owner-only store outside the project (by default under the
# home folder): the tests', and the prbj processes they start, get one of their own.
os.environ.setdefault("PRBJ_PRIVATE_DIR", tempfile.mkdtemp(prefix="prbj-private-"))

SUBSET_NAMES = ("Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture")


def make_record(index: int = 1, subset: str = "Art_and_Entertainment", **overrides: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": f"t-{index:03d}",
        "category": subset,
        "question": f"Which film camera should I buy for street photography? (question {index})",
        "profile": [
            {
                "id": f"t-{index:03d}-p1",
                "category": "photo",
                "text": "I shoot black and white film on a budget.",
            },
            {
                "id": f"t-{index:03d}-p2",
                "category": "photo",
                "text": "Developing my own rolls at home lately.",
            },
            {
                "id": f"t-{index:03d}-p3",
                "category": "cooking",
                "text": "Any tips for a crusty sourdough loaf?",
            },
        ],
        "narrative": "SECRET-NARRATIVE: the user wants cheap, manual, film-first advice.",
        "rubric_aspects": [
            {"aspect": "SECRET-ASPECT budget", "evidence": "shoots on a budget", "reason": "money is tight"},
            {"aspect": "film development", "evidence": "develops at home", "reason": "hands-on hobbyist"},
        ],
        "chosen": "A used manual rangefinder is cheap, and black and white film you develop at home keeps costs low.",
        "rejected": "A new mirrorless camera with a fast prime lens gives great autofocus for busy streets.",
    }
    record.update(overrides)
    return record


def write_jsonl(path: Path, records: Sequence[Any]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def record_factory() -> Callable[..., dict[str, Any]]:
    return make_record


@pytest.fixture
def small_dataset(tmp_path: Path) -> Path:
    """Six valid pairs, two per subset."""
    records = [make_record(i, SUBSET_NAMES[(i - 1) // 2]) for i in range(1, 7)]
    return write_jsonl(tmp_path / "pairs.jsonl", records)


# A paid OpenAI-shaped profile for the loopback provider (tests/loopback.py), reached with --api-base.
OPENAI_PROFILE = (
    'model = "openai/{model}"\napi_key_env = "OPENAI_API_KEY"\nmax_concurrency = 8\n'
    "[price]\ninput = 3\noutput = 15\n[params]\ntemperature = 0\nmax_tokens = 40\n"
)


@pytest.fixture
def openai_profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A --providers-dir with two profiles, `judge` and `planner`, for the loopback provider; a key is set."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
    folder = tmp_path / "providers"
    folder.mkdir()
    for name in ("judge", "planner"):
        (folder / f"{name}.toml").write_text(OPENAI_PROFILE.replace("{model}", f"{name}-model"))
    return folder
