"""A provider server on 127.0.0.1 that speaks the three wire formats LiteLLM uses.

- OpenAI chat completions: POST /chat/completions (also /v1/chat/completions), `Authorization: Bearer <key>`
- Anthropic messages:      POST /v1/messages, `x-api-key`, `anthropic-version`
- Gemini generateContent:  POST /models/<model>:generateContent (also under /v1beta), `x-goog-api-key`

Tests script it: `server.reply` maps each parsed request to the text to answer; `server.inject(...)` queues
faults (429 with Retry-After, 500, a hang past the client's timeout, a garbage body) for the next requests;
`server.latency` delays every answer. A request that asks for log-probabilities (OpenAI `logprobs` /
`top_logprobs`, Gemini `generationConfig.responseLogprobs` / `logprobs`) gets them in its provider's shape, as
`server.logprobs` scripts them (Anthropic returns none). Every request is recorded (path, headers, body, arrival
time), so tests count at the server what really went over the wire. It runs on its own thread and event loop,
so synchronous tests and subprocesses (the real `prbj` CLI) can talk to it.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Fault:
    kind: str  # "429" | "500" | "503" | "401" | "echo-key" | "hang" | "garbage" | "empty"
    retry_after: float | None = None
    seconds: float = 30.0


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
    text: str,
    cache: tuple[int, int] = (0, 0),
    logprobs: tuple[TokenLogprobs, int] | None = None,
) -> dict[str, Any]:
    """The provider's reply; `cache` = (tokens read from, written to) its prompt cache, reported in each
    provider's own usage fields (OpenAI prompt_tokens_details, Anthropic cache_*_input_tokens, Gemini
    cachedContentTokenCount) only when non-zero; `logprobs` = (tokens, alternatives asked) when the request
    asked for log-probabilities."""
    prompt_tokens, completion_tokens = _tokens(request.prompt), _tokens(text)
    read, written = cache
    if family == "openai":
        answer = {
            "id": "chatcmpl-loopback",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        if read:
            answer["usage"]["prompt_tokens_details"] = {"cached_tokens": read}
        if logprobs is not None:
            answer["choices"][0]["logprobs"] = _openai_logprobs(*logprobs)
        return answer
    if family == "anthropic":
        usage: dict[str, Any] = {"input_tokens": prompt_tokens - read - written, "output_tokens": completion_tokens}
        if read or written:
            usage |= {"cache_read_input_tokens": read, "cache_creation_input_tokens": written}
        return {
            "id": "msg_loopback",
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
    metadata: dict[str, Any] = {
        "promptTokenCount": prompt_tokens,
        "candidatesTokenCount": completion_tokens,
        "totalTokenCount": prompt_tokens + completion_tokens,
    }
    if read:
        metadata["cachedContentTokenCount"] = read
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": [{"text": text}]},
        "finishReason": "STOP",
        "index": 0,
    }
    if logprobs is not None:
        candidate["logprobsResult"] = _gemini_logprobs(*logprobs)
    return {"candidates": [candidate], "usageMetadata": metadata, "modelVersion": request.model}


@dataclass
class ProviderServer:
    reply: Callable[[ChatRequest], str] = field(default=lambda request: "Result: A")
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
    # Log-probabilities of a reply's tokens, for requests that ask for them (see certain_tokens).
    logprobs: Callable[[ChatRequest, str], TokenLogprobs] = certain_tokens

    def __post_init__(self) -> None:
        from loopback_batches import BatchService

        self.batches = BatchService(self)

    # --- scripting -------------------------------------------------------------------------------
    def inject(self, *faults: Fault | str) -> None:
        """Queue faults for the next requests, one per request, in order."""
        with self._lock:
            self._faults.extend(Fault(f) if isinstance(f, str) else f for f in faults)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._faults.clear()
            self._prefixes.clear()
        self.batches.reset()

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
            fault = self._faults.popleft() if self._faults else None
        if self.latency:
            await asyncio.sleep(self.latency)
        if fault is not None:
            return await self._fault(fault, parsed)
        try:
            text = self.reply(parsed)
        except Exception as err:  # a broken script should show up as a server error in the test
            return web.json_response({"error": {"message": f"script failed: {err!r}"}}, status=500)
        asked, top = logprobs_asked(family, body)
        tokens = (self.logprobs(parsed, text), top) if asked else None
        return web.json_response(_answer(family, parsed, text, self.prompt_cache(family, parsed), tokens))

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
        if fault.kind in ("429", "500", "503", "401"):
            headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
            return web.json_response(
                {"error": {"message": f"injected {fault.kind}", "type": "injected", "code": int(fault.kind)}},
                status=int(fault.kind),
                headers=headers,
            )
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
