"""Issue 27's acceptance figures: does `prbj judge` with default settings run at the provider's rate limit?

    python bench/bench_limits.py [--calls 1000] [--only gemini|headers] [--match TEXT]

Each cell starts a loopback provider (tests/loopback.py, in a process of its own so that it does not share the
judge's CPU) that answers after a latency L and enforces a request limit R with real 429s (a token bucket
holding one second of R), then runs a real `prbj judge` process on ~--calls generated pairs (one call each,
`--context none`) with default settings: no --concurrency, no --max-concurrency. Per cell it prints the
achieved rate during steady state (the accepted requests between the 10th and 90th percentile of their arrivals
at the server) as a share of R, the 429s as a share of all requests, and what the run itself reported (limit
in force and its source, what bound it, peak requests in flight).

1. Gemini-shaped provider (no rate-limit headers), profile rpm = R: L ∈ {0.2, 1.5, 5} s × R ∈ {1,000, 4,000}/min.
2. Providers that state their limits in headers, at L = 1.5 s: the bundled Claude profile (50 requests/min)
   against an Anthropic-shaped provider stating and enforcing 40× its limits (2,000/min; input and output
   tokens 40× too); an OpenAI-shaped provider stating and enforcing 4,000/min against a profile of 100/min
   (40×); and one stating and enforcing 500/min against a profile of 1,000/min (lower than the profile).

Wanted (issue 27): ≥ 90% of R in steady state, ≤ 1% of requests answered 429, in every cell. The machine may be
shared: the load average is printed with the figures (LiteLLM costs ~4-5 ms of CPU per call, so 4,000/min
needs ~0.3 CPU-seconds per second of the judge process alone).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from bench_replay import BENCH_KEY, environment  # noqa: E402

# The bundled profiles with the request limit the cell's provider enforces; its tokens are not limited.
GEMINI_PROFILE = """extends = "gemini-3-flash"
rpm = {rpm}
tpm = 1_000_000_000
"""
OPENAI_PROFILE = """extends = "gpt-5.1"
rpm = {rpm}
"""


@dataclass(frozen=True)
class Cell:
    name: str
    profile: str  # the profile's name (written to the providers folder unless bundled)
    profile_text: str | None
    latency: float
    limit: float  # R, requests per minute enforced (and stated, when `stated`)
    stated: dict[str, float] | None = None  # the limits the provider states in its headers (loopback Limits)
    calls: int = 1000


def cells(calls: int, only: str | None) -> list[Cell]:
    found: list[Cell] = []
    if only in (None, "gemini"):
        for limit in (1000, 4000):
            for latency in (0.2, 1.5, 5.0):
                found.append(
                    Cell(
                        f"gemini-shaped, L={latency:g} s, R={limit:,}",
                        "bench-flash",
                        GEMINI_PROFILE.format(rpm=limit),
                        latency,
                        limit,
                        calls=calls,
                    )
                )
    if only in (None, "headers"):
        found += [
            Cell(
                "anthropic headers 40x the profile (50 -> 2,000)",
                "claude-sonnet-4-6",
                None,
                1.5,
                2000,
                {"requests": 2000, "input_tokens": 40 * 30_000, "output_tokens": 40 * 8_000},
                calls=calls,
            ),
            Cell(
                "openai headers 40x the profile (100 -> 4,000)",
                "bench-gpt",
                OPENAI_PROFILE.format(rpm=100),
                1.5,
                4000,
                {"requests": 4000, "tokens": 40 * 500_000},
                calls=calls,
            ),
            Cell(
                "openai headers below the profile (1,000 -> 500)",
                "bench-gpt",
                OPENAI_PROFILE.format(rpm=1000),
                1.5,
                500,
                {"requests": 500, "tokens": 500_000},
                calls=max(100, calls // 2),
            ),
        ]
    return found


# --- the provider, in a process of its own -----------------------------------------------------------------

SERVER = """
import json, sys, time
sys.path[:0] = {paths!r}
from loopback import ProviderServer
from loopback_limits import Limits
config = json.loads(sys.argv[1])
with ProviderServer(reply=lambda request: "Thinking it over.\\nResult: A") as server:
    server.latency = config["latency"]
    server.limits.enforce = Limits(requests=config["limit"])
    if config["stated"]:
        server.limits.enforce = server.limits.state = Limits(**config["stated"])
    print(server.url, flush=True)
    sys.stdin.read()  # until the bench closes it
    print(json.dumps([[r.received_at, r.status] for r in server.requests]), flush=True)
"""


class Provider:
    def __init__(self, cell: Cell, env: dict[str, str]) -> None:
        config = {"latency": cell.latency, "limit": cell.limit, "stated": cell.stated}
        script = SERVER.format(paths=[str(ROOT), str(ROOT / "tests")])
        self.process = subprocess.Popen(
            [sys.executable, "-c", script, json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("http"):
            raise SystemExit("the loopback provider did not start")

    def stop(self) -> list[tuple[float, int]]:
        output, _ = self.process.communicate(timeout=60)
        return [(float(at), int(status)) for at, status in json.loads(output.strip().splitlines()[-1])]


# --- the run -----------------------------------------------------------------------------------------------


def pairs(count: int) -> list[dict[str, Any]]:
    """`count` pairs from the bundled sample, each with its own question (so every prompt is a new call)."""
    sample = [
        json.loads(line)
        for path in sorted((ROOT / "prbj" / "data" / "sample").glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    return [
        {
            **sample[i % len(sample)],
            "id": f"limits-{i:05d}",
            "question": f"{sample[i % len(sample)]['question']} ({i})",
        }
        for i in range(count)
    ]


def steady_rate(arrivals: list[float]) -> float:
    """Accepted requests per minute between the 10th and the 90th percentile of their arrivals."""
    arrivals = sorted(arrivals)
    low, high = len(arrivals) // 10, len(arrivals) * 9 // 10
    span = arrivals[high] - arrivals[low]
    return (high - low) / span * 60 if span > 0 else float("nan")


def run_cell(cell: Cell, tmp: Path) -> dict[str, Any]:
    work = tmp / cell.name.replace(" ", "_").replace("/", "_")
    work.mkdir()
    env = environment(tmp) | {"ANTHROPIC_API_KEY": BENCH_KEY}
    if cell.profile_text is not None:
        (tmp / "providers" / f"{cell.profile}.toml").write_text(cell.profile_text, encoding="utf-8")
    dataset = work / "pairs.jsonl"
    dataset.write_text("".join(json.dumps(p) + "\n" for p in pairs(cell.calls)), encoding="utf-8")
    provider = Provider(cell, env)
    started = time.monotonic()
    try:
        done = subprocess.run(
            [
                sys.executable, "-m", "prbj", "judge", "--no-progress", "-p", cell.profile,
                "--api-base", provider.url, "--dataset", str(dataset), "--context", "none",
                "--out", str(work / "out"), "--cache-dir", str(work / "cache"),
            ],
            capture_output=True, text=True, env=env, timeout=1800,
        )  # fmt: skip
    finally:
        requests = provider.stop()
    elapsed = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{cell.name}: prbj judge failed ({done.returncode}):\n{done.stderr[-3000:]}")
    (run_dir,) = (work / "out").iterdir()
    usage = json.loads((run_dir / "run.json").read_text())["usage"][0]
    accepted = [at for at, status in requests if status != 429]
    rejected = sum(1 for _, status in requests if status == 429)
    rpm = usage["limits"].get("rpm", {})
    return {
        "cell": cell.name,
        "share_of_r": steady_rate(accepted) / cell.limit,
        "share_429": rejected / len(requests),
        "requests": len(requests),
        "seconds": elapsed,
        "limit": f"{rpm.get('value', 0):,.0f} ({rpm.get('source', '-')})",
        "bound_by": usage.get("bound_by"),
        "peak_in_flight": usage.get("peak_in_flight"),
        "learned": [line for line in done.stderr.splitlines() if "(from the provider's headers)" in line],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--only", choices=["gemini", "headers"], default=None)
    parser.add_argument("--match", default="", help="only the cells whose name contains this text")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{'cell':<50} {'of R':>6} {'429s':>6} {'sent':>5} {'secs':>6}  limit in force      bound by   peak"
    )
    worst = (1.0, 0.0)
    with tempfile.TemporaryDirectory(prefix="bench-limits-") as folder:
        tmp = Path(folder)
        (tmp / "providers").mkdir()
        for cell in (c for c in cells(args.calls, args.only) if args.match in c.name):
            row = run_cell(cell, tmp)
            worst = (min(worst[0], row["share_of_r"]), max(worst[1], row["share_429"]))
            print(
                f"{row['cell']:<50} {row['share_of_r']:>6.1%} {row['share_429']:>6.2%} {row['requests']:>5} "
                f"{row['seconds']:>6.1f}  {row['limit']:<18} {row['bound_by']!s:<10} {row['peak_in_flight']}",
                flush=True,
            )
            for line in row["learned"]:
                print(f"    {line}")
            print(f"    load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    met = worst[0] >= 0.9 and worst[1] <= 0.01
    print(
        f"lowest share of R {worst[0]:.1%} (wanted >= 90%), highest share of 429s {worst[1]:.2%} (wanted <= 1%): "
        f"{'met' if met else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
