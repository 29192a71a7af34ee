"""Headless Debian Chromium driven by Playwright, and a `prbj view` server on a thread, for the viewer's browser
tests and its screenshot script. The browser is the system's (/usr/bin/chromium, which .ci/run installs), never
one Playwright downloads; without it the tests skip on a developer's machine and fail in CI."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from prbj.view.catalog import Catalog
from prbj.view.server import Viewer, make_app

CHROMIUM = os.environ.get("PRBJ_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_available() -> bool:
    return Path(CHROMIUM).is_file()


def browser_missing() -> str | None:
    """What the browser tests lack here, and how to get it; None when they can run."""
    try:
        import playwright.sync_api  # noqa: F401  (only asking whether it is installed)
    except ImportError:
        return "playwright is not installed: pip install -e '.[test]'"
    if not chromium_available():
        return f"no Chromium at {CHROMIUM}: apt-get install chromium (or name one in PRBJ_CHROMIUM)"
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def chromium_or_skip() -> Iterator[Any]:
    """chromium(); without Chromium the test skips on a developer's machine and fails under CI."""
    import pytest

    missing = browser_missing()
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{missing}; .ci/run installs both")
        pytest.skip(missing)
    with chromium() as running:
        yield running


@contextmanager
def serving(paths: Sequence[Path], *, reviewer: str = "alice") -> Iterator[tuple[str, Viewer]]:
    """A live viewer of `paths` on 127.0.0.1 (any free port), on its own thread and event loop."""
    viewer = Viewer(Catalog.open(paths), reviewer)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    runner = web.AppRunner(make_app(viewer), access_log=None)
    port: list[int] = []

    async def start() -> None:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port.append(runner.addresses[0][1])
        ready.set()

    thread = threading.Thread(
        target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True
    )
    thread.start()
    assert ready.wait(30), "the viewer did not start"
    try:
        yield f"http://127.0.0.1:{port[0]}", viewer
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()
