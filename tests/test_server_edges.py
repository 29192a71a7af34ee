"""Issue 44 items 3, 4 and 10: the edges of `prbj serve` and `prbj view` a review found open.

A name allowed with --allow-host is whatever reaches that name (a reverse proxy): it needs the token as a bind
beyond loopback does, and its values are names, never `*` or `name:port`. A token is at least 16 characters after
stripping. A JSON integer too long to read, and a batch too large to hold, are answered in JSON (400, 413) with
the cap. The viewer, like `prbj serve`, closes a connection whose request does not arrive in time. Which binds
are loopback, and that tokens are compared in constant time (through hmac.compare_digest), are checked apart."""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from click.testing import CliRunner
from rich.console import Console
from view_runs import sample_run

from prbj.cli import main
from prbj.errors import ConfigError
from prbj.judges.baselines import LengthJudge
from prbj.serve import server as reward_server
from prbj.view.catalog import Catalog
from prbj.view.command import serve as serve_viewer
from prbj.view.server import Viewer
from prbj.web.access import (
    MIN_TOKEN_CHARS,
    checked_allowed_hosts,
    checked_token,
    is_loopback,
    same_token,
)

TOKEN = "a-token-long-enough-to-guess-never"
ITEM = {"response_text": "Try a used rangefinder.", "query": "Which camera?", "profile": ["I shoot film."]}


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


# --- which binds are loopback (item 10) ----------------------------------------------------------------------


@pytest.mark.parametrize("host", ["", " ", "host", "local", "localhos", "calhost", "0.0.0.0", "::", "lo"])
def test_only_loopback_names_and_addresses_are_loopback(host: str) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST", "localhost.", "127.0.0.1", "127.9.8.7", "::1", "[::1]"]
)
def test_loopback_names_and_addresses_are(host: str) -> None:
    assert is_loopback(host)


def test_an_empty_host_binds_every_address_so_serving_needs_a_token() -> None:
    with pytest.raises(ConfigError, match="serves other machines"):
        reward_server.check_bind("", None)


def test_tokens_are_compared_by_hmac_compare_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    """An `==` would leak, by its timing, how much of a guess is right. The comparison must be the library's
    constant-time one: same_token hands both values to hmac.compare_digest and returns its verdict."""
    calls: list[tuple[bytes, bytes]] = []

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return False  # a verdict of its own: same_token must return it, not decide itself

    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert not same_token(TOKEN, TOKEN)
    assert calls == [(TOKEN.encode(), TOKEN.encode())]


# --- --allow-host and the token (items 3 and 4) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("*", "wildcard"),
        ("*.example.org", "wildcard"),
        ("reward.default.svc:8000", "port"),
        ("[::1]:8000", "port"),
        ("localhost:80", "port"),
        ("", "not a host name"),
        ("a b", "not a host name"),
        ("http://proxy.example.org", "port"),
        ("proxy/x", "not a host name"),
        ("-bad.example", "not a host name"),
    ],
)
def test_allow_host_values_are_names_without_port_or_wildcard(value: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as refused:
        checked_allowed_hosts([value])
    assert "\n" not in str(refused.value) and repr(value) in str(refused.value)
    for command in (["serve", "-p", "length", "--token", TOKEN], ["view"]):
        result = CliRunner().invoke(main, [*command, "--allow-host", value, "--port", "0"])
        assert result.exit_code == 2, result.output
        (line,) = error_lines(result.output)
        assert line.startswith("error: --allow-host") and problem in line


def test_allow_host_takes_names_and_addresses() -> None:
    names = ["reward.default.svc", "proxy.example.org.", "rm_1.cluster.local", "10.0.0.7", "[::1]", "fe80::1"]
    assert checked_allowed_hosts(names) == (*names[:4], "::1", "fe80::1")


def test_a_name_allowed_on_loopback_needs_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PRBJ_SERVE_TOKEN", raising=False)
    with pytest.raises(ConfigError, match=r"--allow-host reward\.example\.org"):
        reward_server.check_bind("127.0.0.1", None, ["reward.example.org"])
    result = CliRunner().invoke(
        main, ["serve", "-p", "length", "--allow-host", "reward.example.org", "--port", "0"]
    )
    assert result.exit_code == 2
    (line,) = error_lines(result.output)
    assert "--allow-host reward.example.org" in line and "token" in line
    assert reward_server.check_bind("127.0.0.1", TOKEN, ["reward.example.org"]) == TOKEN


@pytest.mark.parametrize(
    "token", [" ", "", "\n", "short-token", "x" * (MIN_TOKEN_CHARS - 1), "  " + "y" * 15 + " "]
)
def test_a_blank_or_short_token_is_refused(token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=f"at least {MIN_TOKEN_CHARS}"):
        checked_token(token)
    monkeypatch.delenv("PRBJ_SERVE_TOKEN", raising=False)
    result = CliRunner().invoke(main, ["serve", "-p", "length", "--token", token, "--port", "0"])
    assert result.exit_code == 2
    (line,) = error_lines(result.output)
    assert line.startswith("error: --token") and "at least 16" in line
    monkeypatch.setenv("PRBJ_SERVE_TOKEN", token)
    result = CliRunner().invoke(main, ["serve", "-p", "length", "--host", "0.0.0.0", "--port", "0"])
    # An empty variable is no token at all (click reads it so): refused for the bind instead.
    assert result.exit_code == 2 and ("at least 16" in result.output or not token)


@pytest.fixture
async def start() -> AsyncIterator[Callable[..., Any]]:
    """Starts `prbj serve`'s server with the length judge (any options); gives its URL."""
    stops: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def started(**options: Any) -> str:
        stop = asyncio.Event()
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            reward_server.serve(
                LengthJudge(), host="127.0.0.1", port=0, on_ready=ready.set_result, stop=stop, **options
            )
        )
        await asyncio.wait({ready, task}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
        stops.append((stop, task))
        return ready.result()

    yield started
    for stop, task in stops:
        stop.set()
        await task


async def _post(url: str, data: bytes | str, **headers: str) -> tuple[int, str, Any]:
    headers = {"Content-Type": "application/json", **headers}
    async with aiohttp.ClientSession() as session, session.post(url, data=data, headers=headers) as response:
        return response.status, response.content_type, await response.json(content_type=None)


async def test_a_token_with_spaces_around_it_is_the_token_without(start: Callable[..., Any]) -> None:
    url = await start(token=f"  {TOKEN}\n")
    status, _, _ = await _post(url + "/score", json.dumps(ITEM), Authorization=f"Bearer {TOKEN}")
    assert status == 200
    status, _, _ = await _post(url + "/score", json.dumps(ITEM), Authorization="Bearer  ")
    assert status == 401


async def test_a_number_too_long_to_read_is_a_400_in_json(start: Callable[..., Any]) -> None:
    url = await start()
    huge = "9" * 5000
    for path, body in (
        ("/score", f'{{"response_text": "a", "query": "q", "pair_id": {huge}}}'),
        ("/score/batch", f'{{"items": [{huge}]}}'),
        ("/get_reward", json.dumps({"query": ["pa"], "prompts": ["p"], "labels": [f'{{"query": {huge}}}']})),
    ):
        status, kind, answer = await _post(url + path, body)
        assert (status, kind) == (400, "application/json"), (path, answer)
        assert "error" in answer and len(answer["error"]) < 300


async def test_a_batch_over_the_cap_is_a_413_saying_the_cap(start: Callable[..., Any]) -> None:
    url = await start(max_batch=3)
    status, kind, answer = await _post(url + "/score/batch", json.dumps({"items": [ITEM] * 4}))
    assert (status, kind) == (413, "application/json")
    assert answer["error"] == "field 'items': 4 items; at most 3 per request (send the rest in another)"
    rlhf = {
        "query": ["p" + ITEM["response_text"]] * 4,
        "prompts": ["p"] * 4,
        "labels": [json.dumps(ITEM)] * 4,
    }
    status, _, answer = await _post(url + "/get_reward", json.dumps(rlhf))
    assert status == 413 and "at most 3" in answer["error"]
    status, _, answer = await _post(url + "/score/batch", json.dumps({"items": [ITEM] * 3}))
    assert status == 200 and len(answer["scores"]) == 3


def test_the_batch_cap_is_documented() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "serving.md").read_text(encoding="utf-8")
    assert f"{reward_server.MAX_BATCH_ITEMS:,}" in text and "413" in text


# --- the viewer: a name allowed needs the token; slow clients are closed (items 3 and 4) ---------------------


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sample_run(tmp_path_factory.mktemp("view") / "reports")


@pytest.fixture
async def viewer_at(run_dir: Path) -> AsyncIterator[Callable[..., Any]]:
    """Starts the viewer's server on the sample run (any options of serve()); gives (viewer, URL printed)."""
    tasks: list[asyncio.Task[None]] = []

    async def started(
        read_timeout: float = 60.0, host: str = "127.0.0.1", **options: Any
    ) -> tuple[Viewer, str]:
        viewer = Viewer(Catalog.open([run_dir]), "alice", read_timeout=read_timeout)
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            serve_viewer(
                viewer, host, 0, open_browser=False, console=Console(quiet=True),
                on_ready=ready.set_result, **options,
            )
        )  # fmt: skip
        tasks.append(task)
        await asyncio.wait({ready, task}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
        return viewer, ready.result()

    yield started
    for task in tasks:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_viewer_behind_an_allowed_name_needs_the_token_to_read(viewer_at: Callable[..., Any]) -> None:
    viewer, url = await viewer_at(allow_hosts=["view.example.org"])
    assert viewer.token_to_read and url.endswith(f"?token={viewer.token}")
    base = url.split("?", 1)[0]
    async with aiohttp.ClientSession() as session:
        for host in ("view.example.org", "127.0.0.1"):
            async with session.get(base, headers={"Host": host}) as refused:
                assert refused.status == 403 and "Token needed" in await refused.text()
        async with session.get(
            base, headers={"Host": "view.example.org", "X-Prbj-Token": viewer.token}
        ) as ok:
            assert ok.status == 200
    plain, _ = await viewer_at()
    assert not plain.token_to_read


async def test_a_viewer_on_an_empty_host_serves_every_address_so_reading_needs_the_token(
    viewer_at: Callable[..., Any],
) -> None:
    viewer, url = await viewer_at(host="")
    assert viewer.token_to_read and url.endswith(f"?token={viewer.token}")


async def test_reveal_is_refused_with_an_allowed_name(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["view", str(tmp_path), "--reveal", "--allow-host", "view.example.org"])
    assert result.exit_code == 2
    (line,) = error_lines(result.output)
    assert "--reveal" in line and "--allow-host" in line


async def test_the_viewer_closes_connections_whose_request_does_not_arrive(
    viewer_at: Callable[..., Any],
) -> None:
    _, url = await viewer_at(idle_timeout=0.3, read_timeout=0.3)
    port = int(url.split(":")[2].split("/")[0])
    # Headers that never end: the connection is closed (the guard is 30 s, a hang, not a measure of speed).
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 30) == b""
    writer.close()
    # A form whose body never arrives gets 408 instead of holding a handler.
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /run/x/pair/y/label HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\npreference=A"
    )
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 30)
    assert status_line.startswith(b"HTTP/1.1 408"), status_line
    writer.close()


def test_both_servers_default_to_the_same_timeouts() -> None:
    import inspect

    from prbj.web import IDLE_TIMEOUT, READ_TIMEOUT

    assert inspect.signature(serve_viewer).parameters["idle_timeout"].default == IDLE_TIMEOUT
    assert inspect.signature(reward_server.serve).parameters["idle_timeout"].default == IDLE_TIMEOUT
    assert Viewer.__dataclass_fields__["read_timeout"].default == READ_TIMEOUT == 60.0
