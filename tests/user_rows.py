"""Judgments of a small per-user benchmark, made by hand so that every per-user figure can be computed by hand:
five users, some with several pairs, a tie, failures, a withheld verdict, an age group and seen/unseen users,
in the columns a per-user run writes (`user_id`, `group:<key>`, `user_seen`)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from run_dirs import judgment

# user, pair, outcome (correct | wrong | tie | a failed or withheld status), age band, seen
USERS: list[tuple[str, str, str, str, bool]] = [
    ("u1", "p01", "correct", "18-24", True),
    ("u1", "p02", "correct", "18-24", True),
    ("u1", "p03", "wrong", "18-24", True),
    ("u2", "p04", "correct", "18-24", True),
    ("u2", "p05", "tie", "18-24", True),
    ("u3", "p06", "wrong", "25-34", False),
    ("u3", "p07", "wrong", "25-34", False),
    ("u3", "p08", "api_error", "25-34", False),
    ("u4", "p09", "parse_error", "25-34", False),
    ("u5", "p10", "abstained", "25-34", False),
]
SUBSET = "chatbot_arena"

# By hand: u1 2/3, u2 1/2 (a tie is decided, never correct), u3 0/2 (its failure leaves the count); u4 and u5
# decided nothing and are left out of the mean.
USER_ACCURACY = float((Fraction(2, 3) + Fraction(1, 2) + Fraction(0, 2)) / 3)
PAIR_ACCURACY = 3 / 7
# Group 18-24: u1 and u2; group 25-34: u3 alone decided (u4 and u5 counted among its users).
GROUP_USER_ACCURACY = {"18-24": float((Fraction(2, 3) + Fraction(1, 2)) / 2), "25-34": 0.0}
GROUP_PAIR_ACCURACY = {"18-24": 3 / 5, "25-34": 0.0}


def user_judgment(user: str, pair: str, outcome: str, age: str, seen: bool, judge: str, **kw: Any) -> dict:
    status = outcome if outcome not in ("correct", "wrong", "tie") else "ok"
    row = judgment(
        pair, SUBSET, judge, correct=outcome == "correct", status=status, tie=outcome == "tie", **kw
    )
    return row | {"user_id": user, "group:age": age, "user_seen": seen}


def per_user_rows(judge: str = "judge-x", context: str = "profile") -> list[dict[str, Any]]:
    return [user_judgment(*spec, judge, context=context) for spec in USERS]
