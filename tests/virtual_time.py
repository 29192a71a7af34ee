"""Virtual time for the tests of pacing, retries and the circuit breaker: what they check is prbj's arithmetic of
time (slots of a rate, backoffs, retry deadlines), which a busy machine's real clock only blurs.

`run_virtually(main)` runs a coroutine on an event loop whose clock moves only when every task waits
for a timer: it then jumps to the next one. `time.monotonic` is that clock for the test's length (the event loop,
tenacity and prbj all read it), so a test can assert exact times: a call retried for 300 s takes 300 virtual
seconds and no real ones, and a request paced at 600 a minute leaves exactly 0.1 s after the one before, however
loaded the machine is.

`ScriptedProvider` is a provider for such a loop: a transport registered on the gateway (as prbj's in-process
models are) that answers after a virtual latency, or fails as a provider's HTTP answer fails (an error
carrying the status, raised from an httpx.HTTPStatusError with the headers and JSON body, which is where prbj
reads them under LiteLLM's exceptions), and records when each request left. The wire formats themselves are
tested against the loopback HTTP servers (tests/loopback.py); here the subject is time.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import httpx

from prbj.llm.providers import ProviderSpec, resolve_provider
from prbj.llm.ratelimit_headers import stated_limits
from prbj.llm.transport import ChatCall, Completion

T = TypeVar("T")
SCRIPTED = "scripted"
# Where the virtual clock starts: far from 0, as time.monotonic is, so that nothing mistakes it for "never".
START = 10_000.0


class VirtualClock:
    def __init__(self) -> None:
        self.now = START

    def monotonic(self) -> float:
        return self.now


class _JumpingSelector(selectors.DefaultSelector):
    """The loop's selector: whatever is ready now is handled at once; when nothing is and a timer is due in
    `timeout` seconds, the clock jumps there instead of the process sleeping. With no timer at all it waits for
    real I/O (a worker thread handing a result back)."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            return super().select(None)
        self._clock.now += timeout
        return []


_running: list[VirtualClock] = []


def hold_the_loop(seconds: float) -> None:
    """What a busy process does to an event loop: `seconds` pass while it runs nothing else (a blocking call,
    another process holding the CPU). The virtual twin of `time.sleep` inside a coroutine."""
    _running[-1].now += seconds


def run_virtually(main: Coroutine[Any, Any, T]) -> T:
    """`main`'s result, run on virtual time (the module docstring)."""
    clock = VirtualClock()
    _running.append(clock)
    real = time.monotonic
    time.monotonic = clock.monotonic
    loop = asyncio.SelectorEventLoop(_JumpingSelector(clock))
    try:
        return loop.run_until_complete(main)
    finally:
        loop.close()
        time.monotonic = real
        _running.pop()


class ProviderStatusError(Exception):
    """What a provider client raises for an HTTP error answer (LiteLLM's exceptions carry `status_code`), raised
    from httpx's own error holding the response, where prbj reads headers and body."""

    def __init__(self, status: int, cause: httpx.HTTPStatusError) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status
        self.__cause__ = cause


def http_error(
    status: int, *, headers: Mapping[str, str] | None = None, body: Mapping[str, Any] | None = None
) -> ProviderStatusError:
    """A provider's HTTP error answer as prbj finds it: a status on the client's exception, the response (its
    headers, its JSON body) at the bottom of the chain."""
    request = httpx.Request("POST", "https://provider.invalid/v1/chat/completions")
    response = httpx.Response(
        status,
        headers=dict(headers or {}),
        json=dict(body or {"error": {"message": f"HTTP {status}"}}),
        request=request,
    )
    return ProviderStatusError(
        status, httpx.HTTPStatusError(f"HTTP {status}", request=request, response=response)
    )


@dataclass
class Sent:
    """One request as the scripted provider saw it: when it left (virtual seconds) and its prompt."""

    at: float
    prompt: str
    answered: bool = False


@dataclass
class ScriptedProvider:
    """Answers after `latency` virtual seconds; `fault(prompt, attempt)` (attempt: how many times this prompt came
    before) returns the error to raise instead, or None. `headers(now)` are the rate-limit headers each answer
    states (none by default)."""

    latency: float = 0.0
    fault: Callable[[str, int], BaseException | None] = lambda prompt, attempt: None
    headers: Callable[[float], Mapping[str, str]] | None = None
    sent: list[Sent] = field(default_factory=list)
    in_flight: int = 0
    peak_in_flight: int = 0

    async def send(self, call: ChatCall) -> Completion:
        prompt = call.messages[-1]["content"]
        attempt = sum(1 for s in self.sent if s.prompt == prompt)
        record = Sent(time.monotonic(), prompt)
        self.sent.append(record)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.latency)
            error = self.fault(prompt, attempt)
            if error is not None:
                raise error
        finally:
            self.in_flight -= 1
        record.answered = True
        limits = stated_limits(dict(self.headers(time.monotonic()))) if self.headers else None
        return Completion(
            text="Thinking.\nResult: A", prompt_tokens=20, completion_tokens=5, rate_limits=limits
        )

    def times(self) -> list[float]:
        return [s.at for s in self.sent]


def scripted_spec(name: str = "gpt-5.1", **changes: Any) -> ProviderSpec:
    """A bundled profile answered by the scripted provider; limits lifted unless `changes` set them."""
    spec = resolve_provider(name, api_base="https://provider.invalid/v1")
    limits = {"rpm": None, "tpm": None, "input_tpm": None, "output_tpm": None}
    return replace(spec, transport=SCRIPTED, **(limits | changes))
