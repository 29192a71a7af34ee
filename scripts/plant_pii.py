"""Write copies of bundled samples with made-up personal details planted in their profiles, the data
docs/privacy.md measures what pseudonymizing costs on:

- examples/planted_pii.jsonl: one subset of Personalized RewardBench's sample (one pair per user). Each user gets
  a fictional identity: a first name, an email and a URL on the reserved example.* domains, and a phone number in
  the 555-01xx range set aside for fiction. Three of the user's posts mention them, the email twice, so a
  consistent pseudonym is visible across posts (a user with fewer than seven posts gets no phone).
- examples/planted_pii_users.jsonl: the sample of the personal-reward-bench card (per-user layout, two judged
  pairs per user), with an identity planted the same way in the questions of the user's earlier choices (their
  history), the email twice.

The name is planted too, and stays: the pattern recognizers do not find names (docs/privacy.md says which
entities need an NER model).

    python scripts/plant_pii.py            # rewrites both files
    python scripts/plant_pii.py --check    # exit 1 when a committed file differs from what this writes
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

SUBSET = "Art_and_Entertainment"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
OUT = EXAMPLES / "planted_pii.jsonl"
OUT_USERS = EXAMPLES / "planted_pii_users.jsonl"
PER_USER_SAMPLE = ("benchmarks", "personal-reward-bench", "preferences.jsonl")
NAMES = ("Maya", "Jonas", "Priya", "Tomas", "Aisha", "Lena", "Omar", "Ines", "Kofi", "Mei")
DOMAINS = ("example.com", "example.org", "example.net")


def identity(index: int) -> tuple[str, str, str, str]:
    """A made-up name, email, phone number and URL for the index-th user."""
    name = NAMES[index % len(NAMES)]
    domain = DOMAINS[index % len(DOMAINS)]
    email = f"{name.lower()}.{index:02d}@{domain}"
    phone = f"+1 415-555-01{index:02d}"
    url = f"https://{name.lower()}{index:02d}.{domain}/portfolio"
    return name, email, phone, url


def planted(record: dict, index: int) -> dict:
    name, email, phone, url = identity(index)
    lines = {
        0: f" I'm {name}; reach me at {email} if you want to swap notes.",
        3: f" My work is up at {url}, and {email} still works for feedback.",
        6: f" Text me on {phone} before the weekend session.",
    }
    profile = [
        {**post, "text": post["text"] + lines.get(position, "")}
        for position, post in enumerate(record["profile"])
    ]
    return {**record, "profile": profile}


def planted_history(record: dict, index: int, position: int) -> dict:
    """One of a user's records: the first three of their earlier choices (train and val rows, in file order)
    get the identity in the question; judged (test) rows are left as they are."""
    if record["split"] == "test" or position > 2:
        return record
    name, email, phone, url = identity(index)
    line = {
        0: f" I'm {name}, by the way: {email}.",
        1: f" My notes are at {url} if that helps.",
        2: f" Reply to {email} or text {phone}, whichever is quicker.",
    }[position]
    first, *rest = record["context"]
    return {**record, "context": [{**first, "content": first["content"] + line}, *rest]}


def _records(*path: str) -> list[dict]:
    text = resources.files("prbj.data").joinpath(*path).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _lines(records: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def render() -> str:
    return _lines([planted(r, i) for i, r in enumerate(_records("sample", f"{SUBSET}.jsonl"))])


def render_users() -> str:
    users: dict[str, int] = {}
    seen: dict[str, int] = {}
    records = []
    for record in _records(*PER_USER_SAMPLE):
        index = users.setdefault(record["user_id"], len(users))
        position = seen[record["user_id"]] = seen.get(record["user_id"], -1) + 1
        records.append(planted_history(record, index, position))
    return _lines(records)


def main(argv: list[str]) -> int:
    stale = 0
    for out, written in ((OUT, render()), (OUT_USERS, render_users())):
        if "--check" in argv:
            same = out.is_file() and out.read_text(encoding="utf-8") == written
            print("up to date" if same else f"{out} differs from what scripts/plant_pii.py writes")
            stale += not same
        else:
            out.write_text(written, encoding="utf-8")
            print(f"wrote {out}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
