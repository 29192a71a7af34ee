"""Per-user preference records for tests: every text carries a marker naming its user and row, so that a test can
tell whose history reached a judge."""

from __future__ import annotations

from typing import Any

USERS = ("u1", "u2", "u3", "u4")
HISTORY_ROWS = 4  # three train rows and one val row per user
TEST_ROWS = 2


def history_marker(user: str, n: int) -> str:
    return f"HIST{user}n{n}"


def judged_marker(user: str, n: int) -> str:
    return f"TEST{user}t{n}"


def user_records(users: tuple[str, ...] = USERS) -> list[dict[str, Any]]:
    """Each user: three train rows, one val row (their history), then two test rows; a persona, facts and
    groups; u1 and u2 seen, the others not."""
    records: list[dict[str, Any]] = []
    for index, user in enumerate(users):
        age = "18-34" if index % 2 == 0 else "35+"
        for n in range(1, HISTORY_ROWS + 1):
            marker = history_marker(user, n)
            records.append(
                {
                    "user_id": user,
                    "prompt": f"{marker} which camera lens should I get for portraits",
                    "chosen": f"{marker}chosen a bright prime lens",
                    "rejected": f"{marker}rejected a long zoom lens",
                    "split": "val" if n == HISTORY_ROWS else "train",
                    "persona": f"PERSONA{user} a hobby photographer",
                    "facts": {"budget": f"FACT{user} small"},
                }
            )
        for n in range(1, TEST_ROWS + 1):
            marker = judged_marker(user, n)
            records.append(
                {
                    "user_id": user,
                    "id": f"{user}-test-{n}",
                    "context": [
                        {"role": "user", "content": f"{marker} I want to shoot portraits"},
                        {"role": "assistant", "content": "What camera do you have?"},
                        {"role": "user", "content": f"{marker} an old film camera, which lens now"},
                    ],
                    "chosen": {"role": "assistant", "content": f"{marker}answer a bright prime lens"},
                    "rejected": f"{marker}other a long zoom lens",
                    "split": "test",
                    "groups": {"age": age},
                    "seen": index < 2,
                }
            )
    return records
