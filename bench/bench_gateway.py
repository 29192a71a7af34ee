"""Gateway overhead, pacing accuracy and cached replay, measured side by side against the loopback provider.

    python bench/bench_gateway.py [--calls 200] [--concurrency 16]

For 0 ms and 200 ms of server latency it prints calls/s of a bare `litellm.acompletion` loop and of
`prbj.llm.gateway.Gateway.call` (cache lookup + store, budget, pacing objects, retry wrapper) at the same
concurrency, and their ratio; then how close a paced run comes to its RPM; then calls/s of a cached replay.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("OPENAI_API_KEY", "bench-key")

from loopback import ProviderServer  # noqa: E402

from prbj.llm.cache import ResponseCache  # noqa: E402
from prbj.llm.gateway import Gateway, LLMRequest  # noqa: E402
from prbj.llm.litellm_setup import litellm  # noqa: E402
from prbj.llm.providers import ProviderSpec, resolve_provider  # noqa: E402

ROUNDS = 2


def request(i: int) -> LLMRequest:
    return LLMRequest.chat("Be brief.", f"Question number {i}: which answer fits the user better?")


async def bare_loop(spec: ProviderSpec, calls: int, concurrency: int, offset: int) -> float:
    gate = asyncio.Semaphore(concurrency)
    module = litellm()

    async def one(i: int) -> None:
        async with gate:
            await module.acompletion(
                model=spec.model,
                messages=[dict(m) for m in request(offset + i).messages],
                api_base=spec.api_base,
                api_key=os.environ["OPENAI_API_KEY"],
                num_retries=0,
                max_retries=0,
                **spec.params,
            )

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(calls)))
    return calls / (time.perf_counter() - started)


async def gateway_loop(gateway: Gateway, spec: ProviderSpec, calls: int, offset: int) -> float:
    started = time.perf_counter()
    results = await asyncio.gather(*(gateway.call(spec, request(offset + i)) for i in range(calls)))
    elapsed = time.perf_counter() - started
    failed = [r for r in results if not r.ok]
    if failed:
        raise SystemExit(f"{len(failed)} gateway calls failed: {failed[0].error}")
    return calls / elapsed


def bench_spec(server: ProviderServer, concurrency: int) -> ProviderSpec:
    """The gpt-5.1 profile against the loopback: no quota to pace against, the concurrency asked for, short
    replies."""
    return replace(
        resolve_provider("gpt-5.1", api_base=server.url),
        rpm=None,
        tpm=None,
        max_concurrency=concurrency,
        params={"max_tokens": 16},
    )


async def warm_up(spec: ProviderSpec) -> None:
    """LiteLLM's import and first-call set-up, for both loops, out of the timings."""
    await Gateway(None).call(spec, request(-1))
    await bare_loop(spec, 1, 1, -2)


async def alternating_rounds(
    spec: ProviderSpec, calls: int, concurrency: int, offset: int, caches: Path, rounds: int = ROUNDS
) -> tuple[float, float, int]:
    """Best calls/s of the bare loop and of the gateway over `rounds` alternating rounds (other load on the
    machine hits both alike), each round with fresh prompts from `offset` on and the gateway on a fresh cache
    under `caches`; and the next unused offset."""
    bare_rounds, our_rounds = [], []
    for round_number in range(rounds):
        bare_rounds.append(await bare_loop(spec, calls, concurrency, offset))
        offset += calls
        async with Gateway(ResponseCache(caches / f"cache-{round_number}")) as gateway:
            our_rounds.append(await gateway_loop(gateway, spec, calls, offset))
        offset += calls
    return max(bare_rounds), max(our_rounds), offset


async def main(calls: int, concurrency: int) -> None:
    with ProviderServer(reply=lambda r: "Result: A") as server, tempfile.TemporaryDirectory() as tmp:
        spec = bench_spec(server, concurrency)
        await warm_up(spec)

        print(f"{calls} calls, concurrency {concurrency}, loopback server on 127.0.0.1")
        print(f"{'latency':>8} {'bare calls/s':>13} {'prbj calls/s':>13} {'prbj/bare':>10}")
        offset = 0
        first_gateway_offset: dict[float, int] = {}
        for latency in (0.0, 0.2):
            server.latency = latency
            first_gateway_offset[latency] = offset + calls
            caches = Path(tmp) / f"latency-{latency}"
            bare, ours, offset = await alternating_rounds(spec, calls, concurrency, offset, caches)
            print(f"{latency * 1000:>6.0f}ms {bare:>13.1f} {ours:>13.1f} {ours / bare:>10.2f}")

        server.latency = 0.0
        rpm = 600.0
        paced_calls = 60
        paced = replace(spec, rpm=rpm)
        gateway = Gateway(ResponseCache(Path(tmp) / "cache-paced"))
        await gateway.call(paced, request(offset - 1))  # the first request of a provider goes alone
        started = time.perf_counter()
        await asyncio.gather(*(gateway.call(paced, request(offset + i)) for i in range(paced_calls)))
        achieved = paced_calls / (time.perf_counter() - started) * 60
        print(
            f"paced run: target {rpm:.0f} rpm, achieved {achieved:.0f} rpm ({achieved / rpm:.2f} of target)"
        )

        replay_gateway = Gateway(ResponseCache(Path(tmp) / "latency-0.0" / "cache-0"))
        replay = await gateway_loop(replay_gateway, spec, calls, first_gateway_offset[0.0])
        sent = replay_gateway.stats()[0].requests_sent
        print(f"cached replay: {replay:.0f} calls/s, {sent} requests sent")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.concurrency))
