"""The live viewer: an aiohttp application serving the pages of a Catalog (on 127.0.0.1 unless told otherwise).

Safe by default: a request must be addressed to this machine (one of its names or addresses, a loopback name on
a loopback bind, or a name given with --allow-host), so that a page elsewhere cannot reach the viewer through a
name made to resolve here (DNS rebinding); every write (a label, a sheet's ratings) must carry the per-process
token that only this server's pages hold; on a bind beyond loopback every read needs the token too (the printed
URL carries it once, then a cookie does). The only files served are the package's own assets and the files a
run directory is made of (runs.rundir.run_file); every text is escaped by the templates. A run that cannot be
read gets a page that says why."""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import hdrs, web

from prbj.data.labels import MAX_NOTE_CHARS, Label
from prbj.errors import DataError
from prbj.runs import rundir
from prbj.view import overview, pair, sheets, table, user
from prbj.view.catalog import BuildEntry, Catalog, LoadedRun
from prbj.view.links import LiveLinks
from prbj.view.query import Query
from prbj.view.render import PAGE_CSP, compile_templates, render, static_file
from prbj.web import READ_TIMEOUT
from prbj.web.access import HostPolicy, bearer, same_token

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LINKS = LiveLinks()
LOG = logging.getLogger("prbj.view")
# Form posts are small: a label note or one sheet row's ratings.
MAX_BODY = 64 * 1024


@dataclass
class Viewer:
    catalog: Catalog
    reviewer: str
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    # The names a request may be addressed to (serve() sets them for the address it binds).
    access: HostPolicy = field(default_factory=lambda: HostPolicy.for_bind("127.0.0.1"))
    # On a bind beyond loopback reading needs the token too, not only writing.
    token_to_read: bool = False
    # A request body (a label, a sheet's ratings) must arrive within this long (408 otherwise).
    read_timeout: float = READ_TIMEOUT
    _reports: dict[tuple[str, ...], overview.ReportView] = field(default_factory=dict)
    _report_lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)

    def page(self, template: str, context: dict[str, Any], *, status: int = 200) -> web.Response:
        html = render(template, context, LINKS, reviewer=self.reviewer, token=self.token)
        return web.Response(text=html, content_type="text/html", status=status, headers=_NO_STORE)

    def problem(self, title: str, message: str, *, status: int, hint: str | None = None) -> web.Response:
        return self.page("error.html", {"title": title, "message": message, "hint": hint}, status=status)

    def report(self, runs: list[LoadedRun]) -> overview.ReportView:
        """The report's sections for these runs, computed once (bootstrap intervals take a while)."""
        keys = tuple(run.entry.key for run in runs)
        with self._report_lock:
            if keys not in self._reports:
                self._reports[keys] = overview.report_view([run.data for run in runs], LINKS, keys)
            return self._reports[keys]

    def warm(self) -> float:
        """Load every run and compute its report (on a worker thread, at start), so that pages are served from
        memory; returns the seconds it took. A run that cannot be read is left to its own page."""
        started = time.perf_counter()
        compile_templates()
        for key in self.catalog.runs:
            if self.stopping.is_set():
                break
            try:
                self.report([self.catalog.load(key)])
            except DataError:
                continue
        return time.perf_counter() - started


_NO_STORE = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
# The pages' own policy, and no framing (which only a header can forbid).
_CSP = f"{PAGE_CSP}; frame-ancestors 'none'"


def _viewer(request: web.Request) -> Viewer:
    viewer: Viewer = request.app[VIEWER]
    return viewer


VIEWER = web.AppKey("viewer", Viewer)


def _local(request: web.Request) -> tuple[str | None, int | None]:
    """The address and port the connection reached (which of this machine's addresses, on a wildcard bind)."""
    sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
    if isinstance(sockname, tuple) and len(sockname) >= 2:
        return str(sockname[0]), int(sockname[1])
    return None, None


def cookie_name(port: int | None) -> str:
    # Cookies ignore ports: two viewers on one machine each keep their own.
    return f"prbj_view_{port or 0}"


def _read_access(request: web.Request, viewer: Viewer, port: int | None) -> web.StreamResponse | None:
    """None when the request carries the viewer's token (cookie, header, or the printed URL's ?token=, which
    becomes the cookie and leaves the address bar); else the response that refuses it."""
    name = cookie_name(port)
    if same_token(request.query.get("token"), viewer.token):
        if request.method not in ("GET", "HEAD"):
            return None
        response = web.Response(
            status=303, headers={hdrs.LOCATION: str(request.rel_url.without_query_params("token"))}
        )
        response.set_cookie(name, viewer.token, httponly=True, samesite="Strict", path="/")
        return response
    sent = (
        request.cookies.get(name)
        or request.headers.get("X-Prbj-Token")
        or bearer(request.headers.get(hdrs.AUTHORIZATION))
    )
    if same_token(sent, viewer.token):
        return None
    return viewer.problem(
        "Token needed",
        "This viewer serves other machines, so every page needs its token: open the address prbj view "
        "printed (it ends in ?token=...).",
        status=403,
    )


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Host check, token checks (writes; reads too beyond loopback), security headers; a failure inside a page
    is a page, not a trace."""
    viewer = _viewer(request)
    address, port = _local(request)
    if not viewer.access.allows(request.headers.get(hdrs.HOST), address):
        return web.Response(
            status=421,
            text="unknown host: open the address prbj view printed (or name this host with --allow-host)\n",
        )
    if viewer.token_to_read:
        refused = _read_access(request, viewer, port)
        if refused is not None:
            refused.headers.setdefault("Content-Security-Policy", _CSP)
            return refused
    if request.method not in ("GET", "HEAD"):
        try:
            async with asyncio.timeout(viewer.read_timeout):
                form = await request.post()  # kept by aiohttp: the handler's post() reads no more
        except TimeoutError:
            return viewer.problem(
                "Not saved", f"the form did not arrive within {viewer.read_timeout:g}s", status=408
            )
        sent = str(form.get("token") or request.headers.get("X-Prbj-Token") or "")
        if not same_token(sent, viewer.token):
            return viewer.problem(
                "Not saved",
                "This write did not carry the viewer's token: reload the page and try again.",
                status=403,
            )
    try:
        response = await handler(request)
    except web.HTTPException:
        raise
    except DataError as err:
        response = viewer.problem("Cannot read this", str(err), status=422)
    except Exception as err:  # a bug in a page: the reader gets a page, the console the traceback
        LOG.exception("prbj view: %s %s failed", request.method, request.path)
        response = viewer.problem("This page failed", f"{type(err).__name__}: {err}", status=500)
    response.headers.setdefault("Content-Security-Policy", _CSP)
    return response


async def _loaded(request: web.Request) -> LoadedRun | web.Response:
    viewer = _viewer(request)
    key = request.match_info["key"]
    if key not in viewer.catalog.runs:
        return viewer.problem("No such run", f"the viewer was not given a run {key!r}", status=404)
    try:
        # Reading a big run takes a while: off the event loop, so other pages keep being served.
        return await asyncio.to_thread(viewer.catalog.load, key)
    except DataError as err:
        return viewer.problem(
            "This run cannot be read",
            str(err),
            status=422,
            hint="A run directory holds summary.json, run.json and judgments.parquet as prbj judge writes them.",
        )


async def runs_page(request: web.Request) -> web.StreamResponse:
    viewer = _viewer(request)
    return viewer.page("runs.html", overview.runs_page(viewer.catalog, LINKS))


async def run_page(request: web.Request) -> web.StreamResponse:
    run = await _loaded(request)
    if isinstance(run, web.Response):
        return run
    return _viewer(request).page(
        "report.html", overview.report_page([run.entry], _viewer(request).report([run]))
    )


async def compare_page(request: web.Request) -> web.StreamResponse:
    viewer = _viewer(request)
    keys = list(dict.fromkeys(request.query.getall("run", [])))
    unknown = [k for k in keys if k not in viewer.catalog.runs]
    if len(keys) < 2 or unknown:
        return viewer.problem(
            "Pick two runs or more", "Tick at least two runs on the Runs page to compare them.", status=400
        )
    runs = [await asyncio.to_thread(viewer.catalog.load, key) for key in keys]
    report = await asyncio.to_thread(viewer.report, runs)
    return viewer.page("report.html", overview.report_page([run.entry for run in runs], report))


def _query(request: web.Request) -> Query:
    return Query.from_params({name: request.query.getall(name) for name in request.query})


async def judgments_page(request: web.Request) -> web.StreamResponse:
    run = await _loaded(request)
    if isinstance(run, web.Response):
        return run
    viewer = _viewer(request)
    context = table.judgments_page(viewer.catalog, run, _query(request), LINKS)
    return viewer.page("judgments.html", {**context, "blank": Query()})


async def export(request: web.Request) -> web.StreamResponse:
    run = await _loaded(request)
    if isinstance(run, web.Response):
        return run
    kind = request.match_info["kind"]
    body = table.export(_viewer(request).catalog, run, _query(request), kind)
    name = f"{run.entry.key}-judgments.{kind}"
    return web.Response(
        body=body,
        content_type="text/csv" if kind == "csv" else "application/x-ndjson",
        headers={**_NO_STORE, "Content-Disposition": f'attachment; filename="{name}"'},
    )


async def pair_page(request: web.Request) -> web.StreamResponse:
    run = await _loaded(request)
    if isinstance(run, web.Response):
        return run
    viewer = _viewer(request)
    pair_id = _pair_id(request)
    context = pair.pair_page(
        viewer.catalog,
        run,
        pair_id,
        _query(request),
        LINKS,
        labels=rundir.read_labels(run.entry.path),
        blind=request.query.get("blind") == "1",
    )
    if context is None:
        return viewer.problem(
            "No such pair", f"{run.entry.run_id} has no judgment of pair {pair_id!r}", status=404
        )
    return viewer.page("pair.html", {**context, "saved": request.query.get("saved") == "1"})


async def user_page(request: web.Request) -> web.StreamResponse:
    run = await _loaded(request)
    if isinstance(run, web.Response):
        return run
    viewer = _viewer(request)
    user_id = request.match_info.get("user_id") or request.query.get("id", "")
    context = user.user_page(run, user_id, LINKS)
    if context is None:
        return viewer.problem(
            "No such user", f"{run.entry.run_id} has no judgment of user {user_id!r}", status=404
        )
    return viewer.page("user.html", context)


_SLOTS = {"A": 0, "B": 1}


def _pair_id(request: web.Request) -> str:
    """From the path, or from the query for the ids a path cannot hold ("." and "..", see links.DOT_SEGMENTS)."""
    return request.match_info.get("pair_id") or request.query.get("id", "")


async def save_label(request: web.Request) -> web.StreamResponse:
    run = await _loaded(request)
    if isinstance(run, web.Response):
        return run
    viewer = _viewer(request)
    pair_id = _pair_id(request)
    if run.data.judgments.filter(run.data.judgments["pair_id"] == pair_id).height == 0:
        return viewer.problem("No such pair", f"{run.entry.run_id} has no pair {pair_id!r}", status=404)
    form = await request.post()
    picked, shown_as_a = str(form.get("preference", "")), str(form.get("shown_as_a", ""))
    if picked not in ("A", "B", "cant_tell") or shown_as_a not in ("chosen", "rejected"):
        return viewer.problem("Not saved", "pick A, B or can't tell", status=400)
    other = "rejected" if shown_as_a == "chosen" else "chosen"
    preference = "cant_tell" if picked == "cant_tell" else (shown_as_a, other)[_SLOTS[picked]]
    label = Label(
        pair_id=pair_id,
        preference=preference,  # type: ignore[arg-type]  # one of the three Preference values, checked above
        reviewer=viewer.reviewer,
        time=datetime.now(UTC).isoformat(timespec="seconds"),
        note=str(form.get("note", "")).strip()[:MAX_NOTE_CHARS],
        shown_as_a=shown_as_a,
        run_id=run.entry.run_id,
    )
    try:
        rundir.append_label(run.entry.path, label)
    except DataError as err:
        return viewer.problem("Not saved", str(err), status=400)
    params = [*_query(request).params(), ("saved", "1")]
    raise web.HTTPSeeOther(LINKS.pair_address(run.entry.key, pair_id, params))


async def run_file(request: web.Request) -> web.StreamResponse:
    viewer = _viewer(request)
    entry = viewer.catalog.runs.get(request.match_info["key"])
    found = rundir.run_file(entry.path, request.match_info["path"]) if entry is not None else None
    if found is None:
        return viewer.problem("Not found", "no such file in this run directory", status=404)
    kind = mimetypes.guess_type(found.name)[0] or "application/octet-stream"
    return web.Response(body=found.read_bytes(), content_type=kind, headers=_NO_STORE)


async def static(request: web.Request) -> web.StreamResponse:
    body = static_file(request.match_info["name"])
    if body is None:
        raise web.HTTPNotFound()
    kind = "text/css" if request.match_info["name"].endswith(".css") else "text/javascript"
    return web.Response(body=body, content_type=kind)


def _build(request: web.Request) -> BuildEntry | None:
    return _viewer(request).catalog.builds.get(request.match_info["key"])


async def build_page(request: web.Request) -> web.StreamResponse:
    viewer = _viewer(request)
    build = _build(request)
    if build is None:
        return viewer.problem("No such folder", "the viewer was not given this build folder", status=404)
    return viewer.page("build.html", sheets.build_page(build, LINKS))


def _item(request: web.Request) -> int:
    text = request.match_info["item"]
    return int(text) if text.isdigit() and len(text) < 7 else 0


async def sheet_item(request: web.Request) -> web.StreamResponse:
    viewer = _viewer(request)
    build = _build(request)
    context = sheets.item_page(build, request.match_info["sheet"], _item(request), LINKS) if build else None
    if context is None:
        return viewer.problem("No such item", "this sheet has no such item", status=404)
    return viewer.page("sheet_item.html", {**context, "saved": request.query.get("saved") == "1"})


async def save_sheet_item(request: web.Request) -> web.StreamResponse:
    viewer = _viewer(request)
    build = _build(request)
    name, item = request.match_info["sheet"], _item(request)
    if build is None or sheets.item_page(build, name, item, LINKS) is None:
        return viewer.problem("No such item", "this sheet has no such item", status=404)
    form = await request.post()
    try:
        sheets.save_item(build, name, item, {k: str(v) for k, v in form.items()})
    except DataError as err:
        context = sheets.item_page(build, name, item, LINKS) or {}
        return viewer.page("sheet_item.html", {**context, "problem": str(err)}, status=400)
    raise web.HTTPSeeOther(f"{LINKS.sheet(build.key, name, item)}?saved=1")


def make_app(viewer: Viewer) -> web.Application:
    app = web.Application(middlewares=[guard], client_max_size=MAX_BODY)
    app[VIEWER] = viewer
    app.router.add_get("/", runs_page)
    app.router.add_get("/compare", compare_page)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/run/{key}", run_page)
    app.router.add_get("/run/{key}/judgments", judgments_page)
    app.router.add_get(r"/run/{key}/export.{kind:jsonl|csv}", export)
    # A pair id may hold any character but "/" (braces too); "." and ".." come as /pair?id=.
    app.router.add_get("/run/{key}/pair", pair_page)
    app.router.add_post("/run/{key}/pair", save_label)
    app.router.add_get("/run/{key}/pair/{pair_id:[^/]+}", pair_page)
    app.router.add_post("/run/{key}/pair/{pair_id:[^/]+}/label", save_label)
    # A user id likewise ("." and ".." as /user?id=).
    app.router.add_get("/run/{key}/user", user_page)
    app.router.add_get("/run/{key}/user/{user_id:[^/]+}", user_page)
    app.router.add_get("/run/{key}/files/{path:.+}", run_file)
    app.router.add_get("/build/{key}", build_page)
    app.router.add_get(r"/build/{key}/sheet/{sheet}/{item}", sheet_item)
    app.router.add_post(r"/build/{key}/sheet/{sheet}/{item}", save_sheet_item)
    return app
