"""A run to export: the real `prbj judge` on pairs whose profiles carry a unique marker, judged by a loopback
LLM judge (profile and none contexts, both answer orders drawn) that quotes the profile back in its reply, and
by offline judges. One pair's reply has no verdict (a parse error), so failures travel too."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from loopback import ChatRequest, ProviderServer
from test_generative import Harness, chosen_letter, other, pair_index, records

# Planted in every profile post, the narrative and the rubric evidence: no export may carry it unless it was
# given --include-profiles, and no hashed input ever.
MARKER = "ZQXPROFILEMARKER"
RIGHT = {1, 2, 4, 5, 7, 8}  # the LLM judge is right on these pairs, wrong on the others
UNREADABLE = 3  # its reply to this pair holds no verdict


def marked_records(n: int) -> list[dict[str, Any]]:
    out = records(n)
    for i, record in enumerate(out, start=1):
        record["profile"] = [
            {
                "id": f"t-{i:03d}-p1",
                "category": "photo",
                "text": f"{MARKER}{i} shoots film on a tight budget.",
            },
            {"id": f"t-{i:03d}-p2", "category": "photo", "text": f"I develop my rolls at home {MARKER}{i}."},
        ]
        record["narrative"] = f"{MARKER} narrative of user {i}."
        for aspect in record["rubric_aspects"]:
            aspect["evidence"] = f"{MARKER} evidence {i}"
    return out


def quoting_judge(request: ChatRequest) -> str:
    """Quotes the first profile post it was shown (as LLM judges do), then gives its verdict."""
    i = pair_index(request.prompt)
    if i == UNREADABLE:
        return "Both answers have merit; I cannot choose."
    letter = chosen_letter(request)
    verdict = letter if i in RIGHT else other(letter)
    quoted = re.search(rf"{MARKER}\d+ shoots film on a tight budget\.", request.prompt)
    because = f'The user wrote "{quoted.group(0)}", so' if quoted else "On the question alone,"
    return f"{because} answer {verdict} fits better.\nResult: {verdict}"


def judged_run(tmp_path: Path, n: int = 9) -> Path:
    """The run directory: gemini-3-flash (profile and none) and the offline length and bm25-profile judges."""
    with ProviderServer(reply=quoting_judge) as server:
        harness = Harness(tmp_path, server)
        run = harness.judge(
            harness.dataset(marked_records(n)),
            "--context", "profile", "--context", "none", "-p", "length", "-p", "bm25-profile",
        )  # fmt: skip
    assert run.exit_code == 0, run.output
    assert run.run_dir is not None
    return run.run_dir
