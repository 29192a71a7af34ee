"""`prbj build` against the loopback provider: a first build (every call sent, each answered after a fixed
latency) and a rerun (everything from the cache), side by side, with the requests counted at the server.

    python bench/build_rerun.py [records] [latency_seconds]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from lamp_fixture import REFS, lamp_record, reply
from loopback import ProviderServer

from prbj.cli import main
from prbj.llm.litellm_setup import litellm

PROFILE = (
    'model = "openai/bench-model"\napi_key_env = "OPENAI_API_KEY"\nmax_concurrency = 32\npaid = false\n'
    "[params]\nmax_tokens = 200\n"
)


def write_records(path: Path, n: int) -> None:
    lines = []
    for i in range(n):
        record = lamp_record(REFS[i % len(REFS)])
        record["id"] = f"{record['id']}-{i}"
        record["question"] += f" (copy {i})"  # distinct prompts, so no two records share a cached answer
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def timed_build(server: ProviderServer, folder: Path) -> tuple[float, int]:
    server.reset()
    start = time.perf_counter()
    result = CliRunner().invoke(
        main,
        [
            "build",
            "--input",
            str(folder / "lamp.jsonl"),
            "--out",
            str(folder / "out"),
            "-p",
            "bench",
            "--providers-dir",
            str(folder / "providers"),
            "--api-base",
            server.url,
            "--cache-dir",
            str(folder / "cache"),
            "--no-progress",
            "--concurrency",
            "16",
        ],
    )
    elapsed = time.perf_counter() - start
    if result.exit_code != 0:
        raise SystemExit(result.output)
    return elapsed, server.count()


def main_bench(n: int, latency: float) -> None:
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
    litellm()  # import once, outside the timings
    with tempfile.TemporaryDirectory() as tmp, ProviderServer(reply=reply, latency=latency) as server:
        folder = Path(tmp)
        (folder / "providers").mkdir()
        (folder / "providers" / "bench.toml").write_text(PROFILE)
        write_records(folder / "lamp.jsonl", n)
        first_s, first_requests = timed_build(server, folder)
        rerun_s, rerun_requests = timed_build(server, folder)
    print(
        f"{n} records, {latency * 1000:.0f} ms per call: first build {first_s:.2f}s ({first_requests} requests, "
        f"{first_requests / first_s:.0f}/s); rerun {rerun_s:.2f}s ({rerun_requests} requests); "
        f"ratio {first_s / rerun_s:.1f}x"
    )


if __name__ == "__main__":
    main_bench(
        int(sys.argv[1]) if len(sys.argv) > 1 else 90, float(sys.argv[2]) if len(sys.argv) > 2 else 0.05
    )
