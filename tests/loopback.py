"""A provider server on 127.0.0.1 that speaks the three wire formats LiteLLM uses.

- OpenAI chat completions: POST /chat/completions (also /v1/chat/completions), `Authorization: Bearer <key>`
- Anthropic messages:      POST /v1/messages, `x-api-key`, `anthropic-version`
- Gemini generateContent:  POST /models/<model>:generateContent (also under /v1beta), `x-goog-api-key`

Tests script it: `server.reply` maps each parsed request to the text to answer, or to a `Reply` that also says
how the provider ended it (cut at the output cap, refused, a blocked prompt); `server.reasoning` makes the model
spend hidden reasoning tokens out of the request's output cap first, as reasoning models do (DESIGN §8; `spends`
scripts it by the effort asked for);
`server.inject(...)` queues faults (429 with Retry-After, Gemini's 429 with RetryInfo and QuotaFailure, OpenAI's
insufficient_quota and x-ratelimit-reset headers, Anthropic's 529, 500, a hang past the client's timeout, a
garbage body) for the next requests; `server.faults_by` picks a fault (or none) for each request from its prompt
and how many times that prompt was asked before, so a seeded fault pattern is the same whatever order
concurrent calls arrive in; `server.latency` delays every answer; `server.strict_params` answers 400 for
the parameter combinations each provider rejects, `server.retired` names models that answer 404. A request that
asks for log-probabilities (OpenAI `logprobs` / `top_logprobs`, Gemini `generationConfig.responseLogprobs` /
`logprobs`) gets them in its provider's shape, as `server.logprobs` scripts them (Anthropic returns none).
`server.limits` enforces rate limits with real 429s and states limits in each reply's headers
(tests/loopback_limits.py). Every request is recorded (path, headers, body, arrival time, the status it was
answered with when a limit refused it), so tests count at the server what really went over the wire. It runs on
its own thread and event loop, so synchronous tests and subprocesses (the real `prbj` CLI) can talk to it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Fault:
    # "400" | "401" | "404" | "429" | "500" | "503" | "echo-key" | "hang" | "garbage" | "empty", and providers'
    # own shapes: "429-gemini" (RESOURCE_EXHAUSTED: RetryInfo.retryDelay = `retry_after`, QuotaFailure naming
    # `quota_id`, no Retry-After header), "insufficient_quota" (OpenAI's billing 429), "529" (Anthropic's
    # overloaded_error).
    kind: str
    retry_after: float | None = None
    seconds: float = 30.0
    quota_id: str = "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
    # Extra response headers, e.g. OpenAI's x-ratelimit-reset-requests / -tokens on a 429.
    headers: tuple[tuple[str, str], ...] = ()
    # "429-gemini" without its RetryInfo detail: the delay is then only in the message ("Please retry in 2s").
    retry_info: bool = True
    # Only the next request of this family ("openai", "anthropic", "gemini") gets the fault; None: any request.
    family: str | None = None
    # Only the next request whose prompt contains this text gets the fault (one call's first attempt, whatever
    # order concurrent calls arrive in); None: any request.
    prompt: str | None = None


class BadMinute:
    """A provider having a bad minute, for `server.faults_by`: each attempt is answered 429 (asking to retry in
    `retry_after` seconds) with probability `rate_limited`, 500 with probability `server_errors`, else normally.
    The draw depends on the seed, the prompt and the attempt only, so a call meets the same faults whatever order
    concurrent calls arrive in, and `streak` says beforehand how many attempts in a row it fails."""

    def __init__(
        self, seed: int, *, rate_limited: float = 0.3, server_errors: float = 0.1, retry_after: float = 1.0
    ) -> None:
        self.seed = seed
        self.rate_limited = rate_limited
        self.server_errors = server_errors
        self.retry_after = retry_after

    def fault(self, prompt: str, attempt: int) -> Fault | None:
        """The fault the `attempt`-th request (0: the first) with this prompt is answered with, or None."""
        draw = random.Random(f"{self.seed}:{attempt}:{prompt}").random()
        if draw < self.rate_limited:
            return Fault("429", retry_after=self.retry_after)
        if draw < self.rate_limited + self.server_errors:
            return Fault("500")
        return None

    def streak(self, prompt: str) -> int:
        """How many attempts in a row a call with this prompt fails before one is answered."""
        return next(attempt for attempt in itertools.count() if self.fault(prompt, attempt) is None)

    def __call__(self, request: ChatRequest, asked_before: int) -> Fault | None:
        return self.fault(request.prompt, asked_before)


# How a reply ended, in provider-neutral words; each family spells it its own way (`_NATIVE_END`).
STOP, LENGTH, REFUSED = "stop", "length", "refused"
_NATIVE_END = {
    "openai": {STOP: "stop", LENGTH: "length", REFUSED: "content_filter"},
    "anthropic": {STOP: "end_turn", LENGTH: "max_tokens", REFUSED: "refusal"},
    "gemini": {STOP: "STOP", LENGTH: "MAX_TOKENS", REFUSED: "SAFETY"},
}


@dataclass(frozen=True)
class Reply:
    """A scripted reply beyond its text: how the provider ended it and what hidden reasoning it spent."""

    text: str = ""
    end: str = STOP  # STOP | LENGTH | REFUSED
    # The provider's own word for the end when a test needs a particular one (Gemini "PROHIBITED_CONTENT",
    # "RECITATION"); else the family's usual one.
    native: str | None = None
    # Hidden reasoning tokens spent before the visible text: counted in the output tokens and in the cap.
    reasoning_tokens: int = 0
    # Gemini: the prompt itself was blocked (`promptFeedback.blockReason`): no candidates at all. Other
    # families answer it as a refusal.
    blocked: str | None = None


def spend_cap(reply: Reply, cap: int | None) -> Reply:
    """`reply` as a reasoning model delivers it under `cap`: reasoning first, then as much visible text as fits;
    a reply that did not fit ends at the cap (`length`), with no text at all when reasoning took it all."""
    if cap is None or reply.end != STOP or reply.blocked:
        return reply
    room = cap - reply.reasoning_tokens
    words = reply.text.split()
    if room <= 0:
        return Reply("", LENGTH, reasoning_tokens=cap)
    if len(words) > room:
        return Reply(" ".join(words[:room]), LENGTH, reasoning_tokens=reply.reasoning_tokens)
    return reply


@dataclass
class ChatRequest:
    """A request in provider-neutral form, as the scripted reply function sees it."""

    family: str
    path: str
    model: str
    system: str
    messages: list[dict[str, str]]
    headers: dict[str, str]
    body: dict[str, Any]
    received_at: float
    # 429 when server.limits refused it.
    status: int = 200

    @property
    def prompt(self) -> str:
        """All text the model was shown (system + turns), for scripted replies and assertions."""
        return "\n".join([self.system, *(m["content"] for m in self.messages)])

    @property
    def last_user(self) -> str:
        return next((m["content"] for m in reversed(self.messages) if m["role"] == "user"), "")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _parse(family: str, path: str, model: str, body: dict[str, Any], headers: dict[str, str]) -> ChatRequest:
    system = ""
    messages: list[dict[str, str]] = []
    if family == "openai":
        model = body.get("model", model)
        for m in body.get("messages", []):
            if m.get("role") in ("system", "developer"):
                system += _text(m.get("content"))
            else:
                messages.append({"role": m["role"], "content": _text(m.get("content"))})
    elif family == "anthropic":
        model = body.get("model", model)
        system = _text(body.get("system", ""))
        messages = [{"role": m["role"], "content": _text(m.get("content"))} for m in body.get("messages", [])]
    else:
        instruction = body.get("system_instruction") or body.get("systemInstruction") or {}
        system = "".join(p.get("text", "") for p in instruction.get("parts", []))
        for c in body.get("contents", []):
            role = "assistant" if c.get("role") == "model" else "user"
            messages.append({"role": role, "content": "".join(p.get("text", "") for p in c.get("parts", []))})
    return ChatRequest(family, path, model, system, messages, headers, body, time.monotonic())


def _anthropic_cached_prefix(body: dict[str, Any]) -> str | None:
    """The text up to and including the last block marked cache_control (system, then messages), or None."""
    parts: list[str] = []
    marked: int | None = None
    system = body.get("system")
    blocks = [*(system if isinstance(system, list) else [])]
    for message in body.get("messages", []):
        content = message.get("content")
        blocks += content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
    for block in blocks:
        parts.append(block.get("text", ""))
        if block.get("cache_control"):
            marked = len(parts)
    return None if marked is None else "\n".join(parts[:marked])


def _tokens(text: str) -> int:
    return max(1, len(text.split()))


def output_cap(request: ChatRequest) -> int | None:
    """The output bound the request sent, as each provider names it."""
    body = request.body
    if request.family == "gemini":  # Gemini's JSON takes either spelling; LiteLLM sends max_output_tokens
        config = body.get("generationConfig") or {}
        return config.get("maxOutputTokens") or config.get("max_output_tokens")
    return body.get("max_completion_tokens") or body.get("max_tokens")


def reasoning_effort(request: ChatRequest) -> str | None:
    """The reasoning the request asked for, in OpenAI's words: OpenAI `reasoning_effort`, Anthropic `thinking`
    (adaptive: `output_config.effort`; manual: "budget:<tokens>"), Gemini `thinkingConfig.thinkingLevel`; None
    when it asked for none."""
    body = request.body
    if request.family == "openai":
        return body.get("reasoning_effort")
    if request.family == "anthropic":
        thinking = body.get("thinking") or {}
        if thinking.get("type") == "adaptive":
            return (body.get("output_config") or {}).get("effort", "high")
        return f"budget:{thinking['budget_tokens']}" if thinking.get("type") == "enabled" else None
    generation = body.get("generationConfig") or {}
    config = generation.get("thinkingConfig") or generation.get("thinking_config") or {}
    return config.get("thinkingLevel") or config.get("thinking_level")


def spends(by_effort: dict[str | None, int]) -> Callable[[ChatRequest], int]:
    """A `reasoning` script: hidden reasoning tokens by the effort asked for (a manual thinking budget spends
    itself); a request asking for no reasoning spends `by_effort.get(None)` (default 0)."""

    def tokens(request: ChatRequest) -> int:
        effort = reasoning_effort(request)
        if effort is not None and effort.startswith("budget:"):
            return int(effort.split(":", 1)[1])
        return by_effort.get(effort, by_effort.get(None, 0))

    return tokens


# Per generated token: (token, logprob, [(alternative, logprob), ...] most likely first).
TokenLogprobs = list[tuple[str, float, list[tuple[str, float]]]]


def certain_tokens(request: ChatRequest, text: str) -> TokenLogprobs:
    """The default log-probabilities: the text split into word tokens, each certain, alone in its list."""
    return [(token, 0.0, [(token, 0.0)]) for token in re.findall(r"\s*\S+", text)]


def logprobs_asked(family: str, body: dict[str, Any]) -> tuple[bool, int]:
    """(asked at all, alternatives per position) as each provider reads its own request."""
    if family == "openai":
        return bool(body.get("logprobs")), int(body.get("top_logprobs") or 0)
    if family == "gemini":
        config = body.get("generationConfig") or {}
        return bool(config.get("responseLogprobs")), int(config.get("logprobs") or 0)
    return False, 0


def _openai_logprobs(tokens: TokenLogprobs, top: int) -> dict[str, Any]:
    def entry(token: str, logprob: float) -> dict[str, Any]:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

    return {
        "content": [
            {**entry(token, logprob), "top_logprobs": [entry(t, lp) for t, lp in alternatives[:top]]}
            for token, logprob, alternatives in tokens
        ],
        "refusal": None,
    }


def _gemini_logprobs(tokens: TokenLogprobs, top: int) -> dict[str, Any]:
    result: dict[str, Any] = {
        "chosenCandidates": [{"token": token, "logProbability": logprob} for token, logprob, _ in tokens]
    }
    if top:
        result["topCandidates"] = [
            {"candidates": [{"token": t, "logProbability": lp} for t, lp in alternatives[:top]]}
            for _, _, alternatives in tokens
        ]
    return result


def _answer(
    family: str,
    request: ChatRequest,
    reply: str | Reply,
    cache: tuple[int, int] = (0, 0),
    reasoning: int = 0,
    logprobs: tuple[TokenLogprobs, int] | None = None,
) -> dict[str, Any]:
    """The provider's reply; `cache` = (tokens read from, written to) its prompt cache, reported in each
    provider's own usage fields (OpenAI prompt_tokens_details, Anthropic cache_*_input_tokens, Gemini
    cachedContentTokenCount) only when non-zero. A `Reply` adds how it ended and the hidden reasoning spent
    (OpenAI completion_tokens_details.reasoning_tokens, Anthropic thinking blocks, Gemini thoughtsTokenCount);
    `reasoning` more hidden tokens are spent from the output cap first (see `spend_cap`); `logprobs` = (tokens,
    alternatives asked) when the request asked for log-probabilities."""
    if isinstance(reply, str):
        reply = Reply(reply)
    if reasoning:
        reply = spend_cap(
            replace(reply, reasoning_tokens=reply.reasoning_tokens + reasoning), output_cap(request)
        )
    if reply.blocked and family != "gemini":
        reply = Reply("", REFUSED)
    text = reply.text
    end = reply.native or _NATIVE_END[family][reply.end]
    prompt_tokens = _tokens(request.prompt)
    visible = _tokens(text) if text else 0
    completion_tokens = visible + reply.reasoning_tokens
    read, written = cache
    if family == "openai":
        answer = {
            "id": "chatcmpl-loopback",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": text if text or reply.end != REFUSED else None,
                    },
                    "finish_reason": end,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        if read:
            answer["usage"]["prompt_tokens_details"] = {"cached_tokens": read}
        if reply.reasoning_tokens:
            answer["usage"]["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
        if logprobs is not None and text:
            answer["choices"][0]["logprobs"] = _openai_logprobs(*logprobs)
        return answer
    if family == "anthropic":
        usage: dict[str, Any] = {
            "input_tokens": prompt_tokens - read - written,
            "output_tokens": completion_tokens,
        }
        if read or written:
            usage |= {"cache_read_input_tokens": read, "cache_creation_input_tokens": written}
        content: list[dict[str, Any]] = []
        if reply.reasoning_tokens:
            thinking = " ".join(["hmm"] * reply.reasoning_tokens)
            content.append({"type": "thinking", "thinking": thinking, "signature": "loopback-signature"})
        if text or reply.end == STOP:
            content.append({"type": "text", "text": text})
        return {
            "id": "msg_loopback",
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": content,
            "stop_reason": end,
            "stop_sequence": None,
            "usage": usage,
        }
    metadata: dict[str, Any] = {
        "promptTokenCount": prompt_tokens,
        "totalTokenCount": prompt_tokens + completion_tokens,
    }
    if visible:
        metadata["candidatesTokenCount"] = visible
    if reply.reasoning_tokens:
        metadata["thoughtsTokenCount"] = reply.reasoning_tokens
    if read:
        metadata["cachedContentTokenCount"] = read
    if reply.blocked:
        # No candidates: the prompt was refused before any generation.
        return {
            "promptFeedback": {"blockReason": reply.blocked},
            "usageMetadata": metadata,
            "modelVersion": request.model,
        }
    # A candidate cut before any visible text has content without parts (Gemini's MAX_TOKENS shape).
    candidate_content: dict[str, Any] = {"role": "model"}
    if text or reply.end == STOP:
        candidate_content["parts"] = [{"text": text}]
    candidate: dict[str, Any] = {"content": candidate_content, "finishReason": end, "index": 0}
    if logprobs is not None and text:
        candidate["logprobsResult"] = _gemini_logprobs(*logprobs)
    return {"candidates": [candidate], "usageMetadata": metadata, "modelVersion": request.model}


def gemini_resource_exhausted(fault: Fault) -> dict[str, Any]:
    """Gemini's 429 as the Gemini API sends it: the quota that ran out and the delay before a retry are in the
    body's `error.details`, and in the message's "Please retry in …"; there is no Retry-After header."""
    delay = fault.retry_after if fault.retry_after is not None else 53.0
    violation = {
        "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
        "quotaId": fault.quota_id,
        "quotaDimensions": {"location": "global", "model": "gemini-3-flash"},
        "quotaValue": "10",
    }
    help_link = {
        "description": "Learn more about Gemini API quotas",
        "url": "https://ai.google.dev/gemini-api",
    }
    details: list[dict[str, Any]] = [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]},
        {"@type": "type.googleapis.com/google.rpc.Help", "links": [help_link]},
    ]
    if fault.retry_info:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{delay:g}s"})
    message = (
        "You exceeded your current quota, please check your plan and billing details. "
        f"Please retry in {delay:.6g}s."
    )
    return {"error": {"code": 429, "message": message, "status": "RESOURCE_EXHAUSTED", "details": details}}


_RETIRED = {
    "openai": "The model `{model}` does not exist or you do not have access to it.",
    "anthropic": "model: {model}",
    "gemini": "models/{model} is not found for API version v1beta, or is not supported for generateContent.",
}
_OPENAI_REASONING = re.compile(r"^(gpt-[5-9]|o[1-9])(?!.*chat)")
_CLAUDE_VERSION = re.compile(r"^claude-[a-z]+-(\d)(?:-(\d{1,2}))?(?=$|[-@])")


def provider_error(family: str, status: int, message: str, param: str | None = None) -> web.Response:
    """An error in the provider's documented shape."""
    if family == "anthropic":
        kind = "not_found_error" if status == 404 else "invalid_request_error"
        return web.json_response(
            {"type": "error", "error": {"type": kind, "message": message}}, status=status
        )
    if family == "gemini":
        state = "NOT_FOUND" if status == 404 else "INVALID_ARGUMENT"
        return web.json_response(
            {"error": {"code": status, "message": message, "status": state}}, status=status
        )
    code = "model_not_found" if status == 404 else "unsupported_parameter"
    body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
    return web.json_response(body, status=status)


def provider_rejection(request: ChatRequest) -> tuple[str, str] | None:
    """(message, parameter) of the 400 the provider documents for this request's parameters, or None:
    OpenAI reasoning models (max_tokens; temperature other than 1, top_p and logprobs unless reasoning_effort is
    "none"; an effort level the model does not take), Claude 4.5 and later (temperature with top_p; with thinking on, a
    budget below 1024 or not below max_tokens, temperature other than 1, top_p below 0.95, top_k)."""
    body, model = request.body, request.model.split("/")[-1]
    if request.family == "openai" and _OPENAI_REASONING.match(model):
        if "max_tokens" in body:
            return (
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                "'max_completion_tokens' instead.",
                "max_tokens",
            )
        newer = not model.startswith("gpt-5-") and model != "gpt-5"  # gpt-5.1 and later
        effort = body.get("reasoning_effort") or ("none" if newer else "medium")
        levels = ("none", "low", "medium", "high") if newer else ("minimal", "low", "medium", "high")
        if effort not in levels:
            listed = ", ".join(f"'{level}'" for level in levels)
            return (
                f"Unsupported value: '{effort}' is not supported with the '{model}' model. Supported values "
                f"are: {listed}.",
                "reasoning_effort",
            )
        if effort != "none" and body.get("temperature", 1) != 1:
            return (
                f"Unsupported value: 'temperature' does not support {body['temperature']} with this model. Only "
                "the default (1) value is supported.",
                "temperature",
            )
        if effort != "none" and "top_p" in body:
            return "Unsupported parameter: 'top_p' is not supported with this model.", "top_p"
        if effort != "none" and (body.get("logprobs") or "top_logprobs" in body):
            return "Unsupported parameter: 'logprobs' is not supported with this model.", "logprobs"
        return None
    match = _CLAUDE_VERSION.match(model) if request.family == "anthropic" else None
    if match is None or (int(match.group(1)), int(match.group(2) or 0)) < (4, 5):
        return None
    if "temperature" in body and "top_p" in body:
        return (
            "`temperature` and `top_p` cannot both be specified for this model. Please use only one.",
            "top_p",
        )
    thinking = body.get("thinking") or {}
    if thinking.get("type") not in ("enabled", "adaptive"):
        return None
    if thinking.get("type") == "enabled":
        budget = int(thinking.get("budget_tokens") or 0)
        if budget < 1024:
            return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024", "thinking"
        if budget >= int(body.get("max_tokens") or 0):
            return "`max_tokens` must be greater than `thinking.budget_tokens`.", "max_tokens"
    if body.get("temperature", 1) != 1:
        return "`temperature` may only be set to 1 when thinking is enabled.", "temperature"
    if "top_p" in body and float(body["top_p"]) < 0.95:
        return "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled.", "top_p"
    if "top_k" in body:
        return "`top_k` cannot be set when thinking is enabled.", "top_k"
    return None


@dataclass
class ProviderServer:
    reply: Callable[[ChatRequest], str | Reply] = field(default=lambda request: "Result: A")
    # Hidden reasoning tokens each reply spends out of the request's output cap before its text (a number, or a
    # function of the request such as `spends`); None: none, and the cap is not enforced.
    reasoning: int | Callable[[ChatRequest], int] | None = None
    latency: float = 0.0
    requests: list[ChatRequest] = field(default_factory=list)
    _faults: deque[Fault] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _port: int = 0
    # Prompt caching: OpenAI and Gemini cache any prompt prefix of at least this many tokens (words here) seen
    # before; Anthropic caches the content up to a `cache_control` breakpoint of at least this size.
    prefix_cache_min: int = 1024
    _prefixes: set[str] = field(default_factory=set)
    # The three batch APIs (tests/loopback_batches.py); `server.batches` scripts and counts them.
    batches: Any = None
    # Answer 400, as each provider does, for the parameter combinations it rejects (see provider_rejection).
    strict_params: bool = False
    # Model ids the provider no longer serves: every request for one answers 404 in the provider's shape.
    retired: set[str] = field(default_factory=set)
    # Log-probabilities of a reply's tokens, for requests that ask for them (see certain_tokens).
    logprobs: Callable[[ChatRequest, str], TokenLogprobs] = certain_tokens
    # Rate limits enforced with 429s and stated in headers (tests/loopback_limits.py); none by default.
    limits: Any = None
    # The fault for a request no queued fault is meant for, from the request and the number of earlier requests
    # with the same prompt (0 for a call's first attempt); None answers it. Cleared by reset().
    faults_by: Callable[[ChatRequest, int], Fault | None] | None = None
    _asked: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from loopback_batches import BatchService
        from loopback_limits import LimitService

        self.batches = BatchService(self)
        self.limits = LimitService()

    # --- scripting -------------------------------------------------------------------------------
    def inject(self, *faults: Fault | str) -> None:
        """Queue faults for the next requests, one per request, in order."""
        with self._lock:
            self._faults.extend(Fault(f) if isinstance(f, str) else f for f in faults)

    def _take_fault(self, family: str, prompt: str) -> Fault | None:
        """The first queued fault meant for a request of `family` with this prompt (taken off the queue)."""
        for fault in self._faults:
            if fault.family in (None, family) and (fault.prompt is None or fault.prompt in prompt):
                self._faults.remove(fault)
                return fault
        return None

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._faults.clear()
            self._prefixes.clear()
            self._asked.clear()
            self.faults_by = None
        self.batches.reset()
        self.limits.reset()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def count(self, family: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.requests if family is None or r.family == family)

    # --- serving ---------------------------------------------------------------------------------
    async def _handle(self, request: web.Request, family: str) -> web.StreamResponse:
        raw = await request.read()
        model = request.match_info.get("model", "")
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            return web.json_response({"error": {"message": "bad json"}}, status=400)
        parsed = _parse(family, request.path, model, body, dict(request.headers))
        with self._lock:
            self.requests.append(parsed)
            fault = self._take_fault(family, parsed.prompt)
            asked_before = self._asked.get(parsed.prompt, 0)
            self._asked[parsed.prompt] = asked_before + 1
        if fault is None and self.faults_by is not None:
            fault = self.faults_by(parsed, asked_before)
        if fault is None:
            # Over a rate limit: refused at once, as providers do, without the model's latency.
            refused = self.limits.admit(parsed, _tokens(parsed.prompt))
            if refused is not None:
                parsed.status = 429
                return refused
        if self.latency:
            await asyncio.sleep(self.latency)
        if fault is not None:
            return await self._fault(fault, parsed)
        refused = self._refusal(parsed)
        if refused is not None:
            return refused
        try:
            reply = self.answer(parsed)
        except Exception as err:  # a broken script should show up as a server error in the test
            return web.json_response({"error": {"message": f"script failed: {err!r}"}}, status=500)
        asked, top = logprobs_asked(family, body)
        tokens = (self.logprobs(parsed, reply.text), top) if asked else None
        cache = self.prompt_cache(family, parsed)
        answer = _answer(family, parsed, reply, cache, logprobs=tokens)
        self.limits.settle(parsed, (_tokens(reply.text) if reply.text else 0) + reply.reasoning_tokens)
        return web.json_response(answer, headers=self.limits.headers(family))

    def answer(self, request: ChatRequest) -> Reply:
        """The scripted reply to `request`, after the hidden reasoning it spends out of the output cap."""
        reply = self.reply(request)
        if isinstance(reply, str):
            reply = Reply(reply)
        reasoning = self.reasoning(request) if callable(self.reasoning) else self.reasoning or 0
        if reasoning:
            reply = Reply(
                reply.text, reply.end, reply.native, reply.reasoning_tokens + reasoning, reply.blocked
            )
        return spend_cap(reply, output_cap(request)) if reply.reasoning_tokens else reply

    def _refusal(self, request: ChatRequest) -> web.Response | None:
        """A retired model's 404, or (with `strict_params`) the 400 the provider answers for the parameters."""
        model = request.model.split("/")[-1]
        if model in self.retired:
            return provider_error(request.family, 404, _RETIRED[request.family].format(model=model), "model")
        problem = provider_rejection(request) if self.strict_params else None
        return None if problem is None else provider_error(request.family, 400, *problem)

    def prompt_cache(self, family: str, request: ChatRequest) -> tuple[int, int]:
        """(tokens read, tokens written) of the provider's prompt cache for `request`, remembering its prefix."""
        if family == "anthropic":
            prefix = _anthropic_cached_prefix(request.body)
            if prefix is None or _tokens(prefix) < self.prefix_cache_min:
                return 0, 0
            with self._lock:
                seen = prefix in self._prefixes
                self._prefixes.add(prefix)
            return (_tokens(prefix), 0) if seen else (0, _tokens(prefix))
        words = request.prompt.split()
        text = " ".join(words)
        with self._lock:
            best = max(
                (len(p.split()) for p in self._prefixes if text == p or text.startswith(p + " ")), default=0
            )
            for cut in range(self.prefix_cache_min, len(words) + 1, 128):
                self._prefixes.add(" ".join(words[:cut]))
        return (best if best >= self.prefix_cache_min else 0), 0

    async def _fault(self, fault: Fault, request: ChatRequest) -> web.StreamResponse:
        if fault.kind == "echo-key":
            # Some providers quote the credential they rejected; prbj must not pass it on.
            sent = " ".join(
                v
                for k, v in request.headers.items()
                if k.lower() in ("authorization", "x-api-key", "x-goog-api-key")
            )
            return web.json_response({"error": {"message": f"invalid credential: {sent}"}}, status=401)
        extra = dict(fault.headers)
        if fault.kind in ("400", "401", "404", "429", "500", "503"):
            headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
            return web.json_response(
                {"error": {"message": f"injected {fault.kind}", "type": "injected", "code": int(fault.kind)}},
                status=int(fault.kind),
                headers=headers | extra,
            )
        if fault.kind == "429-gemini":
            return web.json_response(gemini_resource_exhausted(fault), status=429, headers=extra)
        if fault.kind == "insufficient_quota":
            error = {
                "message": "You exceeded your current quota, please check your plan and billing details.",
                "type": "insufficient_quota",
                "param": None,
                "code": "insufficient_quota",
            }
            return web.json_response({"error": error}, status=429, headers=extra)
        if fault.kind == "529":
            headers = {"retry-after": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
            body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            return web.json_response(body, status=529, headers=headers | extra)
        if fault.kind == "hang":
            await asyncio.sleep(fault.seconds)
            return web.json_response({"error": {"message": "too late"}}, status=504)
        if fault.kind == "garbage":
            return web.Response(body=b"\x00<html>not json at all", content_type="application/json")
        if fault.kind == "empty":
            return web.json_response({})
        raise ValueError(f"unknown fault {fault.kind!r}")

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)

        def route(family: str) -> Callable[[web.Request], Any]:
            async def handler(request: web.Request) -> web.StreamResponse:
                return await self._handle(request, family)

            return handler

        for prefix in ("", "/v1"):
            app.router.add_post(f"{prefix}/chat/completions", route("openai"))
        app.router.add_post("/v1/messages", route("anthropic"))
        for prefix in ("", "/v1beta", "/v1"):
            app.router.add_post(prefix + "/models/{model}:generateContent", route("gemini"))
        self.batches.add_routes(app)
        return app

    def start(self) -> ProviderServer:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            runner = web.AppRunner(self._app(), access_log=None)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            self._port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self._runner = runner
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="loopback-provider", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("loopback provider server did not start")
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> ProviderServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
