"""`prbj serve` throughput: N single /score requests (in flight together) vs one /score/batch of N, side by
side on a loopback server in this process.

    python bench/serve_throughput.py [judge] [n]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from prbj.judges.registry import resolve_judges
from prbj.judges.setup import JudgeOptions
from prbj.llm.setup import GatewayOptions
from prbj.serve.server import serve

PROFILE = [
    {"category": "photo", "text": "I shoot black and white film on a budget."},
    {"category": "photo", "text": "Developing my own rolls at home lately."},
    {"category": "cooking", "text": "Any tips for a crusty sourdough loaf?"},
]


async def main(judge_name: str, n: int) -> None:
    with tempfile.TemporaryDirectory() as cache:
        shared = GatewayOptions(cache_dir=Path(cache))
        with shared.open() as gateway:
            (judge,) = resolve_judges([judge_name], JudgeOptions(), shared, gateway)
            await measure(judge, judge_name, n)


async def measure(judge: object, judge_name: str, n: int) -> None:
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    server = asyncio.create_task(
        serve(judge, host="127.0.0.1", port=0, on_ready=ready.set_result, stop=stop)  # type: ignore[arg-type]
    )
    url = await ready
    items = [
        {
            "response_text": f"Answer {i}: a used rangefinder and home-developed film keep costs low.",
            "query": f"Which camera should I buy? ({i % 8})",
            "profile": PROFILE,
        }
        for i in range(n)
    ]
    async with aiohttp.ClientSession() as session:

        async def one(item: dict) -> float:
            async with session.post(f"{url}/score", json=item) as response:
                return (await response.json())["score"]

        await one(items[0])  # warm-up: model load
        start = time.perf_counter()
        singles = await asyncio.gather(*(one(item) for item in items))
        single_s = time.perf_counter() - start
        start = time.perf_counter()
        async with session.post(f"{url}/score/batch", json={"items": items}) as response:
            batch = (await response.json())["scores"]
        batch_s = time.perf_counter() - start
    stop.set()
    await server
    assert batch == singles
    print(
        f"{judge_name}, {n} answers over 8 questions: {n} x /score {single_s:.3f}s "
        f"({n / single_s:.0f}/s), 1 x /score/batch {batch_s:.3f}s ({n / batch_s:.0f}/s), "
        f"ratio {single_s / batch_s:.1f}x (identical scores)"
    )


if __name__ == "__main__":
    asyncio.run(
        main(
            sys.argv[1] if len(sys.argv) > 1 else "bm25-profile",
            int(sys.argv[2]) if len(sys.argv) > 2 else 512,
        )
    )
