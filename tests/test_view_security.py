"""The viewer at its edges (issue 31): the Host check at every bind address (DNS rebinding), the token that
reading needs beyond loopback, only a run's own files served, labels the reader always takes back, ids that a
path cannot hold or that reorder a line, and a bundle that never writes outside itself. Requests go over real
sockets, byte for byte as written."""

from __future__ import annotations

import asyncio
import html
import io
import json
import re
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import polars as pl
import pytest
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner
from rich.console import Console

from prbj.cli import main
from prbj.data.labels import Label
from prbj.errors import DataError
from prbj.runs import rundir
from prbj.view import command
from prbj.view.bundle import write_bundle
from prbj.view.catalog import Catalog
from prbj.view.links import LiveLinks, file_slug
from prbj.view.server import Viewer, make_app
from run_dirs import judgment, write_run_dir

EVIL = "rebind.evil.example"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: str


def _raw(address: str, port: int, request: str, body: bytes = b"") -> Answer:
    """One request sent as written (no client rewrites Host or normalises the path)."""
    with socket.create_connection((address, port), timeout=10) as sock:
        sock.sendall(request.encode() + b"\r\n" + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), value.strip())
    return Answer(int(lines[0].split()[1]), headers, rest.decode("utf-8", "replace"))


def _get(address: str, port: int, path: str, host: str, extra: str = "") -> Answer:
    return _raw(address, port, f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n")


def _post_label(address: str, port: int, path: str, host: str, token: str, extra: str = "") -> Answer:
    form = f"token={token}&preference=A&shown_as_a=chosen&note=n".encode()
    return _raw(
        address,
        port,
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {len(form)}\r\n{extra}Connection: close\r\n",
        form,
    )


def _small_run(folder: Path, pair_ids: list[str], name: str = "run-a") -> Path:
    rows = [
        judgment(pair_id, "Lifestyle_and_Personal_Development", "length", correct=i % 2 == 0)
        for i, pair_id in enumerate(pair_ids)
    ]
    return write_run_dir(folder / name, rows)


@asynccontextmanager
async def _served(paths: list[Path], host: str, **options: object) -> AsyncIterator[tuple[int, str, str]]:
    """`prbj view`'s own serve() on `host` (any free port): (port, the URL it printed, what it printed)."""
    viewer = Viewer(Catalog.open(paths), "alice")
    out = io.StringIO()
    console = Console(file=out, width=400, highlight=False)
    task = asyncio.create_task(command.serve(viewer, host, 0, open_browser=False, console=console, **options))
    try:
        for _ in range(600):
            found = re.search(r"prbj view: (\S+)", out.getvalue())
            if found or task.done():
                break
            await asyncio.sleep(0.05)
        if task.done():
            task.result()
        assert found, out.getvalue()
        url = found.group(1)
        port = urlsplit(url).port
        assert port is not None
        yield port, url, out.getvalue()
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def _token(url: str) -> str:
    found = re.search(r"[?&]token=([^&\s]+)", url)
    return found.group(1) if found else ""


@pytest.mark.parametrize("bind", ["127.0.0.1", "127.0.0.2", "0.0.0.0"])
async def test_a_rebinding_host_is_refused_at_every_bind(tmp_path: Path, bind: str) -> None:
    run = _small_run(tmp_path, ["p-1", "p-2"])
    address = "127.0.0.1" if bind == "0.0.0.0" else bind
    async with _served([run], bind) as (port, url, printed):
        token = _token(url)
        pair = f"/run/{run.name}/pair/p-1"
        for path in ("/", f"/run/{run.name}", pair, f"/run/{run.name}/export.csv", "/static/viewer.js"):
            for extra in ("", f"X-Prbj-Token: {token}\r\n"):
                answer = await asyncio.to_thread(
                    _get, address, port, path + (f"?token={token}" if token else ""), f"{EVIL}:{port}", extra
                )
                assert answer.status in (403, 421), (path, answer.status)
                assert not token or token not in answer.body
        written = await asyncio.to_thread(
            _post_label, address, port, pair + "/label", f"{EVIL}:{port}", token
        )
        assert written.status in (403, 421)
        assert not (run / rundir.LABELS_FILE).exists()
        # The address served is answered (with the token, beyond loopback).
        own = await asyncio.to_thread(_get, address, port, pair, f"{address}:{port}")
        if bind == "0.0.0.0":
            assert own.status == 403 and "token" in own.body
            assert "read every run" in printed and "write labels" in printed and "--allow-host" in printed
        else:
            assert own.status == 200 and "Pair" in own.body
            assert token == "" and "warning" not in printed


async def test_beyond_loopback_the_printed_url_carries_the_token_then_a_cookie(tmp_path: Path) -> None:
    run = _small_run(tmp_path, ["p-1", "p-2"])
    async with _served([run], "0.0.0.0") as (port, url, _):
        token = _token(url)
        assert len(token) >= 32 and urlsplit(url).hostname == socket.gethostname()
        host = f"localhost:{port}"
        refused = await asyncio.to_thread(_get, "127.0.0.1", port, f"/run/{run.name}", host)
        guessed = await asyncio.to_thread(_get, "127.0.0.1", port, f"/run/{run.name}?token=guess", host)
        assert refused.status == guessed.status == 403 and token not in refused.body + guessed.body
        # The printed URL's token becomes a cookie and leaves the address bar.
        opened = await asyncio.to_thread(
            _get, "127.0.0.1", port, f"/run/{run.name}/judgments?outcome=wrong&token={token}", host
        )
        assert opened.status == 303
        assert opened.headers["location"] == f"/run/{run.name}/judgments?outcome=wrong"
        cookie = opened.headers["set-cookie"].split(";")[0]
        assert cookie.endswith(token) and "httponly" in opened.headers["set-cookie"].lower()
        page = await asyncio.to_thread(
            _get, "127.0.0.1", port, f"/run/{run.name}/judgments?outcome=wrong", host, f"Cookie: {cookie}\r\n"
        )
        assert page.status == 200 and "p-2" in page.body
        # This machine's own name and addresses are accepted; another name only when --allow-host gives it.
        named = await asyncio.to_thread(
            _get, "127.0.0.1", port, "/", f"{socket.gethostname()}:{port}", f"Cookie: {cookie}\r\n"
        )
        assert named.status == 200
        other = await asyncio.to_thread(
            _get, "127.0.0.1", port, "/", f"viewer.example:{port}", f"Cookie: {cookie}\r\n"
        )
        assert other.status == 421
    # A name allowed is whatever reaches it (a reverse proxy): on loopback too, reading needs the token.
    async with _served([run], "127.0.0.2", allow_hosts=["viewer.example"]) as (port, url, _):
        without = await asyncio.to_thread(_get, "127.0.0.2", port, "/", f"viewer.example:{port}")
        assert without.status == 403
        token = f"X-Prbj-Token: {_token(url)}\r\n"
        allowed = await asyncio.to_thread(_get, "127.0.0.2", port, "/", f"viewer.example:{port}", token)
        assert allowed.status == 200
        assert (await asyncio.to_thread(_get, "127.0.0.2", port, "/", f"{EVIL}:{port}", token)).status == 421


async def _client(paths: list[Path], reviewer: str = "alice") -> TestClient:
    client = TestClient(TestServer(make_app(Viewer(Catalog.open(paths), reviewer, token="t"))))
    await client.start_server()
    return client


async def test_only_the_files_a_run_is_made_of_are_served(tmp_path: Path) -> None:
    """`prbj view ~` must not hand out ~/.ssh/id_rsa or ~/.env, nor a run directory anything but its files."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY", encoding="utf-8")
    (home / ".env").write_text("API_KEY=SECRET", encoding="utf-8")
    run = _small_run(home / "work", ["p-1"])
    (run / ".env").write_text("SECRET", encoding="utf-8")
    (run / "notes.txt").write_text("SECRET", encoding="utf-8")
    (run / "plots").mkdir()
    (run / "plots" / "accuracy.svg").write_text("<svg>chart</svg>", encoding="utf-8")
    (run / "report.html").write_text("<p>report</p>", encoding="utf-8")
    client = await _client([home, run])
    try:
        refused = [
            "/run/home/files/.ssh/id_rsa",
            "/run/home/files/.env",
            f"/run/{run.name}/files/.env",
            f"/run/{run.name}/files/notes.txt",
            f"/run/{run.name}/files/plots/../.env",
        ]
        for path in refused:
            answer = await client.get(path)
            assert answer.status == 404, path
            assert "SECRET" not in await answer.text() and "PRIVATE" not in await answer.text()
        for name, text in (
            ("summary.json", "results"),
            ("report.html", "report"),
            ("plots/accuracy.svg", "chart"),
        ):
            answer = await client.get(f"/run/{run.name}/files/{name}")
            assert answer.status == 200 and text in await answer.text(), name
    finally:
        await client.close()


def _judged(tmp_path: Path, ids: list[str]) -> Path:
    """A real `prbj judge -p length` run on a dataset with these pair ids."""
    from conftest import SUBSET_NAMES, make_record, write_jsonl

    records = [make_record(i + 1, SUBSET_NAMES[i % 3], id=pair_id) for i, pair_id in enumerate(ids)]
    dataset = write_jsonl(tmp_path / "pairs.jsonl", records)
    out = tmp_path / "reports"
    args = ["judge", "--no-progress", "-p", "length", "--dataset", str(dataset), "--out", str(out)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (run,) = out.iterdir()
    return run


async def test_a_label_on_any_pair_id_judge_takes_keeps_the_run_readable(tmp_path: Path) -> None:
    long_id = "q" * 250
    run = await asyncio.to_thread(_judged, tmp_path, [long_id, "short"])
    links = LiveLinks()
    client = await _client([run])
    try:
        form = {"token": "t", "preference": "A", "shown_as_a": "chosen"}
        saved = await client.post(links.label(run.name, long_id) or "", data=form, allow_redirects=False)
        assert saved.status == 303
        page = await client.get(links.pair(run.name, long_id))
        assert page.status == 200 and "alice" in await page.text()
        export = await client.get(f"/run/{run.name}/export.csv")
        assert export.status == 200
        table = pl.read_csv(io.BytesIO(await export.read()))
        assert table.filter(pl.col("pair_id") == long_id)["human_label"].to_list() == ["chosen"]
    finally:
        await client.close()
    (label,) = rundir.read_labels(run)
    assert label.pair_id == long_id


async def test_a_reviewer_name_the_reader_refuses_is_never_written(tmp_path: Path) -> None:
    run = _small_run(tmp_path, ["p-1"])
    for name in ("r" * 201, "   "):
        with pytest.raises(DataError, match="field 'reviewer'"):
            rundir.append_label(run, Label("p-1", "chosen", name, "2026-01-01T00:00:00+00:00"))
        assert not (run / rundir.LABELS_FILE).exists()
        result = CliRunner().invoke(
            main, ["view", str(run), "--reviewer", name, "--bundle", str(tmp_path / "site")]
        )
        assert result.exit_code == 2 and "--reviewer" in result.output and "error:" in result.output
    client = await _client([run], reviewer="r" * 201)
    try:
        form = {"token": "t", "preference": "A", "shown_as_a": "chosen"}
        refused = await client.post(f"/run/{run.name}/pair/p-1/label", data=form, allow_redirects=False)
        assert refused.status == 400 and "reviewer" in await refused.text()
        assert (await client.get(f"/run/{run.name}/pair/p-1")).status == 200
        assert (await client.get(f"/run/{run.name}/export.csv")).status == 200
    finally:
        await client.close()
    assert not (run / rundir.LABELS_FILE).exists()


@pytest.mark.parametrize("pair_id", ["a{b}", "{x}", "..", ".", "a/b", "a/../../x"])
async def test_every_pair_id_has_its_own_page_and_label(tmp_path: Path, pair_id: str) -> None:
    run = _small_run(tmp_path, [pair_id, "p-2"])
    links = LiveLinks()
    client = await _client([run])
    try:
        table = await (await client.get(f"/run/{run.name}/judgments")).text()
        href = links.pair(run.name, pair_id, None)
        assert f'href="{href.replace("&", "&amp;")}"' in table
        page = await client.get(href)
        text = await page.text()
        assert page.status == 200 and re.search(r"<h1>Pair <bdi>([^<]*)</bdi>", text).group(
            1
        ) == pair_id.replace("&", "&amp;")
        form = {"token": "t", "preference": "B", "shown_as_a": "chosen"}
        saved = await client.post(links.label(run.name, pair_id) or "", data=form, allow_redirects=False)
        assert saved.status == 303 and saved.headers["Location"] == links.pair(
            run.name, pair_id, None, saved="1"
        )
    finally:
        await client.close()
    (label,) = rundir.read_labels(run)
    assert (label.pair_id, label.preference) == (pair_id, "rejected")


async def test_ids_that_reorder_text_or_hide_are_isolated_and_shown(tmp_path: Path) -> None:
    override, hidden, hebrew = "ab\u202ecd", "z\u200bw", "\u05e9\u05dc\u05d5\u05dd-1"
    run = _small_run(tmp_path, [override, hidden, hebrew])
    client = await _client([run])
    try:
        pages = [await (await client.get(f"/run/{run.name}/judgments")).text()]
        for pair_id in (override, hidden, hebrew):
            answer = await client.get(LiveLinks().pair(run.name, pair_id))
            assert answer.status == 200
            pages.append(await answer.text())
    finally:
        await client.close()
    table, over_page, hidden_page, hebrew_page = pages
    for text in pages:
        shown = re.sub(r"<[^>]*>", "", text)  # what a reader sees (attributes hold the id as data)
        assert "\u202e" not in shown and "\u200b" not in shown
    assert "<bdi>ab<span" in over_page and "U+202E</span>cd</bdi>" in over_page
    assert "<title>ab[U+202E]cd" in over_page and "U+200B" in hidden_page
    assert f"<h1>Pair <bdi>{hebrew}</bdi>" in hebrew_page
    assert table.count("<bdi>") >= 3 and "U+202E" in table and "U+200B" in table


def test_the_static_bundle_never_writes_outside_itself_and_carries_a_csp(tmp_path: Path) -> None:
    escaping = ["a/../../../../escape", "../x", "..", "ok-1"]
    run = _small_run(tmp_path / "runs", escaping)
    site = tmp_path / "site"
    before = {p for p in tmp_path.rglob("*")}
    write_bundle(Catalog.open([run]), site)
    outside = {p for p in tmp_path.rglob("*") if not p.is_relative_to(site)} - before
    assert not outside, outside
    pair_pages = {p.name for p in (site / "run" / run.name / "pair").iterdir()}
    assert pair_pages == {f"{file_slug(pair_id)}.html" for pair_id in escaping}
    assert all(
        "/" not in file_slug(pair_id) and file_slug(pair_id) not in (".", "..") for pair_id in escaping
    )
    assert file_slug("ok-1") == "ok-1"
    pages = list(site.rglob("*.html"))
    for page in pages:
        text = page.read_text(encoding="utf-8")
        meta = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', text)
        assert meta, page
        policy = html.unescape(meta.group(1))
        assert "default-src 'none'" in policy and "script-src 'self'" in policy
        assert not re.search(r"<script>(?!</script>)", text) and "<script src=" in text
    assert json.loads((run / "run.json").read_text(encoding="utf-8"))["run_id"] == run.name
