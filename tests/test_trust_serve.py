"""Issue 12 item 12: `prbj serve` answers bad bodies with 400 and a reason, and does not hold idle clients."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from prbj.judges.baselines import RandomJudge
from prbj.serve.server import serve


@pytest.fixture
async def url() -> AsyncIterator[str]:
    stop = asyncio.Event()
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(
            RandomJudge(),
            host="127.0.0.1",
            port=0,
            on_ready=ready.set_result,
            stop=stop,
            idle_timeout=0.5,
            read_timeout=0.5,
        )
    )
    yield await asyncio.wait_for(ready, 30)
    stop.set()
    await task


async def _post(url: str, data: bytes) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session, session.post(url, data=data, headers=headers) as response:
        return response.status, await response.json()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"response_text": "caf\xe9", "query": "q"}', "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (json.dumps({"response_text": "a"}).encode(), "field 'query': missing"),
        (
            json.dumps(
                {"response_text": "a", "query": "q", "profile": json.dumps(["I shoot film."])}
            ).encode(),
            "field 'profile': a string holding JSON",
        ),
        (
            json.dumps({"items": [{"response_text": "a", "query": "q"}, {"response_text": "b"}]}).encode(),
            "field 'items[1].query': missing",
        ),
    ],
)
async def test_bad_bodies_are_400_with_a_reason(url: str, data: bytes, reason: str) -> None:
    path = "/score/batch" if b'"items"' in data else "/score"
    status, answer = await _post(url + path, data)
    assert status == 400 and reason in answer["error"]


async def test_documented_shapes_still_score(url: str) -> None:
    for profile in (["I shoot film."], "Post 1 (Category: photo):\nFilm.", "free text [1]", None):
        body = {"response_text": "a", "query": "", "profile": profile}
        status, answer = await _post(url + "/score", json.dumps(body).encode())
        assert status == 200 and isinstance(answer["score"], float)


async def test_idle_and_stalled_connections_are_closed(url: str) -> None:
    host, port = url.removeprefix("http://").split(":")
    # A connection that never sends a request.
    reader, writer = await asyncio.open_connection(host, int(port))
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    # A request whose body never arrives gets 408 instead of holding a handler.
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"POST /score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n{"
    )
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 5)
    assert status_line.startswith(b"HTTP/1.1 408")
    writer.close()
