"""A scripted policy, reward model and gold judge for the loopback provider, so BoN tests know what to expect.

- policy: sample i is sent with seed 42+i and answers with words of the profile section it was shown, picked by
  `ANSWERS[seed]` (offset, length); sample 3 starts with "UNGRADABLE";
- gold judge: every aspect gets min(2, words // 4) for an answer of `words` words, so a longer pick grades
  higher; an answer starting with "UNGRADABLE" gets a reply with no JSON (a parse error);
- LLM reward model (pointwise): "Score: n" with n = 1 + words % 10.
"""

from __future__ import annotations

import json
import re

from loopback import ChatRequest

POLICY_MARK = "writes answers personalized"
GOLD_MARK = "impartial grader"
RM_MARK = "impartial evaluator of an answer"


# seed → (first profile word, number of words). Samples 1 and 2 are as long as each other but differ.
ANSWERS = {42: (0, 4), 43: (0, 9), 44: (1, 9), 45: (0, 9)}
UNGRADABLE_SEED = 45


def gold_aspect_score(answer: str) -> int:
    return min(2, len(answer.split()) // 4)


def policy_answer(prompt: str, seed: int) -> str:
    profile = prompt.split("## The user's past posts\n", 1)[1].split("\n\n## The user's question", 1)[0]
    words = re.findall(r"[A-Za-z']+", profile)
    start, count = ANSWERS.get(seed, (seed % 5, 3 + seed % 7))
    text = " ".join(words[start : start + count])
    return f"UNGRADABLE {text}" if seed == UNGRADABLE_SEED else text


def _graded_answer(prompt: str) -> str:
    return prompt.split("## The answer to grade\n", 1)[1].split("\n\n## ", 1)[0]


def reply(request: ChatRequest) -> str:
    if POLICY_MARK in request.system:
        return policy_answer(request.last_user, int(request.body.get("seed", 0)))
    if GOLD_MARK in request.system:
        answer = _graded_answer(request.last_user)
        if answer.startswith("UNGRADABLE"):
            return "I would rather not say."
        score = gold_aspect_score(answer)
        if "## Aspects (" in request.last_user:
            count = int(request.last_user.split("## Aspects (", 1)[1].split(",", 1)[0])
            return "Here you go:\n```json\n" + json.dumps({"scores": [score] * count}) + "\n```"
        return json.dumps({"match_score": score})
    if RM_MARK in request.system:
        answer = request.last_user.split("## Answer\n", 1)[1].split("\n\nHow well", 1)[0]
        return f"Looks fine.\nScore: {1 + len(answer.split()) % 10}"
    raise AssertionError(f"unexpected request: {request.system[:80]!r}")


def is_gold(request: ChatRequest) -> bool:
    return GOLD_MARK in request.system
