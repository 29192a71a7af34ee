"""An HTTP reward server that exposes any prbj pointwise judge to PPO trainers (verl, TRL, OpenRLHF).

Endpoints (JSON in, JSON out):

- `POST /score {response_text, query, profile}` → `{"score": float}`: the contract of the official verl
  reward function. Optional fields: `pair_id` (or `id`), `subset` (or `category`).
- `POST /score/batch {"items": [{...}, ...]}` → `{"scores": [float, ...]}` in the order of `items`.
- `POST /get_reward {"query": [...], "prompts": [...], "labels": [...]}` → `{"rewards": [...], "scores": [...]}`:
  OpenRLHF's remote reward model contract (`--remote_rm_url http://host:port/get_reward`). `query[i]` is the
  prompt followed by the response; `labels[i]` (from `--label_key`) is a JSON object, or a string holding
  one, with `query` and `profile` (optionally `pair_id`, `subset`).
- `GET /health` → `{"status": "ok", "judge": ..., "context": ..., "scored": n}`.

Every scoring endpoint takes an optional `?scale=FACTOR` that multiplies the returned scores (e.g. 0.1 for the
official setup's reward = score / 10 when the trainer cannot scale it itself); a scale that makes a score
overflow is a 400, and no answer ever holds NaN or Infinity (JSON has neither).

Who may call it (prbj.web.access): a request must be addressed to this machine (its names and addresses, the
loopback names on a loopback or wildcard bind, names given with --allow-host), a browser's cross-site Origin is
refused (403), a POST body must be declared `application/json` (415: the content types a web page can send
without asking are not), and with a token (`--token`, PRBJ_SERVE_TOKEN; required beyond loopback) every
endpoint but /health needs `Authorization: Bearer TOKEN` or `?token=TOKEN` (401).

`profile` may be a list of `{id?, category?, text}` objects, a list of strings, or one string; a string in the
official prompt format ("Post 1 (Category: c):\\ntext\\nPost 2 ...") is split back into its posts. The judge
gets a `JudgeView` of context "profile" when it reads the profile and "none" otherwise, exactly as in
`prbj judge`, so a served score equals the score `prbj judge` gives the same texts (for the `random` baseline
pass the pair's `pair_id`: its draw depends on it). Malformed requests get 400 with a message naming the field:
a missing `query`, a `profile` string that holds JSON (a list serialized twice), a body that is not UTF-8 or is
JSON nested too deeply. Idle connections close after IDLE_TIMEOUT; a body slower than READ_TIMEOUT gets 408.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import math
import re
import signal
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import hdrs, web

from prbj.data.files import json_problem
from prbj.data.schema import Context, JudgeView, ProfilePost
from prbj.errors import ConfigError
from prbj.judges.base import Judge, PointwiseJudge
from prbj.judges.generative import SCORE_SCALE, PointwiseLLMJudge
from prbj.judges.official import Protocol, to_served_scale
from prbj.web import IDLE_TIMEOUT, READ_TIMEOUT, SERVE_TOKEN_ENV
from prbj.web.access import (
    HostPolicy,
    bearer,
    checked_allowed_hosts,
    checked_token,
    is_loopback,
    same_token,
)

MAX_BODY_BYTES = 64 * 2**20
# Answers one request may ask for (items of a batch, samples of an OpenRLHF call): larger batches are refused
# with 413 before anything is scored, so one request cannot hold the server's memory (200,000 items held
# ~480 MB) or its judge for everyone else. Trainers send a rollout batch per request: thousands, not more.
MAX_BATCH_ITEMS = 16_384
DEFAULT_SUBSET = "served"
JSON_TYPE = "application/json"
# No answer may hold NaN or Infinity: JSON has neither, and a trainer's parser would choke or take them.
_dumps = functools.partial(json.dumps, allow_nan=False)
# The official verl data preparation joins the top-k posts as "Post i (Category: c):\n<text>" lines.
_OFFICIAL_POST = re.compile(r"^Post \d+ \(Category: (?P<category>[^\n]*?)\):\n", re.MULTILINE)


class RequestError(ValueError):
    """A request the server cannot score: answered with `status` (400 unless said) and this message."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _at_most(count: int, field: str, limit: int) -> None:
    if count > limit:
        raise RequestError(
            f"field '{field}': {count:,} items; at most {limit:,} per request (send the rest in another)", 413
        )


@dataclass(frozen=True, slots=True)
class ScoreRequest:
    view: JudgeView
    response_text: str


def _text(body: Mapping[str, Any], field: str, where: str, *, required: bool) -> str | None:
    value = body.get(field)
    if value is None:
        if required:
            raise RequestError(f"field '{where}{field}': missing")
        return None
    if not isinstance(value, str):
        raise RequestError(f"field '{where}{field}': expected a string, got {type(value).__name__}")
    return value


def parse_profile(value: Any, where: str = "") -> tuple[ProfilePost, ...]:
    """The user's past posts from any of the accepted shapes (see the module docstring)."""
    if value is None:
        return ()
    if isinstance(value, str):
        if _holds_json(value):
            # A list serialized twice would otherwise be judged as one post of JSON text.
            raise RequestError(
                f"field '{where}profile': a string holding JSON; send the list itself, not its JSON text"
            )
        return _profile_from_string(value)
    if not isinstance(value, list):
        raise RequestError(f"field '{where}profile': expected a list or a string, got {type(value).__name__}")
    posts = []
    for index, item in enumerate(value):
        if isinstance(item, str):
            posts.append(ProfilePost(id=f"p{index + 1}", category="", text=item))
            continue
        if not isinstance(item, dict):
            raise RequestError(f"field '{where}profile[{index}]': expected a string or an object with 'text'")
        text = _text(item, "text", f"{where}profile[{index}].", required=True) or ""
        category = _text(item, "category", f"{where}profile[{index}].", required=False) or ""
        post_id = item.get("id")
        posts.append(
            ProfilePost(
                id=str(post_id) if post_id is not None else f"p{index + 1}", category=category, text=text
            )
        )
    return tuple(posts)


def _holds_json(value: str) -> bool:
    stripped = value.strip()
    if not stripped.startswith(("[", "{")):
        return False
    try:
        return isinstance(json.loads(stripped), list | dict)
    except (ValueError, RecursionError):
        return False


def _profile_from_string(value: str) -> tuple[ProfilePost, ...]:
    if not value.strip():
        return ()
    headers = list(_OFFICIAL_POST.finditer(value))
    if not headers or headers[0].start() != 0:
        return (ProfilePost(id="p1", category="", text=value),)
    posts = []
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(value)
        text = value[header.end() : end].removesuffix("\n")
        posts.append(ProfilePost(id=f"p{index + 1}", category=header["category"], text=text))
    return tuple(posts)


def parse_request(body: Any, context: Context, where: str = "") -> ScoreRequest:
    if not isinstance(body, dict):
        raise RequestError(f"{where.rstrip('.') or 'body'}: expected a JSON object")
    response_text = _text(body, "response_text", where, required=True)
    profile = parse_profile(body.get("profile"), where)
    # Required, as in the verl contract: without it the judge would score an answer to an empty question.
    query = _text(body, "query", where, required=True) or ""
    pair_id = _text(body, "pair_id", where, required=False) or _text(body, "id", where, required=False)
    subset = _text(body, "subset", where, required=False) or _text(body, "category", where, required=False)
    view = JudgeView(
        pair_id=pair_id or _derived_pair_id(query, profile),
        subset=subset or DEFAULT_SUBSET,
        question=query,
        profile=profile if context != "none" else (),
        context=context,
    )
    return ScoreRequest(view=view, response_text=response_text or "")


def _derived_pair_id(query: str, profile: Sequence[ProfilePost]) -> str:
    """Answers to the same question for the same user share an id, as they would in one benchmark pair."""
    blob = json.dumps([query, [(p.id, p.category, p.text) for p in profile]], ensure_ascii=False)
    return "served-" + hashlib.sha256(blob.encode()).hexdigest()[:16]


def served_context(judge: Judge) -> Context:
    if not isinstance(judge, PointwiseJudge):
        raise ConfigError(
            f"judge {judge.name!r} compares two answers; a reward server needs a judge that scores one answer"
        )
    if judge.context == "oracle":
        raise ConfigError(
            f"judge {judge.name!r} reads the scoring rubric (oracle context), which a training request lacks"
        )
    return judge.context


class RewardService:
    """Scores requests with one judge; answers that share a question and profile go to the judge together."""

    def __init__(
        self,
        judge: Judge,
        *,
        concurrency: int = 16,
        read_timeout: float = READ_TIMEOUT,
        protocol: Protocol = "prbj",
        access: HostPolicy | None = None,
        token: str | None = None,
        max_batch: int = MAX_BATCH_ITEMS,
    ) -> None:
        self.context = served_context(judge)
        self.max_batch = max_batch
        self.access = access or HostPolicy.for_bind("127.0.0.1")
        self.token = token or None
        # The official generative server answers on [0, 1]; prbj's LLM judges score 1-10 (served as is by default).
        self._official_scale = protocol == "official" and isinstance(judge, PointwiseLLMJudge)
        self.read_timeout = read_timeout
        # served_context() above refuses judges that cannot score one answer at a time.
        self.judge: PointwiseJudge = cast(PointwiseJudge, judge)
        self._gate = asyncio.Semaphore(concurrency)
        self.scored = 0

    async def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        groups: dict[Hashable, list[int]] = {}
        for index, request in enumerate(requests):
            view = request.view
            groups.setdefault((view.pair_id, view.subset, view.question, view.profile), []).append(index)
        scores: list[float] = [math.nan] * len(requests)

        async def run(indexes: list[int]) -> None:
            view = requests[indexes[0]].view
            async with self._gate:
                values = await self.judge.score(view, [requests[i].response_text for i in indexes])
            if len(values) != len(indexes):
                raise RuntimeError(f"judge returned {len(values)} scores for {len(indexes)} answers")
            for i, value in zip(indexes, values, strict=True):
                scores[i] = (
                    to_served_scale(float(value), *SCORE_SCALE) if self._official_scale else float(value)
                )

        async with asyncio.TaskGroup() as group:
            for indexes in groups.values():
                group.create_task(run(indexes))
        if not all(math.isfinite(s) for s in scores):
            raise RuntimeError("judge returned a non-finite score")
        self.scored += len(requests)
        return scores

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Host, Origin, token and content type, checked before a body is read (module docstring)."""
        sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
        local = str(sockname[0]) if isinstance(sockname, tuple) else None
        if not self.access.allows(request.headers.get(hdrs.HOST), local):
            return _error(421, "header 'Host': not a name of this server (start it with --allow-host NAME)")
        origin = request.headers.get(hdrs.ORIGIN)
        if origin is not None and not self.access.allows_origin(origin, local):
            return _error(
                403, f"header 'Origin': {origin[:100]!r} is another site; cross-site requests are refused"
            )
        if self.token is not None and request.path != "/health":
            sent = bearer(request.headers.get(hdrs.AUTHORIZATION)) or request.query.get("token")
            if not same_token(sent, self.token):
                response = _error(
                    401, "header 'Authorization': expected 'Bearer TOKEN' (the server's --token)"
                )
                response.headers[hdrs.WWW_AUTHENTICATE] = "Bearer"
                return response
        if request.method == "POST" and request.content_type != JSON_TYPE:
            return _error(415, f"header 'Content-Type': expected {JSON_TYPE}, got {request.content_type!r}")
        return await handler(request)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[self._guard])
        app.router.add_get("/health", self._health)
        app.router.add_post("/score", self._score_one)
        app.router.add_post("/score/batch", self._score_batch)
        app.router.add_post("/get_reward", self._get_reward)
        return app

    async def _health(self, _: web.Request) -> web.Response:
        return _json(
            {"status": "ok", "judge": self.judge.name, "context": self.context, "scored": self.scored}
        )

    async def _score_one(self, request: web.Request) -> web.Response:
        return await self._answer(request, batch=False)

    async def _score_batch(self, request: web.Request) -> web.Response:
        return await self._answer(request, batch=True)

    async def _get_reward(self, request: web.Request) -> web.Response:
        return await self._answer(request, batch=True, shape="openrlhf")

    async def _answer(self, request: web.Request, *, batch: bool, shape: str = "prbj") -> web.Response:
        try:
            scale = _scale(request.query.get("scale"))
            async with asyncio.timeout(self.read_timeout):
                raw = await request.read()
            body = json.loads(raw.decode("utf-8"))
        except RequestError as err:
            return _error(400, str(err))
        except TimeoutError:
            return _error(408, f"body: not received within {self.read_timeout:g}s")
        except UnicodeDecodeError as err:
            return _error(400, f"body: not UTF-8 text (byte {err.start})")
        except json.JSONDecodeError as err:
            return _error(400, f"body: invalid JSON: {json_problem(err)}")
        except RecursionError:
            return _error(400, "body: JSON nested too deeply")
        except ValueError as err:  # Python's cap on the digits of an integer (4,300), as json.loads meets it
            return _error(400, f"body: a number JSON holds cannot be read: {str(err).split(';', 1)[0]}")
        try:
            if shape == "openrlhf":
                requests = _openrlhf_requests(body, self.context, self.max_batch)
            elif batch:
                requests = _batch_requests(body, self.context, self.max_batch)
            else:
                requests = [parse_request(body, self.context)]
        except RequestError as err:
            return _error(err.status, str(err))
        try:
            raw_scores = await self.score(requests)
        except Exception as err:  # a judge failure must reach the trainer as an error, never as a score
            detail = err.exceptions[0] if isinstance(err, ExceptionGroup) else err
            return _error(500, f"judge {self.judge.name} failed: {type(detail).__name__}: {detail}")
        scores = [scale * s for s in raw_scores]
        if not all(math.isfinite(s) for s in scores):
            worst = max(raw_scores, key=abs)
            return _error(
                400, f"query parameter 'scale': {scale:g} × a score of {worst:g} is not a finite number"
            )
        if shape == "openrlhf":
            return _json({"rewards": scores, "scores": scores})
        return _json({"scores": scores} if batch else {"score": scores[0]})


def _scale(value: str | None) -> float:
    if value is None:
        return 1.0
    try:
        scale = float(value)
    except ValueError:
        raise RequestError(f"query parameter 'scale': expected a number, got {value!r}") from None
    if not math.isfinite(scale):
        raise RequestError("query parameter 'scale': expected a finite number")
    return scale


def _openrlhf_requests(body: Any, context: Context, max_items: int = MAX_BATCH_ITEMS) -> list[ScoreRequest]:
    """OpenRLHF sends the prompt+response texts, the prompts, and one label per sample; the response is what
    follows the prompt, and the label carries the question and profile the prompt was built from."""
    if not isinstance(body, dict):
        raise RequestError("body: expected a JSON object with query, prompts and labels")
    fields = {}
    for field in ("query", "prompts", "labels"):
        value = body.get(field)
        if not isinstance(value, list):
            hint = (
                " (start OpenRLHF with --label_key naming a column of {query, profile} JSON)"
                if field == "labels"
                else ""
            )
            raise RequestError(f"field '{field}': expected a list{hint}")
        fields[field] = value
    if not len(fields["query"]) == len(fields["prompts"]) == len(fields["labels"]):
        raise RequestError("fields 'query', 'prompts' and 'labels' differ in length")
    _at_most(len(fields["query"]), "query", max_items)
    requests = []
    for index, (full, prompt, label) in enumerate(
        zip(fields["query"], fields["prompts"], fields["labels"], strict=True)
    ):
        if not isinstance(full, str) or not isinstance(prompt, str):
            raise RequestError(f"field 'query[{index}]' / 'prompts[{index}]': expected strings")
        start = full.find(prompt)
        if start < 0:
            raise RequestError(f"field 'query[{index}]': does not contain prompts[{index}]")
        if isinstance(label, str):
            try:
                label = json.loads(label)
            except (ValueError, RecursionError):  # not JSON, nested too deeply, or an integer of 5,000 digits
                raise RequestError(f"field 'labels[{index}]': expected JSON with query and profile") from None
        if not isinstance(label, dict):
            raise RequestError(f"field 'labels[{index}]': expected an object with query and profile")
        body_for_item = {**label, "response_text": full[start + len(prompt) :]}
        requests.append(parse_request(body_for_item, context, f"labels[{index}]."))
    return requests


def _batch_requests(body: Any, context: Context, max_items: int = MAX_BATCH_ITEMS) -> list[ScoreRequest]:
    items = body.get("items") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise RequestError("field 'items': expected a list of {response_text, query, profile} objects")
    _at_most(len(items), "items", max_items)
    return [parse_request(item, context, f"items[{index}].") for index, item in enumerate(items)]


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=_dumps)


def _error(status: int, message: str) -> web.Response:
    return _json({"error": message}, status=status)


async def serve(
    judge: Judge,
    *,
    host: str,
    port: int,
    concurrency: int = 16,
    on_ready: Callable[[str], None] | None = None,
    stop: asyncio.Event | None = None,
    idle_timeout: float = IDLE_TIMEOUT,
    read_timeout: float = READ_TIMEOUT,
    protocol: Protocol = "prbj",
    token: str | None = None,
    allow_hosts: Sequence[str] = (),
    max_batch: int = MAX_BATCH_ITEMS,
) -> None:
    """Serve until `stop` is set (or SIGINT/SIGTERM arrives); `on_ready` gets the base URL once bound, with the
    real port when `port` is 0. Idle connections close after `idle_timeout`; a body slower than `read_timeout`
    gets 408. Beyond loopback, or with a name allowed, a `token` is required (ConfigError without one)."""
    token = check_bind(host, token, allow_hosts)
    service = RewardService(
        judge,
        concurrency=concurrency,
        read_timeout=read_timeout,
        protocol=protocol,
        access=HostPolicy.for_bind(host, allow_hosts),
        token=token,
        max_batch=max_batch,
    )
    runner = web.AppRunner(
        service.app(), access_log=None, handle_signals=False, keepalive_timeout=idle_timeout
    )
    await runner.setup()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    handled = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, stop.set)
            handled.append(signum)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # not the main thread, or a platform without loop signal handlers
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as err:
            raise ConfigError(f"--host {host} --port {port}: cannot listen: {err.strerror or err}") from err
        bound_host, bound_port = runner.addresses[0][:2]
        if on_ready is not None:
            on_ready(f"http://{_url_host(bound_host)}:{bound_port}")
        await stop.wait()
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)
        await runner.cleanup()


def check_bind(host: str, token: str | None, allow_hosts: Sequence[str] = ()) -> str | None:
    """The token to require (stripped; refused when short), checked against the bind: a server other machines
    can reach spends the judge's budget for whoever calls it, so beyond loopback it needs one; so does a name
    given with --allow-host (the name of a reverse proxy or an alias: whoever reaches that reaches the server)."""
    token = checked_token(token, f"--token ({SERVE_TOKEN_ENV})")
    allowed = checked_allowed_hosts(allow_hosts)
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"--host {host!r} serves other machines: give a token with --token or {SERVE_TOKEN_ENV} "
            "(trainers send it as 'Authorization: Bearer TOKEN'; docs/serving.md)"
        )
    if token is None and allowed:
        raise ConfigError(
            f"--allow-host {allowed[0]}: whoever reaches that name reaches the server; give a token with --token "
            f"or {SERVE_TOKEN_ENV} (docs/serving.md)"
        )
    return token


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
