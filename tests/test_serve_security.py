"""`prbj serve` at its edges (issue 31): a web page the operator opens cannot make it score (content type, Host,
Origin), a token guards every bind beyond loopback and the client sends it, and no answer is invalid JSON.
Real HTTP on loopback sockets, requests written byte for byte where a client would rewrite them."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from prbj.cli import main
from prbj.errors import ConfigError
from prbj.judges.baselines import LengthJudge
from prbj.serve.server import serve

ROOT = Path(__file__).resolve().parents[1]
BODY = json.dumps({"response_text": "Try a used rangefinder.", "query": "Which camera?", "profile": []})


def _strict_json(text: str) -> Any:
    """JSON as RFC 8259 has it: NaN and Infinity are not JSON."""

    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def _send(
    address: str, port: int, method: str, path: str, headers: dict[str, str], body: str = ""
) -> tuple[int, Any]:
    data = body.encode()
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items())]
    lines += [f"Content-Length: {len(data)}", "Connection: close", "", ""]
    with socket.create_connection((address, port), timeout=10) as sock:
        sock.sendall("\r\n".join(lines).encode() + data)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, rest = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), _strict_json(rest.decode())


@pytest.fixture
async def start() -> AsyncIterator[Callable[..., Any]]:
    """Starts serve() with the length judge (any options); gives its URL."""
    stops: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def started(host: str = "127.0.0.1", **options: Any) -> str:
        stop = asyncio.Event()
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            serve(LengthJudge(), host=host, port=0, on_ready=ready.set_result, stop=stop, **options)
        )
        await asyncio.wait({ready, task}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()  # the error it stopped with
        stops.append((stop, task))
        return ready.result()

    yield started
    for stop, task in stops:
        stop.set()
        await task


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


async def test_only_json_from_no_other_site_is_scored(start: Callable[..., Any]) -> None:
    url = await start()
    port, host = _port(url), f"127.0.0.1:{_port(url)}"
    json_type = {"Host": host, "Content-Type": "application/json"}

    async def send(headers: dict[str, str], path: str = "/score") -> tuple[int, Any]:
        return await asyncio.to_thread(_send, "127.0.0.1", port, "POST", path, headers, BODY)

    # What a page elsewhere can send without a preflight: text/plain, a form, or no type at all.
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        status, answer = await send({"Host": host, "Content-Type": kind, "Origin": "http://evil.example"})
        assert status in (403, 415) and "score" not in answer
        status, answer = await send({"Host": host, "Content-Type": kind})
        assert status == 415 and "Content-Type" in answer["error"]
    status, answer = await send({"Host": host})
    assert status == 415
    # A cross-site Origin is refused even with the right type; the server's own origin and no Origin are fine.
    for origin in ("http://evil.example", "null", f"http://evil.example:{port}"):
        status, answer = await send({**json_type, "Origin": origin}, "/score/batch")
        assert status == 403 and "Origin" in answer["error"]
    assert (await send({**json_type, "Origin": f"http://localhost:{port}"}))[0] == 200
    status, answer = await send(json_type)
    assert status == 200 and isinstance(answer["score"], float)
    # A name made to resolve here (DNS rebinding) is not this server's.
    for name in ("evil.example", f"evil.example:{port}", "rebind.evil.example:80"):
        status, answer = await send({**json_type, "Host": name})
        assert status == 421 and "Host" in answer["error"]
    status, _ = await asyncio.to_thread(_send, "127.0.0.1", port, "GET", "/health", {"Host": "evil.example"})
    assert status == 421


async def test_a_token_guards_every_endpoint_but_health(
    start: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from prbj.serve import client as reward_client

    url = await start(token="s3cret-token-of-sixteen")
    port = _port(url)
    base = {"Host": f"localhost:{port}", "Content-Type": "application/json"}
    for headers, path in (
        (base, "/score"),
        ({**base, "Authorization": "Bearer wrong"}, "/score"),
        ({**base, "Authorization": "Basic s3cret-token-of-sixteen"}, "/score"),
        (base, "/score?token=wrong"),
    ):
        status, answer = await asyncio.to_thread(_send, "127.0.0.1", port, "POST", path, headers, BODY)
        assert status == 401 and "Authorization" in answer["error"], (headers, path)
    ok = {**base, "Authorization": "Bearer s3cret-token-of-sixteen"}
    assert (await asyncio.to_thread(_send, "127.0.0.1", port, "POST", "/score", ok, BODY))[0] == 200
    # OpenRLHF posts to a URL and sends no header of ours: the token may ride in the query.
    status, answer = await asyncio.to_thread(
        _send, "127.0.0.1", port, "POST", "/score?scale=0.1&token=s3cret-token-of-sixteen", base, BODY
    )
    assert status == 200 and answer["score"] > 0
    status, answer = await asyncio.to_thread(
        _send, "127.0.0.1", port, "GET", "/health", {"Host": base["Host"]}
    )
    assert status == 200 and answer["status"] == "ok"
    # The reward client sends the token it is given, or PRBJ_SERVE_TOKEN's.
    monkeypatch.delenv(reward_client.TOKEN_ENV, raising=False)
    bare = reward_client.RewardClient(url, retries=0)
    with pytest.raises(reward_client.RewardServerError, match="401"):
        await asyncio.to_thread(bare.score, "an answer", "q")
    given = reward_client.RewardClient(url, token="s3cret-token-of-sixteen", retries=0)
    assert await asyncio.to_thread(given.score, "an answer", "q") > 0
    monkeypatch.setenv(reward_client.TOKEN_ENV, "s3cret-token-of-sixteen")
    monkeypatch.setenv(reward_client.URL_ENV, url)
    monkeypatch.setenv(reward_client.DIVISOR_ENV, "1")
    assert await asyncio.to_thread(reward_client.compute_score, "src", "an answer", None, {"query": "q"}) > 0
    reward = reward_client.trl_reward_function(url)
    assert len(await asyncio.to_thread(reward, ["p"], ["an answer"], query=["q"], profile=[None])) == 1


async def test_beyond_loopback_a_token_is_required(start: Callable[..., Any]) -> None:
    for host in ("0.0.0.0", "::", "192.0.2.1"):
        with pytest.raises(ConfigError, match="PRBJ_SERVE_TOKEN"):
            await start(host=host)
    url = await start(host="0.0.0.0", token="t0k-long-enough-token")
    port = _port(url)
    headers = {
        "Host": f"evil.example:{port}",
        "Content-Type": "application/json",
        "Authorization": "Bearer t0k-long-enough-token",
    }
    assert (await asyncio.to_thread(_send, "127.0.0.1", port, "POST", "/score", headers, BODY))[0] == 421
    for name in (f"127.0.0.1:{port}", f"{socket.gethostname()}:{port}", f"0.0.0.0:{port}"):
        status, _ = await asyncio.to_thread(
            _send, "127.0.0.1", port, "POST", "/score", {**headers, "Host": name}, BODY
        )
        assert status == 200, name
    named = await start(host="0.0.0.0", token="t0k-long-enough-token", allow_hosts=["rm.cluster.local"])
    headers["Host"] = f"rm.cluster.local:{_port(named)}"
    assert (await asyncio.to_thread(_send, "127.0.0.1", _port(named), "POST", "/score", headers, BODY))[
        0
    ] == 200


async def test_no_answer_is_invalid_json(start: Callable[..., Any]) -> None:
    url = await start()
    port = _port(url)
    headers = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json"}
    batch = json.dumps({"items": [json.loads(BODY)] * 2})
    for path, body in (
        ("/score?scale=1e308", BODY),
        ("/score/batch?scale=-1e308", batch),
        ("/score?scale=inf", BODY),
        ("/score?scale=nan", BODY),
    ):
        status, answer = await asyncio.to_thread(_send, "127.0.0.1", port, "POST", path, headers, body)
        assert status == 400 and "scale" in answer["error"], (path, answer)
    status, answer = await asyncio.to_thread(
        _send, "127.0.0.1", port, "POST", "/score?scale=1e-300", headers, BODY
    )
    assert status == 200 and answer["score"] >= 0


def test_the_cli_refuses_a_public_bind_without_a_token_and_warns_with_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PRBJ_SERVE_TOKEN"} | {"PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "prbj", "serve", "-p", "length", "--host", "0.0.0.0", "--port", "0"]
    # A process with a deadline: a server that started anyway would never return.
    refused = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert refused.returncode == 2 and "error:" in refused.stderr and "PRBJ_SERVE_TOKEN" in refused.stderr
    help_text = CliRunner().invoke(main, ["serve", "--help"]).output
    assert "--host 0.0.0.0" in help_text and '--token "$PRBJ_SERVE_TOKEN"' in help_text
    env |= {"PRBJ_SERVE_TOKEN": "from-the-environment"}
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout=60)
        assert line and "listening on" in line[0], line
        port = int(line[0].split("listening on ")[1].split()[0].rsplit(":", 1)[1])
        headers = {"Host": f"localhost:{port}", "Content-Type": "application/json"}
        assert _send("127.0.0.1", port, "POST", "/score", headers, BODY)[0] == 401
        headers["Authorization"] = "Bearer from-the-environment"
        assert _send("127.0.0.1", port, "POST", "/score", headers, BODY)[0] == 200
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    assert "warning: serving on 0.0.0.0" in err and "token" in err
