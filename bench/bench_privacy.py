"""What `--personal-data pseudonymized` costs in time (issue 42 item 7), measured side by side in one run.

    python bench/bench_privacy.py [--users 100] [--rounds 3]

Per-user data (--users users, two judged pairs each, every marker kind of tests/privacy_fixture.py planted in
their earlier choices, persona, facts and conversations) judged by an LLM judge against the loopback provider
(tests/loopback.py, no latency), each run a fresh `prbj judge` process:

- any, cold (empty cache) and cached (its rerun);
- pseudonymized with the tests' NER pipeline (an entity ruler on disk), cold (empty cache and private store)
  and cached (its rerun, which must find the pseudonym table in the private store: no analyzer built, neither
  Presidio nor spaCy imported; the process reports which it imported);
- the analysis alone: a process that builds the detector and makes the table of the same data (imports
  included), which is what a cold pseudonymized run adds.

Targets: a cached pseudonymized rerun ≤ 1.5 × a cached `any` rerun; a cold pseudonymized run ≤ 1.5 × (a cold
`any` run + the analysis alone). Wall times are medians over --rounds, the runs of a round interleaved so that
both meet the same load; the load average is printed beside them (compare ratios, not absolutes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from loopback import ProviderServer  # noqa: E402
from privacy_fixture import leak_records, ner_pipeline  # noqa: E402

TARGET = 1.5
# Runs prbj's CLI in this process and says, on its last line, whether Presidio or spaCy were imported.
CLI_PROBE = (
    "import sys\n"
    "from prbj.cli import main\n"
    "try:\n"
    "    main(standalone_mode=False)\n"
    "finally:\n"
    "    heavy = sorted(m for m in ('presidio_analyzer', 'spacy') if m in sys.modules)\n"
    "    print('IMPORTED', ','.join(heavy) or '-')\n"
)
ANALYSIS = (
    "import sys, time\n"
    "start = time.perf_counter()\n"
    "from prbj.data import load_dataset\n"
    "from prbj.privacy.detect import Detector\n"
    "from prbj.privacy.ner import resolve_ner\n"
    "from prbj.privacy.pseudonyms import Pseudonymizer\n"
    "pairs = load_dataset(sys.argv[1]).pairs\n"
    "tables = Pseudonymizer(Detector(resolve_ner(sys.argv[2])), answers=True).tables(pairs)\n"
    "print(time.perf_counter() - start, sum(len(t) for t in tables.values()))\n"
)


def users_data(users: int) -> list[dict[str, Any]]:
    """The fixture's three users, copied under new ids until there are `users`."""
    base = leak_records()
    out = []
    for n in range(users):
        owner = ("siobhan", "ivan", "wang")[n % 3]
        for record in base:
            if record["user_id"] == owner:
                out.append({**record, "user_id": f"{owner}{n}", "id": f"{record['id']}-{n}"})
    return out


def environment(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "PRBJ_CACHE_DIR"}
    return env | {"OPENAI_API_KEY": "bench-key", "PYTHONPATH": str(ROOT), "HOME": str(tmp)}


def judge(
    tmp: Path, server: ProviderServer, dataset: Path, ner: Path, policy: str, tag: str
) -> tuple[float, str]:
    """Seconds for one `prbj judge` process, and what it imported of Presidio and spaCy."""
    args = [
        "judge", "--no-progress", "--dataset", str(dataset), "-p", "gpt-5.1", "--api-base", server.url,
        "--context", "profile", "--personal-data", policy, "--cache-dir", str(tmp / f"cache-{tag}"),
        "--private-dir", str(tmp / f"private-{tag}"), "--out", str(tmp / f"runs-{tag}"), "--concurrency", "32",
    ]  # fmt: skip
    if policy == "pseudonymized":
        args += ["--ner-model", str(ner)]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CLI_PROBE, *args],
        capture_output=True,
        text=True,
        env=environment(tmp),
        check=False,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0 or "IMPORTED" not in done.stdout:
        raise SystemExit(
            f"prbj judge failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
    return seconds, done.stdout.rsplit("IMPORTED", 1)[1].strip()


def analysis(tmp: Path, dataset: Path, ner: Path) -> float:
    done = subprocess.run(
        [sys.executable, "-c", ANALYSIS, str(dataset), str(ner)],
        capture_output=True, text=True, env=environment(tmp), check=True,
    )  # fmt: skip
    return float(done.stdout.split()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    figures: dict[str, list[float]] = {}
    imported: dict[str, set[str]] = {}
    with ProviderServer() as server, tempfile.TemporaryDirectory() as folder:
        server.reply = lambda request: "Result: A"
        tmp = Path(folder)
        dataset = tmp / "users.jsonl"
        records = users_data(options.users)
        dataset.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        ner = ner_pipeline(tmp / "ner")
        judged = sum(r["split"] == "test" for r in records)
        print(f"{options.users} users, {judged} judged pairs, {len(records) - judged} earlier choices; "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        for round_ in range(options.rounds):
            for policy in ("any", "pseudonymized"):
                tag = f"{policy}-{round_}"
                for phase in ("cold", "cached"):
                    seconds, heavy = judge(tmp, server, dataset, ner, policy, tag)
                    figures.setdefault(f"{policy} {phase}", []).append(seconds)
                    imported.setdefault(f"{policy} {phase}", set()).add(heavy)
            figures.setdefault("analysis alone", []).append(analysis(tmp, dataset, ner))
    median = {name: statistics.median(values) for name, values in figures.items()}
    for name, value in median.items():
        print(f"{name:<22} {value:7.2f} s   imported: {', '.join(sorted(imported.get(name, {'(n/a)'})))}")
    cached = median["pseudonymized cached"] / median["any cached"]
    cold = median["pseudonymized cold"] / (median["any cold"] + median["analysis alone"])
    print(f"cached rerun: pseudonymized / any = {cached:.2f} (target <= {TARGET})")
    print(f"cold run: pseudonymized / (any + analysis alone) = {cold:.2f} (target <= {TARGET})")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
