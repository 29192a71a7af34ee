"""The replay and live paths' figures (issues 13 and 30), measured side by side in one run and printed as ratios.

    python bench/bench_replay.py [--pairs 2830] [--live-pairs 300] [--live-rounds 3] [--latency 0.2] [--only-full]
    python bench/bench_replay.py --pairs 0          # everything but the full-size run
    python bench/bench_replay.py --against ../prbj-54ad5dd --against-python ../venv-54ad5dd/bin/python
                                                    # the same figures for another checkout, interleaved
    python bench/bench_replay.py --check            # CI: exit 1 when a ratio falls well below its target

1. Full-size cached rerun: `prbj judge --order both` over generated benchmark-sized pairs (2,830 pairs, 5,660
   judgments; generated here, never committed) against the loopback server at --latency, --concurrency 64;
   first run, then the all-hits rerun: judgments/s of the whole process (start to exit), the speed-up, the
   rerun's peak RSS and whether it imported LiteLLM.
2. Start-up commands on the sample: `prbj providers`, `prbj report RUN`, `prbj check RUN --baseline B`,
   `prbj --help` (best of three, each a fresh process).
3. Gateway overhead at 0 ms latency against a bare `litellm.acompletion` loop (bench/bench_gateway.py's loops).
4. The whole live judge path: `prbj judge --order both` on --live-pairs pairs at --latency and concurrency 64
   against a bare `litellm.acompletion` loop (its own process) sending the very same prompts at the same
   concurrency; calls/s while calls are in flight, measured at the server from arrival times; --live-rounds
   times (each on a fresh cache), the median ratio the figure.

The machine may be shared: the load average is printed with the figures; compare ratios, not absolutes. With
--against, every timed process of the other checkout runs next to ours (alternating), so that both meet the same
load. --check (CI) fails on the ratios that cancel machine noise, each against a floor well below its target
(FLOORS): the cached rerun against the first run, the live judge path and the gateway against bare LiteLLM.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from loopback import ProviderServer  # noqa: E402

BENCH_KEY = "bench-key"
# --check: (target, floor). A ratio below its floor fails CI; the floor sits well below the target so that a
# loaded CI machine does not fail it, while a regression like issue 30's (an import that costs a second per
# process, or a per-call cost that halves throughput) does.
FLOORS = {
    "rerun speed-up": (20.0, 10.0),
    "live prbj/bare": (0.9, 0.7),
    "gateway/bare": (0.95, 0.7),
}
# The bundled gemini-3-flash profile (model, prices, params) with the loopback's limits: no quota to pace
# against, and the provider concurrency the run asks for.
PROFILE = """model = "gemini/gemini-3-flash-preview"
api_key_env = "GEMINI_API_KEY"
paid = true
max_concurrency = {concurrency}
[price]
input = "litellm"
output = "litellm"
[params]
max_tokens = 2048
reasoning_effort = "low"
"""
# Runs the real CLI; at exit it reports peak RSS and whether LiteLLM was imported, on stderr.
WRAPPER = (
    "import atexit, resource, sys\n"
    "atexit.register(lambda: print('BENCH', 'litellm' in sys.modules,"
    " resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr))\n"
    "from prbj.cli import main\n"
    "main()\n"
)
FILLER = (
    "It depends on how much time you can give it each week, what you already own, and what you hope to get "
    "out of it a year from now; start small, keep notes, and change course once you know what you enjoy. "
)


@dataclass(frozen=True)
class Tree:
    """A checkout of prbj whose CLI is timed: this one, or another commit's (--against) with its own Python."""

    label: str
    root: Path
    python: str

    def judge_extra(self) -> list[str]:
        # Since issue 34 a run on non-public data states what may leave the machine; older checkouts know no
        # such option.
        return ["--personal-data", "any"] if (self.root / "prbj" / "privacy").is_dir() else []


def installed_like(root: Path = ROOT) -> None:
    """Compile prbj's modules to bytecode, as `pip install` does, before any timed process starts. A checkout
    run with PYTHONDONTWRITEBYTECODE set (the shared development machine sets it) would otherwise compile every
    prbj module from source in every process: ~0.15 s of each start that no installed prbj pays."""
    if not compileall.compile_dir(str(root / "prbj"), quiet=1):
        raise SystemExit("could not compile prbj to bytecode")


# --- data --------------------------------------------------------------------------------------------------


def benchmark_pairs(count: int) -> list[dict[str, Any]]:
    """`count` pairs shaped like the benchmark's (three subsets, ~40 profile posts, ~250-word answers), each
    with its own text so that every prompt is a distinct cache key."""
    sample = [
        json.loads(line)
        for path in sorted((ROOT / "prbj" / "data" / "sample").glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    pairs = []
    for index in range(count):
        base = sample[index % len(sample)]
        pairs.append(
            {
                **base,
                "id": f"bench-{index:05d}",
                "question": f"{base['question']} (case {index})",
                "profile": [
                    {**post, "id": f"bench-{index:05d}-p{n}"} for n, post in enumerate(base["profile"] * 3)
                ],
                "chosen": f"{base['chosen']} {FILLER * 6}(answer {index}a)",
                "rejected": f"{base['rejected']} {FILLER * 6}(answer {index}b)",
            }
        )
    return pairs


def write_pairs(path: Path, pairs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs), encoding="utf-8")
    return path


# --- processes ---------------------------------------------------------------------------------------------


def environment(tmp: Path, root: Path = ROOT) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return env | {
        "GEMINI_API_KEY": BENCH_KEY,
        "OPENAI_API_KEY": BENCH_KEY,
        "PYTHONPATH": str(root),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PRBJ_MODEL_MAP_CACHE": str(tmp / "model-map.json"),
        "PRBJ_PROVIDERS_DIR": str(tmp / "providers"),
    }


HERE = Tree("this checkout", ROOT, sys.executable)


def prbj(tmp: Path, *args: str, tree: Tree = HERE) -> tuple[float, bool, float]:
    """Run `prbj args` in a fresh process: (seconds start to exit, LiteLLM imported, peak RSS in MiB)."""
    started = time.perf_counter()
    done = subprocess.run(
        [tree.python, "-c", WRAPPER, *args],
        capture_output=True,
        text=True,
        env=environment(tmp, tree.root),
        cwd=tmp,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"prbj {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    marker = [line for line in done.stderr.splitlines() if line.startswith("BENCH ")][-1].split()
    return elapsed, marker[1] == "True", int(marker[2]) / 1024


def judge_args(
    server: ProviderServer, dataset: Path, out: Path, cache: Path, concurrency: int, tree: Tree = HERE
) -> list[str]:
    return [
        "judge", "--no-progress", "-p", "bench-flash", "--api-base", server.url, "--dataset", str(dataset),
        "--order", "both", "--context", "none", "--concurrency", str(concurrency),
        "--out", str(out), "--cache-dir", str(cache), *tree.judge_extra(),
    ]  # fmt: skip


def in_flight_rate(server: ProviderServer) -> float:
    """Calls/s while calls were in flight: requests between the first and the last arrival at the server."""
    arrivals = sorted(r.received_at for r in server.requests)
    return (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# --- the bare loop, run in its own process like `prbj judge` ------------------------------------------------

BARE_LOOP = """
import asyncio, json, os, sys, time
sys.path.insert(0, {root!r})
from prbj.llm.litellm_setup import litellm
module = litellm()
prompts = json.load(open({prompts!r}))
gate = asyncio.Semaphore({concurrency})
async def one(messages):
    async with gate:
        await module.acompletion(model="gemini/gemini-3-flash-preview", messages=messages, api_base={url!r},
            api_key=os.environ["GEMINI_API_KEY"], num_retries=0, max_retries=0, max_tokens=2048,
            reasoning_effort="low", drop_params=True)
async def main():
    await asyncio.gather(*(one(m) for m in prompts))
asyncio.run(main())
"""


def bare_judge_loop(tmp: Path, server: ProviderServer, prompts: list[Any], concurrency: int) -> float:
    path = tmp / "prompts.json"
    path.write_text(json.dumps(prompts), encoding="utf-8")
    script = BARE_LOOP.format(root=str(ROOT), prompts=str(path), concurrency=concurrency, url=server.url)
    server.reset()
    subprocess.run([sys.executable, "-c", script], check=True, env=environment(tmp))
    return in_flight_rate(server)


def recorded_prompts(server: ProviderServer) -> list[Any]:
    return [
        ([{"role": "system", "content": r.system}] if r.system else []) + r.messages for r in server.requests
    ]


# --- the sections ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rig:
    """Where the timed runs happen: a scratch folder, the loopback provider, the concurrency, and the checkouts
    timed side by side (this one first)."""

    tmp: Path
    server: ProviderServer
    concurrency: int
    trees: list[Tree]

    def judge_args(self, tree: Tree, dataset: Path, name: str) -> list[str]:
        """`prbj judge` on `dataset` for `tree`, with its own out and cache folders (`name`: which run)."""
        n = self.trees.index(tree)
        out, cache = self.tmp / f"out-{name}-{n}", self.tmp / f"cache-{name}-{n}"
        return judge_args(self.server, dataset, out, cache, self.concurrency, tree)


def full_rerun(rig: Rig, pairs: int) -> tuple[list[str], float]:
    """Each tree's first run on its own fresh cache, then three all-hits reruns of each, alternating between the
    trees (each a fresh process): all are printed, the median is the figure. Also this checkout's speed-up."""
    tmp, server, trees = rig.tmp, rig.server, rig.trees
    dataset = write_pairs(tmp / "full.jsonl", benchmark_pairs(pairs))
    judgments = pairs * 2
    lines = [
        f"full-size run: {pairs} pairs x 2 orders = {judgments} judgments, latency {server.latency * 1000:.0f} ms, "
        f"concurrency {rig.concurrency}"
    ]
    argv, firsts, sent = {}, {}, {}
    for tree in trees:
        argv[tree] = rig.judge_args(tree, dataset, "full")
        server.reset()
        firsts[tree] = prbj(tmp, *argv[tree], tree=tree)
        sent[tree] = len(server.requests)
    reruns: dict[Tree, list[tuple[float, bool, float]]] = {tree: [] for tree in trees}
    server.reset()
    for _ in range(3):
        for tree in trees:
            reruns[tree].append(prbj(tmp, *argv[tree], tree=tree))
    for tree in trees:
        first, _, first_rss = firsts[tree]
        rerun, _, rss = sorted(reruns[tree])[1]
        lines += [
            f"  {tree.label}: {sent[tree]} calls sent by the first run; reruns sent {len(server.requests)}",
            f"    first run          {first:7.2f} s   {judgments / first:8.0f} judgments/s   peak {first_rss:.0f} MiB",
            f"    cached rerun       {rerun:7.2f} s   {judgments / rerun:8.0f} judgments/s   peak {rss:.0f} MiB"
            f"   (median of {', '.join(f'{r[0]:.2f}' for r in reruns[tree])} s; "
            f"LiteLLM imported: {any(r[1] for r in reruns[tree])})",
            f"    rerun judgments/s  {judgments / rerun:8.0f}   target >= 3000   ratio {judgments / rerun / 3000:.2f}",
            f"    rerun speed-up     {first / rerun:8.1f}x  target >= 20x    ratio {first / rerun / 20:.2f}",
            f"    rerun peak RSS     {rss:8.0f} MiB target < 500    ratio {500 / rss:.2f}",
        ]
    if len(trees) == 2:
        (ours, theirs) = trees
        ours_first, theirs_first = firsts[ours][0], firsts[theirs][0]
        ours_rerun, theirs_rerun = sorted(reruns[ours])[1][0], sorted(reruns[theirs])[1][0]
        lines += [
            f"  {ours.label} / {theirs.label}: first run {theirs_first / ours_first:.2f}x as fast, cached rerun "
            f"{theirs_rerun / ours_rerun:.2f}x as fast (above 1: faster)"
        ]
    return lines, firsts[HERE][0] / sorted(reruns[HERE])[1][0]


def startup(tmp: Path) -> list[str]:
    out = tmp / "out-sample"
    prbj(tmp, "judge", "--no-progress", "--out", str(out))
    run_dir = str(next(out.iterdir()))
    baseline = str(ROOT / "reports" / "baselines" / "sample-offline.json")
    prbj(tmp, "providers")  # the first listing may look prices up once; the timed ones use what it remembered
    lines = ["start-up, best of 3 fresh processes (sample):"]
    for args, target in (
        (("providers",), 1.0),
        (("report", run_dir), 1.0),
        (("check", run_dir, "--baseline", baseline), 1.0),
        (("--help",), 0.3),
    ):
        runs = [prbj(tmp, *args) for _ in range(3)]
        best = min(seconds for seconds, _, _ in runs)
        imported = any(flag for _, flag, _ in runs)
        lines.append(
            f"  prbj {args[0]:<10} {best:6.2f} s   target <= {target:.1f} s   ratio {target / best:.2f}"
            f"   (LiteLLM imported: {imported})"
        )
    return lines


def gateway_overhead(calls: int, concurrency: int) -> tuple[list[str], float]:
    from bench_gateway import ROUNDS, alternating_rounds, bench_spec, warm_up

    async def measure() -> tuple[float, float]:
        with ProviderServer(reply=lambda r: "Result: A") as server, tempfile.TemporaryDirectory() as tmp:
            spec = bench_spec(server, concurrency)
            await warm_up(spec)
            bare, ours, _ = await alternating_rounds(spec, calls, concurrency, 0, Path(tmp), ROUNDS + 1)
            return bare, ours

    os.environ.setdefault("OPENAI_API_KEY", BENCH_KEY)
    bare, ours = asyncio.run(measure())
    return [
        f"gateway vs bare litellm.acompletion, 0 ms, {calls} calls, concurrency {concurrency} (best rounds):",
        f"  bare {bare:7.0f} calls/s   gateway {ours:7.0f} calls/s   gateway/bare {ours / bare:.2f}"
        f"   target >= 0.95   ratio {ours / bare / 0.95:.2f}",
    ], ours / bare


def live_path(rig: Rig, pairs: int, rounds: int) -> tuple[list[str], float]:
    """Each tree's live judge run on a fresh cache, each followed by the bare loop sending the very prompts that
    run sent, so that the two meet the same load; `rounds` times, the trees alternating. One ~3-second window
    swings by a tenth with the machine, so the figure is the median of the rounds' ratios. Also this
    checkout's median ratio."""
    tmp, server, concurrency = rig.tmp, rig.server, rig.concurrency
    dataset = write_pairs(tmp / "live.jsonl", benchmark_pairs(pairs))
    measured: dict[Tree, list[tuple[float, float, float]]] = {tree: [] for tree in rig.trees}
    sent, words = 0, 0
    for round_index in range(rounds):
        for tree in rig.trees:
            server.reset()
            whole, _, _ = prbj(tmp, *rig.judge_args(tree, dataset, f"live{round_index}"), tree=tree)
            ours = in_flight_rate(server)
            prompts = recorded_prompts(server)
            sent = len(prompts)
            words = sum(len(m["content"].split()) for m in prompts[0]) if prompts else 0
            bare = bare_judge_loop(tmp, server, prompts, concurrency)
            measured[tree].append((ours, bare, sent / whole))
    lines, medians = [], {}
    for tree, rows in measured.items():
        medians[tree] = median = statistics.median(ours / bare for ours, bare, _ in rows)
        lines.append(
            f"live judge path ({tree.label}): {pairs} pairs x 2 orders, {sent} calls of ~{words} words, latency "
            f"{server.latency * 1000:.0f} ms, concurrency {concurrency}, {rounds} rounds:"
        )
        lines += [
            f"  bare loop {bare:7.1f} calls/s   prbj judge {ours:7.1f} calls/s in flight ({whole:.1f} calls/s "
            f"whole process)   prbj/bare {ours / bare:.2f}"
            for ours, bare, whole in rows
        ]
        lines.append(
            f"  prbj/bare, median of {rounds}: {median:.2f}   target >= 0.9   ratio {median / 0.9:.2f}"
        )
    return lines, medians[HERE]


def verdict(figures: dict[str, float]) -> tuple[list[str], bool]:
    """--check: each noise-cancelling ratio against its floor."""
    lines, passed = ["check (CI): each ratio against a floor well below its target"], True
    for name, (target, floor) in FLOORS.items():
        if name not in figures:
            continue
        value = figures[name]
        ok = value >= floor
        passed &= ok
        lines.append(
            f"  {name:<16} {value:7.2f}   target >= {target:g}   floor {floor:g}   {'ok' if ok else 'FAILED'}"
        )
    return lines, passed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=2830)
    parser.add_argument("--live-pairs", type=int, default=300)
    parser.add_argument("--live-rounds", type=int, default=3, help="live runs per checkout (median ratio)")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--gateway-calls", type=int, default=400)
    parser.add_argument("--only-full", action="store_true", help="only the full-size run")
    parser.add_argument("--against", type=Path, help="another prbj checkout, timed next to this one")
    parser.add_argument(
        "--against-python", default=sys.executable, help="the Python with that checkout's deps"
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a ratio falls below its floor")
    args = parser.parse_args()
    trees = [HERE]
    if args.against is not None:
        trees.append(Tree(f"{args.against.name}", args.against.resolve(), args.against_python))
    for tree in trees:
        installed_like(tree.root)
    figures: dict[str, float] = {}
    report: list[str] = [f"load average at start: {load_average()}"]
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        (tmp / "providers").mkdir()
        (tmp / "providers" / "bench-flash.toml").write_text(PROFILE.format(concurrency=args.concurrency))
        with ProviderServer(reply=lambda request: "Weighing both answers.\nResult: A") as server:
            server.latency = args.latency
            rig = Rig(tmp, server, args.concurrency, trees)
            if args.pairs:
                lines, figures["rerun speed-up"] = full_rerun(rig, args.pairs)
                print("\n".join(report + lines), flush=True)
                report = []
            if not args.only_full:
                lines, figures["live prbj/bare"] = live_path(rig, args.live_pairs, args.live_rounds)
                report += lines
        if not args.only_full:
            report += startup(tmp)
    if not args.only_full:
        lines, figures["gateway/bare"] = gateway_overhead(args.gateway_calls, args.concurrency)
        report += lines
    report.append(f"load average at end: {load_average()}")
    if args.check:
        lines, passed = verdict(figures)
        report += lines
    print("\n".join(report), flush=True)
    if args.check and not passed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
