"""How fast one provider is called, and why not faster.

The physical limit of an API run is the provider's rate limit, so requests in flight follow from it (Little's
law: in flight = rate × latency, for requests and for tokens, with the latency observed), inside a ceiling that
protects memory and the provider. The limits start as the profile's (or a flag's) and follow what the provider
states in its replies' headers, up and down; a 429 still halves requests in flight, whatever the headers say.
What held requests back is timed by cause, and what the run achieved is set against each limit, so a run can
say which limit bound it.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prbj.llm.limits import AdaptiveConcurrency, RequestPacer, TokenWindow
from prbj.llm.ratelimit_headers import StatedLimits, error_headers, stated_limits

if TYPE_CHECKING:
    from prbj.llm.providers import ProviderSpec
    from prbj.llm.transport import Completion

# The ceiling on requests in flight per provider when neither a profile nor --max-concurrency sets one: LiteLLM's
# own HTTP client opens at most 500 connections per host (AIOHTTP_CONNECTOR_LIMIT_PER_HOST), so requests above it
# would only queue inside the client, where their timeout already runs. 500 reaches 4,000 requests/min at up to
# ~6 s latency.
DEFAULT_MAX_IN_FLIGHT = 500
# Requests in flight before any latency is known, when no ceiling is set (where replies state limits, the first
# request goes alone anyway).
START_IN_FLIGHT = 16
# In flight = rate × latency × HEADROOM + SPARE: latency varies from call to call, and a request waiting at the
# pacer costs only memory, while one missing there costs rate.
HEADROOM = 1.25
SPARE = 2
# Weight of the newest observation in the running means of latency and tokens per request.
RECENT_WEIGHT = 0.2
# A provider that states its quota is used up is waited for until its reset, at most this long at a time.
MAX_HOLD_SECONDS = 60.0
# What bound the run: the cause requests waited on longest, once waits reach this share of the time requests
# spent with the provider; below it nothing did ("none": the run asked for less than the limits allow).
BOUND_SHARE = 0.05
# Requests queued at the pacer but released at less than this share of its rate: the process (its event loop,
# short of CPU) held them, not the rate.
DELIVERED_SHARE = 0.9
# A limit the run achieved at least this share of (requests, or tokens of its kind, per minute from the first
# request sent to the last answer) is the one that bound it, when what requests waited on is one of the rate
# limits' own queues. An evenly paced rate is met at ~100%; a token window lets a whole minute's tokens out at
# once, so a short run may exceed it; the first request may go alone and the last answer's latency counts, which
# the 10% leaves room for.
REACHED_SHARE = 0.9

LIMIT_NAMES = ("rpm", "tpm", "input_tpm", "output_tpm")
# The wait cause of each limit: its own queue (the pacer, each token window), and the name a run bound by it is
# said to be bound by.
LIMIT_CAUSES = {"rpm": "rate", "tpm": "tokens", "input_tpm": "input-tokens", "output_tpm": "output-tokens"}
# Why a request waited: the request rate, a token window (tokens, input and output together, or each apart), the
# ceiling on requests in flight, requests in flight halved after 429s, requests in flight below the ceiling
# (rate × latency), --max-cost reservations, retry sleeps, and the process itself (its event loop let a request
# leave later than its slot in the rate: CPU).
WAIT_CAUSES = (
    "rate",
    "tokens",
    "input-tokens",
    "output-tokens",
    "ceiling",
    "back-off",
    "in-flight",
    "budget",
    "retries",
    "cpu",
)
# Waits that are the rate limits' doing: a request queued at the pacer or a token window, or held because
# requests in flight (Little's law: the binding rate × latency) were full. Which limit it was is told by what the
# run achieved against each (see bound_by): the in-flight limit is sized from the tightest rate, and a token
# window that lets a minute's tokens out in a burst makes the pacer or the in-flight limit look binding while it
# is the window that sets the run's pace over the minute.
_RATE_WAITS = frozenset({*LIMIT_CAUSES.values(), "in-flight"})
_UNITS = {"rpm": "req/min", "tpm": "tok/min", "input_tpm": "input tok/min", "output_tpm": "output tok/min"}


@dataclass(frozen=True)
class Ticket:
    """A request's reservations in the token windows (total, input, output), corrected when it is answered."""

    entries: tuple[list[float] | None, ...]


class ProviderPacing:
    def __init__(self, spec: ProviderSpec, notify: Callable[[str], None] | None = None) -> None:
        self.name = spec.name
        self._flagged = spec.flagged
        self._configured: dict[str, float | None] = {name: getattr(spec, name) for name in LIMIT_NAMES}
        self.sources = {
            name: "flag" if name in spec.flagged else "profile"
            for name, value in self._configured.items()
            if value is not None
        }
        self.ceiling_source = (
            "flag" if "max_concurrency" in spec.flagged else "profile" if spec.max_concurrency else "default"
        )
        # A ceiling that was set explicitly is also where a provider with no known rate starts, as it always did.
        self.concurrency = AdaptiveConcurrency(
            spec.max_concurrency or DEFAULT_MAX_IN_FLIGHT, start=spec.max_concurrency or START_IN_FLIGHT
        )
        self.pacer = RequestPacer(spec.rpm)
        self.windows = {name: TokenWindow(getattr(spec, name)) for name in LIMIT_NAMES[1:]}
        # Anthropic does not count prompt-cache reads against its input-token limit.
        self._cache_reads_free = spec.family == "anthropic"
        self._notify = notify
        self._latency: float | None = None
        self._per_request: dict[str, float | None] = dict.fromkeys(LIMIT_NAMES[1:])
        self.learned: dict[str, float] = {}
        self._announced: tuple[tuple[str, float], ...] = ()
        self.waits = dict.fromkeys(WAIT_CAUSES, 0.0)
        self.peak_in_flight = 0
        self._first_sent: float | None = None
        self._last_answered: float | None = None
        self._busy = 0.0
        # What the run used of each limit: requests that left, and the tokens each window counts (as answered).
        self._used = dict.fromkeys(LIMIT_NAMES, 0.0)

    # --- the limits in force ---------------------------------------------------------------------------------

    def limit(self, name: str) -> float | None:
        return self.pacer.rpm if name == "rpm" else self.windows[name].tpm

    @property
    def counts_tokens(self) -> bool:
        """Whether a token window applies, so that a request's prompt must be counted before it leaves."""
        return any(window.tpm for window in self.windows.values())

    @property
    def in_flight_limit(self) -> int:
        return self.concurrency.limit

    def _set(self, name: str, value: float | None) -> None:
        if name == "rpm":
            self.pacer.set_rpm(value)
        else:
            self.windows[name].set_limit(value)

    # --- a request's way out ---------------------------------------------------------------------------------

    async def enter(self) -> None:
        """Take a place among the requests in flight (release it with `leave`)."""
        gate = self.concurrency
        if gate.waiting or gate.in_flight >= gate.limit:
            # Requests queued behind the pacer or a token window wait here too: the cause is theirs.
            cause = self._gate_cause()
            started = time.monotonic()
            await gate.acquire()
            self.waits[cause] += time.monotonic() - started
        else:
            await gate.acquire()
        self.peak_in_flight = max(self.peak_in_flight, gate.in_flight)

    def leave(self) -> None:
        self.concurrency.release()

    def _gate_cause(self) -> str:
        gate = self.concurrency
        if self.pacer.waiting:
            return "rate"
        for name, window in self.windows.items():
            if window.waiting:
                return LIMIT_CAUSES[name]
        if gate.backed_off:
            return "back-off"
        return "ceiling" if gate.limit >= gate.maximum else "in-flight"

    async def depart(self, prompt_tokens: int, output_bound: int) -> Ticket:
        """Wait for the request's slot in the rate and room in the token windows (input and output tokens each
        against its own limit); what it reserved, for `answered`."""
        waited, late = await self.pacer.wait()
        if waited or late:
            self.waits["rate"] += waited
            self.waits["cpu"] += late
        windows = self.windows
        entries: list[list[float] | None] = []
        for name, tokens in (
            ("tpm", prompt_tokens + output_bound),
            ("input_tpm", prompt_tokens),
            ("output_tpm", output_bound),
        ):
            window = windows[name]
            if not window.tpm:
                entries.append(None)
                continue
            started = time.monotonic()
            entries.append(await window.acquire(tokens))
            self.waits[LIMIT_CAUSES[name]] += time.monotonic() - started
        if self._first_sent is None:
            self._first_sent = time.monotonic()
        self._used["rpm"] += 1
        return Ticket(tuple(entries))

    def answered(self, seconds: float, ticket: Ticket, completion: Completion) -> None:
        """A reply came back after `seconds`: tokens corrected to what was used, latency and limits learned."""
        self._last_answered = time.monotonic()
        self._busy += seconds
        self._latency = _recent(self._latency, seconds)
        prompt, output = completion.prompt_tokens, completion.completion_tokens
        counted_input = prompt - completion.cached_tokens if self._cache_reads_free else prompt
        for (name, used), entry in zip(
            (("tpm", prompt + output), ("input_tpm", counted_input), ("output_tpm", output)),
            ticket.entries,
            strict=True,
        ):
            self.windows[name].correct(entry, used)
            self._per_request[name] = _recent(self._per_request[name], used)
            self._used[name] += used
        self.concurrency.record_success()
        if completion.rate_limits is not None:
            self.learn(completion.rate_limits)
        self._aim()

    def failed(self, error: BaseException, *, rate_limited: bool, sent_at: float | None = None) -> None:
        """A request sent at `sent_at` failed: a 429 halves requests in flight after a streak (once per round
        trip); limits its headers state are learned all the same (a 429 often says when the quota is back)."""
        if rate_limited:
            self.concurrency.record_rate_limited(sent_at)
        stated = stated_limits(error_headers(error))
        if stated is not None:
            self.learn(stated)

    def waited(self, cause: str, seconds: float) -> None:
        """Time a request waited outside the provider's own limits (--max-cost reservations, retry sleeps)."""
        self.waits[cause] += seconds

    # --- what the provider states ----------------------------------------------------------------------------

    def learn(self, stated: StatedLimits) -> None:
        """Use the provider's stated limits in place of the profile's (a flag stays as a cap below them), and
        wait for a quota it says is used up."""
        changed = False
        for name, quota in stated.quotas().items():
            if quota.limit is not None:
                self.learned[name] = quota.limit
                changed |= self._use(name, quota.limit)
            if quota.exhausted:
                self._hold(name, quota.reset_s or 0.0)
        if changed:
            self._aim()
            self._announce()

    def _use(self, name: str, stated: float) -> bool:
        configured = self._configured[name]
        if name in self._flagged and configured is not None and configured <= stated:
            value, source = configured, "flag"
        else:
            value, source = stated, "provider headers"
        if self.limit(name) == value and self.sources.get(name) == source:
            return False
        self._set(name, value)
        self.sources[name] = source
        return True

    def _hold(self, name: str, seconds: float) -> None:
        seconds = min(seconds, MAX_HOLD_SECONDS)
        if name == "rpm":
            self.pacer.hold_until(asyncio.get_running_loop().time() + seconds)
        else:
            self.windows[name].hold_until(time.monotonic() + seconds)

    def _announce(self) -> None:
        learned = tuple(sorted(self.learned.items()))
        if self._notify is None or not learned or learned == self._announced:
            return
        self._announced = learned
        stated = ", ".join(
            f"{self.learned[name]:,.0f} {_UNITS[name]}" for name in LIMIT_NAMES if name in self.learned
        )
        self._notify(f"{self.name} limits: {stated} (from the provider's headers)")

    # --- Little's law ----------------------------------------------------------------------------------------

    def _aim(self) -> None:
        """Requests in flight = the binding request rate × the observed latency (with headroom)."""
        if self._latency is None:
            return
        rates = [self.pacer.rpm / 60.0] if self.pacer.rpm else []
        for name, window in self.windows.items():
            per_request = self._per_request[name]
            if window.tpm and per_request:
                rates.append(window.tpm / 60.0 / per_request)
        if not rates:
            self.concurrency.aim(None)
            return
        self.concurrency.aim(math.ceil(min(rates) * self._latency * HEADROOM) + SPARE)

    # --- the run's account -----------------------------------------------------------------------------------

    def bound_by(self) -> str | None:
        """What held the provider's requests back longest; "none" when nothing did much; None when none left.

        Waits name the kind of trouble. When it was the rate limits' (a queue at the pacer or a token window, or
        requests in flight full), the limit named is the one the run came closest to, if it reached
        REACHED_SHARE of it: with Anthropic's 30,000 input tokens a minute at ~800 tokens a request (~37
        requests a minute), requests in flight are sized from the input-token limit and the window lets the
        minute's tokens out in a burst, so requests mostly wait for a place in flight or at the request pacer,
        yet it is the input-token limit that sets the run's pace."""
        if self._first_sent is None:
            return None
        cause, seconds = max(self.waits.items(), key=lambda item: item[1])
        if seconds <= BOUND_SHARE * self._busy:
            return "none"
        delivered = self.pacer.delivered()
        if cause == "rate" and delivered is not None and delivered < DELIVERED_SHARE:
            return "cpu"
        if cause in _RATE_WAITS:
            reached = self._most_used_limit()
            if reached is not None:
                return LIMIT_CAUSES[reached]
        return cause

    def _most_used_limit(self) -> str | None:
        """The limit in force the run used the largest share of (per minute, from its first request sent to its
        last answer), if that share reached REACHED_SHARE; else None."""
        if self._first_sent is None or self._last_answered is None:
            return None
        active = self._last_answered - self._first_sent
        if active <= 0:
            return None
        shares = {
            name: self._used[name] / active * 60.0 / limit
            for name in LIMIT_NAMES
            if (limit := self.limit(name))
        }
        if not shares:
            return None
        name = max(shares, key=shares.__getitem__)
        return name if shares[name] >= REACHED_SHARE else None

    def report(self, requests_sent: int, tokens: int) -> dict[str, Any]:
        """The run's figures for run.json and the calls table."""
        active = (
            self._last_answered - self._first_sent
            if self._first_sent is not None and self._last_answered is not None
            else 0.0
        )
        limits: dict[str, Any] = {
            name: {"value": self.limit(name), "source": self.sources.get(name, "profile")}
            for name in LIMIT_NAMES
            if self.limit(name)
        }
        limits["max_in_flight"] = {"value": self.concurrency.maximum, "source": self.ceiling_source}
        return {
            "achieved_rpm": round(requests_sent / active * 60, 1) if active > 0 else None,
            "achieved_tpm": round(tokens / active * 60, 1) if active > 0 else None,
            "limits": limits,
            "learned_limits": dict(self.learned) or None,
            "bound_by": self.bound_by(),
            "waits_s": {cause: round(seconds, 3) for cause, seconds in self.waits.items()},
            # The share of its rate the pacer released while requests queued for it (below 0.9: CPU-bound).
            "rate_delivered": None if (delivered := self.pacer.delivered()) is None else round(delivered, 3),
            "peak_in_flight": self.peak_in_flight,
        }


def _recent(mean: float | None, value: float) -> float:
    return value if mean is None else mean + RECENT_WEIGHT * (value - mean)
