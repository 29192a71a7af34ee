"""The batch APIs of the loopback provider server: OpenAI Batch (file upload, batches, output/error files),
Anthropic Message Batches (create, retrieve, list, cancel, results stream) and Gemini batch mode (inline requests
or an uploaded JSONL file; an operation polled until done, answers inline or in a file).

Each job is answered with the server's `reply` script (and `reasoning`), line by line, when it ends. Tests
script the jobs:
- `polls_to_end`: how many status reads a job stays running for (then it ends);
- `hold`: while True no job advances (a run can be killed mid-poll);
- `fail(request) -> reason | None`: lines that error inside an otherwise good job;
- `expire_after`: a job expires with only its first N lines answered;
- `create_delay`: the create call records the job, then waits this long before answering (a kill mid-submit);
- `keys`: when set, a call whose key (`Authorization: Bearer`, as the Anthropic SDK 2.x and OpenAI send it,
  `x-api-key` or `x-goog-api-key`) is not among them answers 401 in its family's error shape;
- `refuse`: operation ("create", "poll", "results") → the HTTP status its calls answer with (403, 404, 500…).
`submitted` lists (family, custom_id) for every line any create call accepted, so tests see a request bought twice.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from loopback import ChatRequest, ProviderServer


@dataclass
class Job:
    family: str
    id: str
    lines: list[tuple[str, Any]]  # (custom_id, the request as the provider would parse it)
    meta: dict[str, Any]
    polls: int = 0
    state: str = "running"  # running | ended | cancelled | expired
    results: list[dict[str, Any]] | None = None
    created: float = field(default_factory=time.time)


@dataclass
class BatchService:
    server: ProviderServer
    polls_to_end: int = 1
    hold: bool = False
    fail: Callable[[ChatRequest], str | None] = field(default=lambda request: None)
    expire_after: int | None = None
    create_delay: float = 0.0
    keys: set[str] | None = None
    refuse: dict[str, int] = field(default_factory=dict)
    submitted: list[tuple[str, str]] = field(default_factory=list)
    jobs: dict[str, Job] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    unknown_paths: list[str] = field(default_factory=list)
    # OpenAI result files served, by file id: a client that reads a file twice pays the transfer twice.
    downloads: Counter[str] = field(default_factory=Counter)
    _ids: itertools.count = field(default_factory=itertools.count)

    def reset(self) -> None:
        self.polls_to_end, self.hold, self.expire_after, self.create_delay = 1, False, None, 0.0
        self.fail = lambda request: None
        self.keys = None
        self.refuse = {}
        self.submitted.clear()
        self.jobs.clear()
        self.files.clear()
        self.downloads.clear()

    def twice(self) -> list[str]:
        """custom_ids that some create call accepted more than once."""
        seen: set[tuple[str, str]] = set()
        return sorted({cid for item in self.submitted if item in seen or seen.add(item) for _, cid in [item]})

    # --- refusals: a bad key, a forbidden or unknown job, a server error ---------------------------------
    def refused(self, request: web.Request, family: str, operation: str) -> web.Response | None:
        """The error answer to this call, in its family's shape, when a test scripted one; None to serve it."""
        status = self.refuse.get(operation)
        if status is None and self.keys is not None and _sent_key(request) not in self.keys:
            status = 401
        if status is None:
            return None
        kind, google = _ERROR_KINDS.get(status, ("api_error", "INTERNAL"))
        message = f"loopback: {operation} refused with {status}"
        if family == "anthropic":
            return web.json_response(
                {"type": "error", "error": {"type": kind, "message": message}}, status=status
            )
        if family == "gemini":
            return web.json_response(
                {"error": {"code": status, "message": message, "status": google}}, status=status
            )
        return web.json_response({"error": {"message": message, "type": kind, "code": None}}, status=status)

    # --- shared job logic ----------------------------------------------------------------------------
    def _next(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    async def _create(
        self, family: str, prefix: str, lines: list[tuple[str, Any]], meta: dict[str, Any]
    ) -> Job:
        job = Job(family, self._next(prefix), lines, meta)
        self.jobs[job.id] = job
        self.submitted += [(family, cid) for cid, _ in lines]
        if self.create_delay:
            await asyncio.sleep(self.create_delay)
        return job

    def _advance(self, job: Job) -> None:
        if job.state != "running" or self.hold:
            return
        job.polls += 1
        if job.polls >= self.polls_to_end:
            job.state = "expired" if self.expire_after is not None else "ended"
            self._answer(job)

    def _answer(self, job: Job) -> None:
        from loopback import _answer, _parse

        job.results = []
        for index, (cid, (path, model, body)) in enumerate(job.lines):
            family = "gemini" if job.family == "gemini" else job.family
            request = _parse(family, path, model, body, {})
            if job.state == "cancelled" or (job.state == "expired" and index >= (self.expire_after or 0)):
                job.results.append({"custom_id": cid, "kind": job.state})
                continue
            reason = self.fail(request)
            if reason is not None:
                job.results.append({"custom_id": cid, "kind": "error", "reason": reason})
                continue
            try:
                reply = self.server.answer(request)  # a Reply may be cut at the cap, refused or blocked
            except Exception as err:
                job.results.append({"custom_id": cid, "kind": "error", "reason": f"script failed: {err!r}"})
                continue
            cache = self.server.prompt_cache(family, request)
            job.results.append(
                {"custom_id": cid, "kind": "ok", "body": _answer(family, request, reply, cache)}
            )

    def _counts(self, job: Job) -> tuple[int, int, int]:
        if job.results is None:
            return 0, 0, len(job.lines)
        ok = sum(1 for r in job.results if r["kind"] == "ok")
        return ok, len(job.results) - ok, len(job.lines)

    def _cancel(self, job: Job) -> None:
        if job.state == "running":
            job.state = "cancelled"
            self._answer(job)

    # --- OpenAI --------------------------------------------------------------------------------------
    async def openai_upload(self, request: web.Request) -> web.Response:
        if (refusal := self.refused(request, "openai", "create")) is not None:
            return refusal
        form = await request.post()
        upload = form["file"]
        data = upload.file.read() if hasattr(upload, "file") else bytes(upload)
        file_id = self._next("file-")
        self.files[file_id] = data
        return web.json_response(self._file(file_id, "batch"))

    def _file(self, file_id: str, purpose: str) -> dict[str, Any]:
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(self.files[file_id]),
            "created_at": int(time.time()),
            "filename": f"{file_id}.jsonl",
            "purpose": purpose,
            "status": "processed",
        }

    async def openai_create(self, request: web.Request) -> web.Response:
        if (refusal := self.refused(request, "openai", "create")) is not None:
            return refusal
        body = await request.json()
        data = self.files.get(body["input_file_id"])
        if data is None:
            return web.json_response({"error": {"message": "no such file"}}, status=404)
        lines = []
        for row in data.decode().splitlines():
            if row.strip():
                item = json.loads(row)
                lines.append((item["custom_id"], (item["url"], item["body"].get("model", ""), item["body"])))
        job = await self._create("openai", "batch_", lines, body)
        return web.json_response(self._openai_batch(job))

    def _openai_status(self, job: Job) -> str:
        return {
            "running": "in_progress",
            "ended": "completed",
            "cancelled": "cancelled",
            "expired": "expired",
        }[job.state]

    def _openai_batch(self, job: Job) -> dict[str, Any]:
        done, failed, total = self._counts(job)
        output = error = None
        if job.results is not None:
            output, error = self._openai_files(job)
        return {
            "id": job.id,
            "object": "batch",
            "endpoint": job.meta.get("endpoint"),
            "errors": None,
            "input_file_id": job.meta.get("input_file_id"),
            "completion_window": "24h",
            "status": "validating" if job.polls == 0 and job.state == "running" else self._openai_status(job),
            "output_file_id": output,
            "error_file_id": error,
            "created_at": int(job.created),
            "request_counts": {"total": total, "completed": done, "failed": failed},
            "metadata": job.meta.get("metadata"),
        }

    def _openai_files(self, job: Job) -> tuple[str | None, str | None]:
        if "files" not in job.meta:
            ok, bad = [], []
            for r in job.results or []:
                if r["kind"] == "ok":
                    response = {"status_code": 200, "request_id": "req", "body": r["body"]}
                    ok.append({"id": "r", "custom_id": r["custom_id"], "response": response, "error": None})
                elif r["kind"] == "error":
                    response = {
                        "status_code": 400,
                        "request_id": "req",
                        "body": {
                            "error": {
                                "message": r["reason"],
                                "type": "invalid_request_error",
                                "code": "invalid_request",
                            }
                        },
                    }
                    bad.append({"id": "r", "custom_id": r["custom_id"], "response": response, "error": None})
                else:
                    code = "batch_expired" if r["kind"] == "expired" else "batch_cancelled"
                    bad.append(
                        {
                            "id": "r",
                            "custom_id": r["custom_id"],
                            "response": None,
                            "error": {"code": code, "message": f"This request was {r['kind']}."},
                        }
                    )
            ids = []
            for rows in (ok, bad):
                if rows:
                    file_id = self._next("file-")
                    self.files[file_id] = "".join(json.dumps(row) + "\n" for row in rows).encode()
                    ids.append(file_id)
                else:
                    ids.append(None)
            job.meta["files"] = ids
        return job.meta["files"][0], job.meta["files"][1]

    async def openai_retrieve(self, request: web.Request) -> web.Response:
        if (refusal := self.refused(request, "openai", "poll")) is not None:
            return refusal
        job = self.jobs.get(request.match_info["id"])
        if job is None:
            return web.json_response({"error": {"message": "no such batch"}}, status=404)
        self._advance(job)
        return web.json_response(self._openai_batch(job))

    async def openai_list(self, request: web.Request) -> web.Response:
        if (refusal := self.refused(request, "openai", "poll")) is not None:
            return refusal
        data = [self._openai_batch(j) for j in reversed(self.jobs.values()) if j.family == "openai"]
        return web.json_response({"object": "list", "data": data, "has_more": False})

    async def openai_cancel(self, request: web.Request) -> web.Response:
        job = self.jobs[request.match_info["id"]]
        self._cancel(job)
        return web.json_response(self._openai_batch(job))

    async def openai_content(self, request: web.Request) -> web.Response:
        if (refusal := self.refused(request, "openai", "results")) is not None:
            return refusal
        data = self.files.get(request.match_info["id"])
        if data is None:
            return web.json_response({"error": {"message": "no such file"}}, status=404)
        self.downloads[request.match_info["id"]] += 1
        return web.Response(body=data, content_type="application/octet-stream")

    # --- Anthropic -----------------------------------------------------------------------------------
    async def anthropic_create(self, request: web.Request) -> web.Response:
        if (refusal := self.refused(request, "anthropic", "create")) is not None:
            return refusal
        body = await request.json()
        lines = [
            (r["custom_id"], ("/v1/messages", r["params"].get("model", ""), r["params"]))
            for r in body["requests"]
        ]
        job = await self._create("anthropic", "msgbatch_", lines, {})
        return web.json_response(self._anthropic_batch(job))

    def _anthropic_batch(self, job: Job) -> dict[str, Any]:
        done, _, total = self._counts(job)
        by_kind = {
            k: sum(1 for r in job.results or [] if r["kind"] == k) for k in ("error", "cancelled", "expired")
        }
        ended = job.results is not None
        return {
            "id": job.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": {
                "processing": 0 if ended else total,
                "succeeded": done,
                "errored": by_kind["error"],
                "canceled": by_kind["cancelled"],
                "expired": by_kind["expired"],
            },
            "ended_at": iso(time.time()) if ended else None,
            "created_at": iso(job.created),
            "expires_at": iso(job.created + 86400),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{self.server.url}/v1/messages/batches/{job.id}/results" if ended else None,
        }

    def _anthropic_job(self, request: web.Request) -> Job | None:
        job = self.jobs.get(request.match_info["id"])
        return job if job is not None and job.family == "anthropic" else None

    async def anthropic_retrieve(self, request: web.Request) -> web.Response:
        if (refusal := self.refused(request, "anthropic", "poll")) is not None:
            return refusal
        job = self._anthropic_job(request)
        if job is None:
            return web.json_response(
                {"type": "error", "error": {"type": "not_found_error", "message": "no such batch"}},
                status=404,
            )
        self._advance(job)
        return web.json_response(self._anthropic_batch(job))

    async def anthropic_list(self, request: web.Request) -> web.Response:
        if (refusal := self.refused(request, "anthropic", "poll")) is not None:
            return refusal
        data = [self._anthropic_batch(j) for j in reversed(self.jobs.values()) if j.family == "anthropic"]
        return web.json_response(
            {
                "data": data,
                "has_more": False,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            }
        )

    async def anthropic_cancel(self, request: web.Request) -> web.Response:
        job = self._anthropic_job(request)
        assert job is not None
        self._cancel(job)
        return web.json_response(self._anthropic_batch(job))

    async def anthropic_results(self, request: web.Request) -> web.Response:
        if (refusal := self.refused(request, "anthropic", "results")) is not None:
            return refusal
        job = self._anthropic_job(request)
        if job is None or job.results is None:
            return web.json_response(
                {"type": "error", "error": {"type": "not_found_error", "message": "not ended"}}, status=404
            )
        rows = []
        for r in job.results:
            if r["kind"] == "ok":
                result = {"type": "succeeded", "message": r["body"]}
            elif r["kind"] == "error":
                result = {
                    "type": "errored",
                    "error": {
                        "type": "error",
                        "error": {"type": "invalid_request_error", "message": r["reason"]},
                    },
                }
            else:
                result = {"type": "canceled" if r["kind"] == "cancelled" else "expired"}
            rows.append(json.dumps({"custom_id": r["custom_id"], "result": result}))
        return web.Response(body=("\n".join(rows) + "\n").encode(), content_type="application/binary")

    # --- Gemini --------------------------------------------------------------------------------------
    async def gemini_upload_start(self, request: web.Request) -> web.Response:
        if (refusal := self.refused(request, "gemini", "create")) is not None:
            return refusal
        file_id = self._next("files/upload")
        self.files[file_id] = b""
        headers = {
            "X-Goog-Upload-URL": f"{self.server.url}/upload/v1beta/files?upload_id={file_id.split('/')[1]}",
            "X-Goog-Upload-Status": "active",
        }
        if request.query.get("upload_id"):
            return await self.gemini_upload_data(request)
        return web.json_response({}, headers=headers)

    async def gemini_upload_data(self, request: web.Request) -> web.Response:
        name = "files/" + request.query["upload_id"]
        self.files[name] = self.files.get(name, b"") + await request.read()
        if "finalize" not in request.headers.get("X-Goog-Upload-Command", ""):
            return web.json_response({}, headers={"X-Goog-Upload-Status": "active"})
        file = {
            "name": name,
            "mimeType": "application/jsonl",
            "sizeBytes": str(len(self.files[name])),
            "state": "ACTIVE",
        }
        return web.json_response({"file": file}, headers={"X-Goog-Upload-Status": "final"})

    async def gemini_create(self, request: web.Request) -> web.Response:
        if (refusal := self.refused(request, "gemini", "create")) is not None:
            return refusal
        body = (await request.json())["batch"]
        model = request.match_info["model"]
        config = body.get("inputConfig") or body.get("input_config") or {}
        lines = []
        path = f"/v1beta/models/{model}:generateContent"
        if "fileName" in config or "file_name" in config:
            data = self.files[config.get("fileName") or config.get("file_name")]
            for index, row in enumerate(data.decode().splitlines()):
                if row.strip():
                    item = json.loads(row)
                    lines.append((str(item.get("key", index)), (path, model, item["request"])))
        else:
            for index, item in enumerate(config["requests"]["requests"]):
                key = str((item.get("metadata") or {}).get("key", index))
                lines.append((key, (path, model, item["request"])))
            config = {"inline": True}
        job = await self._create(
            "gemini",
            "batches/",
            lines,
            {"displayName": body.get("displayName") or body.get("display_name"), "model": model, **config},
        )
        return web.json_response(self._gemini_operation(job))

    def _gemini_state(self, job: Job) -> str:
        return (
            {
                "running": "BATCH_STATE_RUNNING",
                "ended": "BATCH_STATE_SUCCEEDED",
                "cancelled": "BATCH_STATE_CANCELLED",
                "expired": "BATCH_STATE_EXPIRED",
            }[job.state]
            if job.polls or job.state != "running"
            else "BATCH_STATE_PENDING"
        )

    def _gemini_operation(self, job: Job) -> dict[str, Any]:
        done, failed, total = self._counts(job)
        metadata: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": f"models/{job.meta['model']}",
            "displayName": job.meta.get("displayName"),
            "state": self._gemini_state(job),
            "createTime": iso(job.created),
            "batchStats": {
                "requestCount": str(total),
                "successfulRequestCount": str(done),
                "failedRequestCount": str(failed),
            },
        }
        operation: dict[str, Any] = {"name": job.id, "metadata": metadata}
        if job.results is not None:
            items = []
            for r in job.results:
                if r["kind"] == "ok":
                    items.append({"response": r["body"], "metadata": {"key": r["custom_id"]}})
                else:
                    reason = r.get("reason") or f"request {r['kind']}"
                    items.append(
                        {
                            "error": {"code": 400 if r["kind"] == "error" else 4, "message": reason},
                            "metadata": {"key": r["custom_id"]},
                        }
                    )
            if job.meta.get("inline"):
                output = {"inlinedResponses": {"inlinedResponses": items}}
            else:
                name = job.meta.get("output") or self._next("files/batch-output-")
                job.meta["output"] = name
                self.files[name] = "".join(
                    json.dumps(
                        {"key": i["metadata"]["key"], **{k: v for k, v in i.items() if k != "metadata"}}
                    )
                    + "\n"
                    for i in items
                ).encode()
                output = {"responsesFile": name}
            metadata["output"] = output
            operation["done"] = True
            operation["response"] = {
                "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
                **output,
            }
        return operation

    def _gemini_job(self, request: web.Request) -> Job | None:
        return self.jobs.get("batches/" + request.match_info["id"])

    async def gemini_get(self, request: web.Request) -> web.Response:
        if (refusal := self.refused(request, "gemini", "poll")) is not None:
            return refusal
        job = self._gemini_job(request)
        if job is None:
            return web.json_response(
                {"error": {"code": 404, "message": "no such batch", "status": "NOT_FOUND"}}, status=404
            )
        self._advance(job)
        return web.json_response(self._gemini_operation(job))

    async def gemini_list(self, request: web.Request) -> web.Response:
        if (refusal := self.refused(request, "gemini", "poll")) is not None:
            return refusal
        return web.json_response(
            {
                "operations": [
                    self._gemini_operation(j) for j in reversed(self.jobs.values()) if j.family == "gemini"
                ]
            }
        )

    async def gemini_cancel(self, request: web.Request) -> web.Response:
        job = self._gemini_job(request)
        assert job is not None
        self._cancel(job)
        return web.json_response({})

    async def gemini_download(self, request: web.Request) -> web.Response:
        if (refusal := self.refused(request, "gemini", "results")) is not None:
            return refusal
        name = "files/" + request.match_info["id"]
        return web.Response(body=self.files[name], content_type="application/octet-stream")

    async def unknown(self, request: web.Request) -> web.Response:
        self.unknown_paths.append(f"{request.method} {request.path_qs}")
        return web.json_response(
            {"error": {"message": f"loopback: no route {request.method} {request.path}"}}, status=404
        )

    # --- routes --------------------------------------------------------------------------------------
    def add_routes(self, app: web.Application) -> None:
        for prefix in ("", "/v1"):
            app.router.add_post(f"{prefix}/files", self.openai_upload)
            app.router.add_get(f"{prefix}/files/{{id}}/content", self.openai_content)
            app.router.add_post(f"{prefix}/batches", self.openai_create)
            app.router.add_get(f"{prefix}/batches", self.openai_list)
            app.router.add_get(f"{prefix}/batches/{{id}}", self.openai_retrieve)
            app.router.add_post(f"{prefix}/batches/{{id}}/cancel", self.openai_cancel)
        app.router.add_post("/v1/messages/batches", self.anthropic_create)
        app.router.add_get("/v1/messages/batches", self.anthropic_list)
        app.router.add_get("/v1/messages/batches/{id}", self.anthropic_retrieve)
        app.router.add_post("/v1/messages/batches/{id}/cancel", self.anthropic_cancel)
        app.router.add_get("/v1/messages/batches/{id}/results", self.anthropic_results)
        for prefix in ("/v1beta",):
            app.router.add_post(prefix + "/models/{model}:batchGenerateContent", self.gemini_create)
            app.router.add_get(prefix + "/batches", self.gemini_list)
            app.router.add_get(prefix + "/batches/{id}", self.gemini_get)
            app.router.add_post(prefix + "/batches/{id}:cancel", self.gemini_cancel)
            app.router.add_get(prefix + "/files/{id}:download", self.gemini_download)
            app.router.add_get("/download" + prefix + "/files/{id}:download", self.gemini_download)
        app.router.add_post("/upload/v1beta/files", self.gemini_upload_start)
        app.router.add_route("*", "/{tail:.*}", self.unknown)


# HTTP status → (Anthropic/OpenAI error type, Google status).
_ERROR_KINDS = {
    401: ("authentication_error", "UNAUTHENTICATED"),
    403: ("permission_error", "PERMISSION_DENIED"),
    404: ("not_found_error", "NOT_FOUND"),
    500: ("api_error", "INTERNAL"),
    503: ("api_error", "UNAVAILABLE"),
}


def _sent_key(request: web.Request) -> str | None:
    headers = request.headers
    bearer = headers.get("Authorization", "")
    if bearer.startswith("Bearer "):
        return bearer.removeprefix("Bearer ")
    return headers.get("x-api-key") or headers.get("x-goog-api-key") or request.query.get("key")


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")
