"""Fault-injection table for issue 12: real `prbj judge` processes against the loopback provider, printed as
Markdown.

    python bench/fault_table.py [--limit 10] [--only retries] [--retry-scale 1]

Rows (each compared with an undisturbed run of the same command):
- SIGKILL ×5 then resume: results identical; extra paid calls against what was on the wire at each kill
  (requests sent whose answers never reached the cache), and no stored answer bought again.
- 30% 429 + 10% 5xx + 2% timeouts: results identical, no judgment lost.
- provider down (closed port): seconds to the end, exit code, the cause printed.
- two processes, one cache: requests sent ÷ one run's calls.
- cap filled at --concurrency 16 and 1: share of --max-cost spent.
- issue 30, a bad minute: 300 calls through the gateway against a provider answering 30% of attempts 429 (retry
  in 1 s) and 10% 500, seeded per call and attempt: calls lost with six attempts per call (the bound before
  issue 30) and with retries until the retry time runs out. `--retry-scale 0.05` scales every time (the delay,
  the backoff, the retry time) down for a quick look; at 1 it takes a minute or two.
Runs take a few seconds each (most of it importing LiteLLM); the whole table about two minutes more.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from aiohttp import web  # noqa: E402
from loopback import BadMinute, ChatRequest, Fault, ProviderServer, _answer  # noqa: E402

from prbj.data import load_dataset  # noqa: E402
from prbj.llm.cache import ResponseCache  # noqa: E402
from prbj.llm.gateway import Gateway, LLMRequest  # noqa: E402
from prbj.llm.providers import resolve_provider  # noqa: E402
from prbj.llm.retry import RetryPolicy  # noqa: E402

KEY = "sk-fault-table-0123456789abcdef"
CHOSEN = {pair.chosen for pair in load_dataset().pairs}
KILLS = 5
IN_FLIGHT = 4  # --concurrency of the disturbed runs: at most this many calls are on the wire at a kill
# A profile whose client timeout is short (so injected hangs are cheap) and whose price is mostly the prompt's,
# so a call's worst case (reserved before sending) is close to what it really costs: a cap can then be filled
# to within one call of it.
PROFILE = (
    'model = "openai/gpt-5.1-2025-11-13"\napi_key_env = "OPENAI_API_KEY"\ntimeout = 1\n'
    "[price]\ninput = 1000\noutput = 1000\n[params]\nmax_tokens = 10\n"
)
# The cap, as a share of what the whole undisturbed run costs: the run cannot finish under it.
CAP_SHARE = 0.6


def right_answer(request: Any) -> str:
    """Picks whichever shown answer is the chosen one, so results can be compared exactly."""
    text = request.last_user
    shown_a = text.split("## Answer A\n", 1)[1].split("\n\n## Answer B", 1)[0]
    return "Thinking it over.\nResult: " + ("A" if shown_a in CHOSEN else "B")


NO_FAULT = "none"


class MixedFaultServer(ProviderServer):
    """The loopback provider, where a queued Fault(NO_FAULT) means: answer this request normally. So one
    seeded queue can mix faults and answers in the proportions a row asks for. It also counts the answers it
    wrote out to a client still connected (`answered`), so that a kill can be set against its moment."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.answered = 0

    def reset(self) -> None:
        super().reset()
        self.answered = 0

    async def _handle(self, request: web.Request, family: str) -> web.StreamResponse:
        response = await super()._handle(request, family)
        if request.transport is None or request.transport.is_closing():
            return response  # its client is gone (killed): nobody received this answer
        await response.prepare(request)
        await response.write_eof()
        with self._lock:
            self.answered += 1
        return response

    async def _fault(self, fault: Fault, request: ChatRequest) -> web.StreamResponse:
        if fault.kind == NO_FAULT:
            return web.json_response(_answer(request.family, request, self.reply(request)))
        return await super()._fault(fault, request)


@dataclass
class Run:
    code: int
    seconds: float
    stdout: str
    run_dir: Path | None


class Bench:
    def __init__(self, server: ProviderServer, work: Path, limit: int) -> None:
        self.server = server
        self.work = work
        self.limit = limit
        self.providers = work / "providers"
        self.providers.mkdir()
        (self.providers / "gpt-5.1.toml").write_text(PROFILE)
        self.env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        self.env |= {"OPENAI_API_KEY": KEY, "PYTHONUNBUFFERED": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), self.env.get("PYTHONPATH")]))

    def command(self, name: str, *args: str, api_base: str | None = None) -> list[str]:
        return [
            sys.executable, "-m", "prbj", "judge", "--no-progress", "-p", "gpt-5.1",
            "--api-base", api_base or self.server.url, "--providers-dir", str(self.providers),
            "--cache-dir", str(self.work / name / "cache"), "--out", str(self.work / name / "out"),
            "--context", "none", "--limit", str(self.limit), *args,
        ]  # fmt: skip

    def start(self, name: str, *args: str, api_base: str | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(name, *args, api_base=api_base),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.env,
        )

    def run(self, name: str, *args: str, api_base: str | None = None) -> Run:
        started = time.monotonic()
        proc = self.start(name, *args, api_base=api_base)
        stdout, _ = proc.communicate(timeout=300)
        return Run(proc.returncode, time.monotonic() - started, stdout, latest(self.work / name / "out"))

    def fresh(self, latency: float = 0.0) -> None:
        self.server.reset()
        self.server.latency = latency


def latest(out: Path) -> Path | None:
    runs = [p for p in out.iterdir() if p.is_dir()] if out.exists() else []
    return max(runs, key=lambda p: p.stat().st_mtime_ns) if runs else None


def results(run: Run) -> Any:
    assert run.run_dir is not None, run.stdout
    return json.loads((run.run_dir / "summary.json").read_text())["results"]


def usage(run: Run) -> dict[str, Any]:
    assert run.run_dir is not None, run.stdout
    return json.loads((run.run_dir / "run.json").read_text())["usage"][0]


def lost(run: Run) -> int:
    overall = next(r for r in results(run) if r["subset"] == "all")
    return sum(int(overall.get(status, 0) or 0) for status in ("api_error", "parse_error", "skipped_budget"))


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def stored_answers(cache: Path) -> int:
    """Answers in a cache folder (its llm entries), read after the process writing it died."""
    if not cache.exists():
        return 0
    with ResponseCache(cache) as store:
        keys = store.keys()
        return sum(1 for key in keys if key.startswith("llm:"))


def sigkill_row(bench: Bench, reference: Run, calls: int) -> list[str]:
    """Five kills, each at a seeded moment, then a run to the end. What a kill costs is what was on the wire at
    its moment: requests sent whose answers never reached prbj's cache (not yet answered, or answered and still
    in the socket or the client when the process died). `--concurrency` does not bound that: it counts pairs
    fanned out on top of what the provider admits in flight (16 at the start of a run whose rate is unknown).
    The resumed run must pay for nothing else: every stored answer is served from the cache."""
    server = bench.server
    assert isinstance(server, MixedFaultServer)
    cache = bench.work / "killed" / "cache"
    bench.fresh(latency=0.2)
    rng = random.Random(12)
    on_the_wire = unanswered = 0
    stored = 0
    for _ in range(KILLS):
        before, answered = server.count(), server.answered
        proc = bench.start("killed", "--concurrency", str(IN_FLIGHT))
        target = before + rng.randint(2, max(3, calls // (KILLS + 1)))
        deadline = time.monotonic() + 60
        while server.count() < target and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        with server._lock:
            unanswered += (len(server.requests) - before) - (server.answered - answered)
        proc.communicate(timeout=30)
        now_stored = stored_answers(cache)
        on_the_wire += (server.count() - before) - (now_stored - stored)
        stored = now_stored
    sent = server.count()
    server.latency = 0.0
    final = bench.run("killed", "--concurrency", str(IN_FLIGHT))
    total = server.count()
    extra = total - calls
    resumed = total - sent
    same = final.code == 0 and results(final) == results(reference)
    return [
        f"SIGKILL ×{KILLS}, then resume",
        f"{sent} requests before the last run, {total} in all for {calls} calls; on the wire at the kills "
        f"{on_the_wire} (of them {unanswered} not yet answered by the provider); the resumed run sent {resumed} "
        f"for the {calls - stored} answers not stored",
        f"results identical: {yes(same)}; extra paid calls {extra} (≤ {on_the_wire} on the wire at the kills: "
        f"{yes(extra <= on_the_wire)}); no stored answer bought again: {yes(resumed == calls - stored)}",
    ]


def flaky_row(bench: Bench, reference: Run, calls: int) -> list[str]:
    bench.fresh()
    rng = random.Random(7)
    faults: list[Fault] = []
    for _ in range(calls * 20):
        draw = rng.random()
        if draw < 0.30:
            faults.append(Fault("429", retry_after=0))
        elif draw < 0.40:
            faults.append(Fault(rng.choice(["500", "503"]), retry_after=0))
        elif draw < 0.42:
            faults.append(Fault("hang", seconds=3.0))  # past the profile's 1 s client timeout
        else:
            faults.append(Fault(NO_FAULT))
    bench.server.inject(*faults)
    run = bench.run("flaky")
    sent = bench.server.count()
    bench.server.reset()  # faults left unused must not reach the next row
    same = run.code == 0 and results(run) == results(reference)
    return [
        "30% 429 + 10% 5xx + 2% timeouts",
        f"{sent} requests for {calls} calls, {run.seconds:.1f} s",
        f"results identical: {yes(same)}; judgments lost: {lost(run)}",
    ]


def down_row(bench: Bench, calls: int) -> list[str]:
    run = bench.run("down", api_base=f"http://127.0.0.1:{closed_port()}")
    cause = next((line.strip() for line in run.stdout.splitlines() if "×" in line), "(no cause printed)")
    return [
        "provider down (closed port)",
        f"{calls} calls, ended in {run.seconds:.1f} s, exit {run.code}",
        f"< 10 s: {yes(run.seconds < 10)}; exit 1: {yes(run.code == 1)}; cause: `{cause[:90]}`",
    ]


def shared_cache_row(bench: Bench, reference: Run, calls: int) -> list[str]:
    bench.fresh(latency=0.05)
    procs = [bench.start("shared", "--concurrency", "4") for _ in range(2)]
    codes = [p.wait(timeout=300) for p in procs]
    for p in procs:
        assert p.stdout is not None
        p.stdout.read()
        p.stdout.close()
    sent = bench.server.count()
    ratio = sent / calls
    run = bench.run("shared", "--concurrency", "4")  # all from the cache now
    same = codes == [0, 0] and results(run) == results(reference)
    return [
        "two processes, one cache",
        f"{sent} requests for {calls} calls each",
        f"{ratio:.2f}× one run's calls (≤ 1.05: {yes(ratio <= 1.05)}); results identical: {yes(same)}",
    ]


def cap_row(bench: Bench, reference: Run) -> list[str]:
    cap = round(usage(reference)["cost_usd"] * CAP_SHARE, 4)
    shares = []
    for concurrency in (16, 1):
        bench.fresh()
        run = bench.run(f"cap{concurrency}", "--max-cost", f"{cap}", "--concurrency", str(concurrency))
        shares.append(usage(run)["cost_usd"] / cap)
    return [
        f"--max-cost ${cap:g} ({CAP_SHARE:.0%} of the run's cost) at --concurrency 16 and 1",
        f"{shares[0]:.0%} and {shares[1]:.0%} of the cap spent",
        f"≥ 90% at both: {yes(min(shares) >= 0.9)}",
    ]


# The bad minute of issue 30: its seed, its calls, and the bound on attempts a call had before.
RETRY_SEED = 5
RETRY_CALLS = 300
OLD_ATTEMPTS = 6


def retry_time_row(scale: float) -> list[str]:
    """Calls lost to a bad minute with six attempts per call and with the retry time, times × `scale`."""
    minute = BadMinute(RETRY_SEED, retry_after=1.0 * scale)
    now = RetryPolicy(max_total_seconds=300 * scale, initial_wait=1.0 * scale, max_wait=60 * scale)
    policies = {"six attempts": replace(now, max_attempts=OLD_ATTEMPTS), "retry time": now}
    os.environ.setdefault("OPENAI_API_KEY", KEY)
    lost: dict[str, int] = {}
    seconds: dict[str, float] = {}
    with ProviderServer(reply=lambda request: "Result: A") as server:
        # Without the profile's rate limits: what is measured is the retries, not pacing.
        spec = replace(resolve_provider("gpt-5.1", api_base=server.url), rpm=None, tpm=None)
        for name, policy in policies.items():
            server.reset()
            server.faults_by = minute

            async def calls(policy: RetryPolicy = policy) -> list[bool]:
                with Gateway(None, retry=policy) as gateway:
                    asked = [LLMRequest.chat(None, f"question {i}") for i in range(RETRY_CALLS)]
                    results = await asyncio.gather(*[gateway.call(spec, request) for request in asked])
                    return [result.ok for result in results]

            started = time.monotonic()
            lost[name] = asyncio.run(calls()).count(False)
            seconds[name] = time.monotonic() - started
    return [
        f"30% 429 (retry in {scale:g} s) + 10% 500, seed {RETRY_SEED}",
        f"{RETRY_CALLS} calls: {lost['six attempts']} lost with {OLD_ATTEMPTS} attempts a call "
        f"({seconds['six attempts']:.0f} s), {lost['retry time']} with the retry time ({seconds['retry time']:.0f} s)",
        f"none lost: {yes(lost['retry time'] == 0)}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--limit", type=int, default=10, help="pairs per subset (three subsets in the sample)"
    )
    parser.add_argument(
        "--only", choices=["retries", "sigkill"], help="only the row of issue 30's bad minute, or the kills'"
    )
    parser.add_argument(
        "--retry-scale", type=float, default=1.0, help="times of the bad-minute row × this (0.05: quick)"
    )
    args = parser.parse_args()
    began = time.monotonic()
    if args.only == "retries":
        rows = [retry_time_row(args.retry_scale)]
        print("| fault | what happened | wanted |\n|---|---|---|")
        print("| " + " | ".join(rows[0]) + " |")
        return
    with MixedFaultServer(reply=right_answer) as server, tempfile.TemporaryDirectory() as folder:
        bench = Bench(server, Path(folder), args.limit)
        reference = bench.run("reference")
        calls = server.count()
        assert reference.code == 0, reference.stdout
        if args.only == "sigkill":
            print("| fault | what happened | wanted |\n|---|---|---|")
            print("| " + " | ".join(sigkill_row(bench, reference, calls)) + " |")
            return
        rows = [
            sigkill_row(bench, reference, calls),
            flaky_row(bench, reference, calls),
            down_row(bench, calls),
            shared_cache_row(bench, reference, calls),
            cap_row(bench, reference),
        ]
    rows.append(retry_time_row(args.retry_scale))
    print(
        f"Fault injection against the loopback provider: `prbj judge --limit {args.limit}` ({calls} calls)\n"
    )
    print("| fault | what happened | wanted |")
    print("|---|---|---|")
    for row in rows:
        print("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    print(f"\n({time.monotonic() - began:.0f} s on this machine)")


if __name__ == "__main__":
    main()
