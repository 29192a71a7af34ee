"""Write a copy of one subset of the bundled sample with made-up personal details planted in its profiles:
examples/planted_pii.jsonl, the data docs/privacy.md measures what pseudonymizing costs on.

Each user (pair) gets a fictional identity: a first name, an email and a URL on the reserved example.* domains,
and a phone number in the 555-01xx range set aside for fiction. Three of the user's posts mention them, the email
twice, so a consistent pseudonym is visible across posts (a user with fewer than seven posts gets no phone). The
name is planted too, and stays: the pattern recognizers do not find names (docs/privacy.md says which entities
need an NER model).

    python scripts/plant_pii.py            # rewrites examples/planted_pii.jsonl
    python scripts/plant_pii.py --check    # exit 1 when the committed file differs from what this writes
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

SUBSET = "Art_and_Entertainment"
OUT = Path(__file__).resolve().parents[1] / "examples" / "planted_pii.jsonl"
NAMES = ("Maya", "Jonas", "Priya", "Tomas", "Aisha", "Lena", "Omar", "Ines", "Kofi", "Mei")
DOMAINS = ("example.com", "example.org", "example.net")


def planted(record: dict, index: int) -> dict:
    name = NAMES[index % len(NAMES)]
    domain = DOMAINS[index % len(DOMAINS)]
    email = f"{name.lower()}.{index:02d}@{domain}"
    phone = f"+1 415-555-01{index:02d}"
    url = f"https://{name.lower()}{index:02d}.{domain}/portfolio"
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


def render() -> str:
    text = (resources.files("prbj.data") / "sample" / f"{SUBSET}.jsonl").read_text(encoding="utf-8")
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    return "".join(json.dumps(planted(r, i), ensure_ascii=False) + "\n" for i, r in enumerate(records))


def main(argv: list[str]) -> int:
    written = render()
    if "--check" in argv:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == written
        print("up to date" if same else f"{OUT} differs from what scripts/plant_pii.py writes")
        return 0 if same else 1
    OUT.write_text(written, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
