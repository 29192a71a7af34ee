"""A small LaMP-QA-format fixture (9 records, 3 per subset) and a scripted loopback model that plays every role of
`prbj build`: planner, chosen writer, rejected writer and check judge.

What the script does per record (the record's ref is in its question and in every answer it writes; the chosen
answers start "Thrifty start", the rejected ones "Premium start"):
- art-3: the check sees too small an adherence gap (5 vs 4)      → dropped, small_adherence_gap
- life-3: the check reply for the chosen answer is not readable   → dropped, check_parse_error
- soc-2: the chosen answer runs past 100 words                    → dropped, chosen_too_long (no check calls)
- soc-3: the check rates the rejected answer's factuality 2       → dropped, low_quality_rejected
- the other five are kept; in four of them the chosen answer is the longer one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SUBSETS = ("Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture")
REFS = ("art-1", "art-2", "art-3", "life-1", "life-2", "life-3", "soc-1", "soc-2", "soc-3")
KEPT = ("art-1", "art-2", "life-1", "life-2", "soc-1")
DROPPED = {
    "art-3": "small_adherence_gap",
    "life-3": "check_parse_error",
    "soc-2": "chosen_too_long",
    "soc-3": "low_quality_rejected",
}
# Requests a full build sends: 5 per record (plan, chosen, rejected, 2 checks), 3 for soc-2 (no checks).
FULL_BUILD_REQUESTS = 5 * len(REFS) - 2
_REF = re.compile(r"\(ref ([a-z]+-\d)\)")


def lamp_record(ref: str) -> dict[str, Any]:
    subset = SUBSETS[("art", "life", "soc").index(ref.split("-")[0])]
    return {
        "id": f"lamp-{ref}",
        "category": subset,
        "question": f"How should I get started with my new hobby this month? (ref {ref})",
        "narrative": f"GOLD-NARRATIVE {ref}: the asker wants cheap, hands-on first steps.",
        "rubric_aspects": [
            {"aspect": "GOLD-ASPECT low budget", "evidence": "mentions saving money", "reason": "student"},
            {"aspect": "hands-on practice", "evidence": "likes workshops", "reason": "learns by doing"},
        ],
        "profile": [
            {"id": f"{ref}-p1", "category": "money", "text": "Saving every cent while I finish my degree."},
            {
                "id": f"{ref}-p2",
                "category": "hobby",
                "text": "Loved the pottery workshop, learning by doing.",
            },
            {"id": f"{ref}-p3", "category": "misc", "text": "My cat knocked over the plant again, lol."},
        ],
    }


def write_fixture(path: Path, refs: tuple[str, ...] = REFS) -> Path:
    path.write_text("".join(json.dumps(lamp_record(r)) + "\n" for r in refs), encoding="utf-8")
    return path


def _ref(text: str) -> str:
    match = _REF.search(text)
    return match.group(1) if match else "unknown"


def chosen_answer(ref: str) -> str:
    if ref == "soc-2":
        return f"Thrifty start ({ref}): " + " ".join(["very"] * 120) + " cheap hands-on steps."
    if ref == "life-2":  # the one kept pair where the chosen answer is the shorter one
        return f"Thrifty start ({ref}): try a free beginner workshop."
    return f"Thrifty start ({ref}): begin with a free community workshop, borrow tools, practise weekly."


def rejected_answer(ref: str) -> str:
    if ref == "life-2":
        return f"Premium start ({ref}): buy a complete starter kit and follow an online video course."
    return f"Premium start ({ref}): buy a starter kit, read the theory."


def _check(ref: str, is_chosen: bool) -> str:
    if ref == "life-3" and is_chosen:
        return "This answer seems rather good overall, I would say."
    factuality = 2 if (ref == "soc-3" and not is_chosen) else 5
    adherence = 5 if is_chosen else (4 if ref == "art-3" else 1)
    scores = {"factuality": factuality, "relevance": 5, "helpfulness": 4, "adherence": adherence}
    if ref == "art-1":  # reasoning first, then a fenced block with renamed keys: still readable
        renamed = {"Factual accuracy": factuality, "Relevance": 5, "Helpfulness": "4", "Adherence": adherence}
        return "Let me weigh it.\n```json\n" + json.dumps(renamed) + "\n```"
    return json.dumps(scores)


def reply(request: Any) -> str:
    """The scripted model: which role is asked is read from the prompt it was sent."""
    text = request.prompt
    ref = _ref(text)
    if "most important aspects this user expects" in text:
        return f"- Keep costs low for {ref}: saving while studying\n- Hands-on practice: learns by doing"
    if "## Answer to rate" in text:
        answer = text.split("## Answer to rate", 1)[1]
        return _check(ref, "Thrifty start" in answer)
    if "## Aspects to avoid" in text:
        return rejected_answer(ref)
    if "## Aspects this user expects (follow all of them)" in text:
        return chosen_answer(ref)
    return "Result: A"  # any other request is a `prbj judge` call on the built pairs


def role_of(request: Any) -> str:
    text = request.prompt
    if "most important aspects this user expects" in text:
        return "planner"
    if "## Answer to rate" in text:
        return "check"
    if "## Aspects to avoid" in text:
        return "rejected"
    if "## Aspects this user expects (follow all of them)" in text:
        return "chosen"
    return "judge"
