"""Rate limits of the loopback provider server: limits it enforces with real 429s, and limits it states in each
reply's headers, in each provider's own shape.

- `enforce`: per-minute limits (requests; tokens, input and output together; input and output tokens apart),
  each a token bucket refilled evenly. The request bucket holds `burst_seconds` of its rate (1 s: OpenAI
  enforces per-minute limits over shorter periods too), the token buckets `token_burst_seconds` (60 s: Anthropic
  documents its limits as token buckets that refill up to the per-minute limit). A request over any of them is
  answered at once with the provider's 429: OpenAI's `rate_limit_exceeded` (no Retry-After; its reset headers
  say when), Anthropic's `rate_limit_error` with `retry-after` in whole seconds, Gemini's `RESOURCE_EXHAUSTED`
  with `google.rpc.QuotaFailure` and `google.rpc.RetryInfo` in the body and no header. Output tokens are
  counted at `max_tokens` when the request arrives and corrected to what was written once answered, as
  Anthropic does.
- `state`: the limits stated in the headers of every reply (429s included): `x-ratelimit-*` on the OpenAI route
  (limit, remaining, reset as "1s" / "120ms" / "6m0s"), `anthropic-ratelimit-*` on the Anthropic route (limit,
  remaining, reset as an RFC 3339 time); Gemini states none. They may differ from the enforced ones (a profile,
  or a provider, that is wrong), and their remaining figures follow buckets of their own.

`server.limits.rejected` counts the 429s it answered; each request's `status` is recorded on it.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from loopback import ChatRequest

KINDS = ("requests", "tokens", "input_tokens", "output_tokens")


@dataclass(frozen=True)
class Limits:
    """Per minute; None: no such limit."""

    requests: float | None = None
    tokens: float | None = None
    input_tokens: float | None = None
    output_tokens: float | None = None


class Bucket:
    """`per_minute` refilled evenly; holds at most `burst_seconds` of it (at least one request's worth)."""

    def __init__(self, per_minute: float, burst_seconds: float) -> None:
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst_seconds)
        self.level = self.capacity
        self._stamp = time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self._stamp) * self.rate)
        self._stamp = now

    def fits(self, amount: float) -> bool:
        # A request larger than the whole bucket passes when the bucket is full, or it could never pass.
        return self.level >= min(amount, self.capacity)

    def take(self, amount: float) -> None:
        self.level -= min(amount, self.capacity)

    def give(self, amount: float) -> None:
        self.level = min(self.capacity, self.level + amount)

    def seconds_until(self, amount: float) -> float:
        return max(0.0, (min(amount, self.capacity) - self.level) / self.rate)

    def seconds_until_full(self) -> float:
        return max(0.0, (self.capacity - self.level) / self.rate)


def _buckets(limits: Limits | None, burst_seconds: float, token_burst_seconds: float) -> dict[str, Bucket]:
    if limits is None:
        return {}
    return {
        kind: Bucket(value, burst_seconds if kind == "requests" else token_burst_seconds)
        for kind in KINDS
        if (value := getattr(limits, kind)) is not None
    }


def _max_tokens(request: ChatRequest) -> int:
    from loopback import output_cap

    cap = output_cap(request)
    return cap if isinstance(cap, int) else 1024


def _duration(seconds: float) -> str:
    """OpenAI's reset format: "120ms", "1s", "6m0s"."""
    if seconds < 1:
        return f"{max(1, round(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:.0f}s" if minutes else f"{rest:.3g}s"


@dataclass
class LimitService:
    enforce: Limits | None = None
    state: Limits | None = None
    burst_seconds: float = 1.0
    token_burst_seconds: float = 60.0
    rejected: int = 0
    _enforced: dict[str, Bucket] = field(default_factory=dict)
    _stated: dict[str, Bucket] = field(default_factory=dict)
    _configured: tuple[Any, ...] = ()
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        with self._lock:
            self.enforce = self.state = None
            self.burst_seconds = 1.0
            self.token_burst_seconds = 60.0
            self.rejected = 0
            self._configured = ()

    def _sync(self) -> None:
        """(Re)build the buckets when a test changed the limits: they start full."""
        configured = (self.enforce, self.state, self.burst_seconds, self.token_burst_seconds)
        if configured != self._configured:
            self._configured = configured
            self._enforced = _buckets(self.enforce, self.burst_seconds, self.token_burst_seconds)
            self._stated = _buckets(self.state, self.burst_seconds, self.token_burst_seconds)

    @staticmethod
    def _amounts(request: ChatRequest, prompt_tokens: int) -> dict[str, float]:
        output = _max_tokens(request)
        return {
            "requests": 1,
            "tokens": prompt_tokens + output,
            "input_tokens": prompt_tokens,
            "output_tokens": output,
        }

    def admit(self, request: ChatRequest, prompt_tokens: int) -> web.Response | None:
        """None when the request is within the enforced limits (they are charged); else the 429 to answer."""
        with self._lock:
            self._sync()
            if not self._enforced and not self._stated:
                return None
            now = time.monotonic()
            amounts = self._amounts(request, prompt_tokens)
            for bucket in (*self._enforced.values(), *self._stated.values()):
                bucket.refill(now)
            over = [kind for kind, bucket in self._enforced.items() if not bucket.fits(amounts[kind])]
            if over:
                self.rejected += 1
                wait = max(self._enforced[kind].seconds_until(amounts[kind]) for kind in over)
                return self._rejection(request, over[0], wait)
            for buckets in (self._enforced, self._stated):
                for kind, bucket in buckets.items():
                    bucket.take(amounts[kind])
            return None

    def settle(self, request: ChatRequest, completion_tokens: int) -> None:
        """The reply was written: output tokens charged at max_tokens are corrected to what was written."""
        with self._lock:
            unused = max(0, _max_tokens(request) - completion_tokens)
            for buckets in (self._enforced, self._stated):
                for kind in ("tokens", "output_tokens"):
                    if kind in buckets:
                        buckets[kind].give(unused)

    def headers(self, family: str) -> dict[str, str]:
        """The stated limits in `family`'s header shape (none for Gemini, or when nothing is stated)."""
        with self._lock:
            self._sync()
            if not self._stated or family == "gemini":
                return {}
            now = time.monotonic()
            for bucket in self._stated.values():
                bucket.refill(now)
            if family == "anthropic":
                return self._anthropic_headers()
            return self._openai_headers()

    def _openai_headers(self) -> dict[str, str]:
        headers = {}
        for kind, name in (("requests", "requests"), ("tokens", "tokens")):
            bucket = self._stated.get(kind)
            if bucket is not None:
                headers[f"x-ratelimit-limit-{name}"] = f"{bucket.per_minute:.0f}"
                headers[f"x-ratelimit-remaining-{name}"] = f"{math.floor(bucket.level)}"
                headers[f"x-ratelimit-reset-{name}"] = _duration(bucket.seconds_until_full())
        return headers

    def _anthropic_headers(self) -> dict[str, str]:
        headers = {}
        now = datetime.now(UTC)
        for kind, name in (
            ("requests", "requests"),
            ("input_tokens", "input-tokens"),
            ("output_tokens", "output-tokens"),
        ):
            bucket = self._stated.get(kind)
            if bucket is not None:
                reset = now + timedelta(seconds=bucket.seconds_until_full())
                headers[f"anthropic-ratelimit-{name}-limit"] = f"{bucket.per_minute:.0f}"
                headers[f"anthropic-ratelimit-{name}-remaining"] = f"{math.floor(bucket.level)}"
                headers[f"anthropic-ratelimit-{name}-reset"] = reset.isoformat().replace("+00:00", "Z")
        return headers

    def _rejection(self, request: ChatRequest, kind: str, wait: float) -> web.Response:
        family = request.family
        what = kind.replace("_", " ")
        if family == "anthropic":
            body: dict[str, Any] = {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": f"This request would exceed your organization's rate limit of "
                    f"{self._enforced[kind].per_minute:,.0f} {what} per minute.",
                },
            }
            headers = {"retry-after": str(max(1, math.ceil(wait))), **self._anthropic_headers()}
        elif family == "openai":
            body = {
                "error": {
                    "message": f"Rate limit reached for {what} per min: Limit "
                    f"{self._enforced[kind].per_minute:.0f}. Please try again in {_duration(wait)}.",
                    "type": kind,
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            }
            headers = self._openai_headers()
        else:
            body = {
                "error": {
                    "code": 429,
                    "message": "Resource has been exhausted (e.g. check quota).",
                    "status": "RESOURCE_EXHAUSTED",
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                            "violations": [
                                {
                                    "quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                                    "quotaId": "GenerateRequestsPerMinutePerProjectPerModel",
                                }
                            ],
                        },
                        {
                            "@type": "type.googleapis.com/google.rpc.RetryInfo",
                            "retryDelay": f"{math.ceil(wait)}s",
                        },
                    ],
                }
            }
            headers = {}
        return web.json_response(body, status=429, headers=headers)
