"""The same 150-pair judge run priced three ways against the loopback provider: live, --batch, and live with
the provider's prompt cache, from the usage each run recorded in run.json.

    python bench/batch_pricing.py [--pairs 150] [--provider claude-sonnet-4-6] [--profile-k 80]

Both answer orders are asked (`--order both`): the two calls of a pair share the profile prefix. Pairs are the
bundled sample's, repeated with distinct questions, each profile lengthened with its category's other posts so
that a call is ~2,000 input tokens, the profile context being the long shared prefix. The loopback counts a
token per word and caches prefixes of at least 1,024 tokens, as Anthropic does for Sonnet; the profile's rate
limits are lifted (the loopback has none). Prices are the profile's (LiteLLM's price map). Prints one table and
checks that batch costs at most half of live.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from loopback import ProviderServer  # noqa: E402

from prbj.data import load_dataset  # noqa: E402

KEYS = {
    "OPENAI_API_KEY": "bench-key-0000",
    "ANTHROPIC_API_KEY": "bench-key-0000",
    "GEMINI_API_KEY": "bench-key",
}


def write_pairs(path: Path, count: int) -> None:
    sample = load_dataset().pairs
    by_category: dict[str, list] = {}
    for pair in sample:
        by_category.setdefault(pair.category, []).append(pair)
    with path.open("w", encoding="utf-8") as out:
        for index in range(count):
            pair = sample[index % len(sample)]
            others = [p for p in by_category[pair.category] if p.id != pair.id]
            posts = [post for p in [pair, *others] for post in p.profile]
            record = {
                "id": f"{pair.id}-r{index}",
                "category": pair.category,
                # A distinct question per copy, so that no two calls are the same request (prbj's cache would
                # answer the copy for free).
                "question": f"{pair.question} (case {index})",
                "profile": [
                    {"id": f"{pair.id}-r{index}-p{n}", "category": post.category, "text": post.text}
                    for n, post in enumerate(posts)
                ],
                "narrative": pair.narrative,
                "rubric_aspects": [
                    {"aspect": a.aspect, "evidence": a.evidence, "reason": a.reason}
                    for a in pair.rubric_aspects
                ],
                "chosen": pair.chosen,
                "rejected": pair.rejected,
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def unpaced_profile(name: str, folder: Path) -> None:
    """The bundled profile with its rate limits lifted: the loopback has none, and the bench prices, not paces."""
    folder.mkdir()
    text = (ROOT / "providers" / f"{name}.toml").read_text()
    lines = [line for line in text.splitlines() if not line.startswith(("rpm", "tpm", "max_concurrency"))]
    first_table = next((i for i, line in enumerate(lines) if line.startswith("[")), len(lines))
    head = [*lines[:first_table], "rpm = 1_000_000", "tpm = 1_000_000_000", "max_concurrency = 16"]
    (folder / f"{name}.toml").write_text("\n".join(head + lines[first_table:]) + "\n")


def judge(server: ProviderServer, work: Path, name: str, args: argparse.Namespace, *extra: str) -> dict:
    command = [
        sys.executable, "-m", "prbj", "judge", "--no-progress", "-p", args.provider, "--api-base", server.url,
        "--dataset", str(work / "pairs.jsonl"), "--context", "profile", "--profile-k", str(args.profile_k),
        "--cache-dir", str(work / f"cache-{name}"), "--out", str(work / f"out-{name}"), "--concurrency", "8",
        "--order", "both", "--providers-dir", str(work / "providers"),
        *extra,
    ]  # fmt: skip
    env = {**os.environ, **KEYS, "PRBJ_BATCH_POLL_SECONDS": "0.2", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{name} run failed:\n{done.stdout}\n{done.stderr}")
    run_dir = next((work / f"out-{name}").iterdir())
    return json.loads((run_dir / "run.json").read_text())["usage"][0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=150)
    parser.add_argument("--provider", default="claude-sonnet-4-6")
    parser.add_argument("--profile-k", type=int, default=80)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, ProviderServer(reply=lambda r: "Result: A") as server:
        work = Path(folder)
        write_pairs(work / "pairs.jsonl", args.pairs)
        unpaced_profile(args.provider, work / "providers")
        server.prefix_cache_min = 1024
        live = judge(server, work, "live", args)
        server.reset()
        server.prefix_cache_min = 1024
        batch = judge(server, work, "batch", args, "--batch")
    # Live with caching is what the live run paid; without, its cached tokens at the full input price.
    cached_live = live["cost_usd"]
    uncached_live = cached_live + live["provider_cache_saved_usd"]
    rows = [
        ("live, no prompt cache", uncached_live, live["prompt_tokens"], 0),
        ("live with prompt caching", cached_live, live["prompt_tokens"], live["cached_input_tokens"]),
        (
            "--batch (with prompt caching)",
            batch["cost_usd"],
            batch["prompt_tokens"],
            batch["cached_input_tokens"],
        ),
    ]
    calls = live["calls_ok"]
    print(
        f"{args.pairs} pairs, {calls} calls, provider {args.provider}, context profile (k={args.profile_k})"
    )
    print(f"{'run':32} {'USD':>9} {'x live':>7} {'input tok':>10} {'cached in':>10}")
    for name, cost, prompt, cached in rows:
        print(f"{name:32} {cost:9.4f} {cost / uncached_live:7.3f} {prompt:10,} {cached:10,}")
    print(
        f"shared prefix read from the provider cache: {live['cached_input_tokens'] / max(calls, 1):.0f} tokens a call"
    )
    ratio = batch["cost_usd"] / cached_live
    print(f"batch / live (same answers, same caching): {ratio:.3f}")
    assert ratio <= 0.5 + 1e-9, "batch must cost at most half of live"


if __name__ == "__main__":
    main()
