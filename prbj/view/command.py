"""`prbj view` behind the CLI: open the run directories, then serve them on 127.0.0.1 or write the static
bundle."""

from __future__ import annotations

import asyncio
import getpass
import webbrowser
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiohttp import web
from rich.console import Console

from prbj.display.width import print_whole
from prbj.errors import ConfigError, DataError
from prbj.view.bundle import write_bundle
from prbj.view.catalog import Catalog
from prbj.view.server import Viewer, make_app

DEFAULT_FOLDER = Path("reports")
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def default_reviewer() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "reviewer"


def open_catalog(paths: Sequence[Path], dataset: str | None, **privacy: Any) -> Catalog:
    if paths:
        return Catalog.open(paths, dataset=dataset, **privacy)
    if not DEFAULT_FOLDER.is_dir():
        raise DataError(f"no {DEFAULT_FOLDER}/ folder here: name the run directories to view")
    catalog = Catalog.open([DEFAULT_FOLDER], dataset=dataset, **privacy)
    # Named folders that are not runs get a page saying why; the default folder must hold some runs.
    if not any(entry.header is not None for entry in catalog.runs.values()) and not catalog.builds:
        raise DataError(f"no run directory in {DEFAULT_FOLDER}/: run `prbj judge` first")
    return catalog


async def serve(viewer: Viewer, host: str, port: int, *, open_browser: bool, console: Console) -> None:
    runner = web.AppRunner(make_app(viewer), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as err:
        await runner.cleanup()
        raise ConfigError(f"cannot listen on {host}:{port}: {err.strerror}") from None
    bound = runner.addresses[0][1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/"
    if host in LOOPBACK:
        viewer.hosts = {f"{name}:{bound}" for name in ("127.0.0.1", "localhost", "[::1]")}
    else:
        console.print(
            f"[yellow]warning: serving on {host}: anyone who can reach it can read these runs[/yellow]"
        )
    console.print(f"prbj view: {url}  (Ctrl-C stops)", highlight=False, soft_wrap=True)
    if open_browser:
        webbrowser.open(url)
    try:
        seconds = await asyncio.to_thread(viewer.warm)
        console.print(f"{len(viewer.catalog.runs)} run(s) loaded in {seconds:.1f} s", highlight=False)
        await asyncio.Event().wait()
    finally:
        viewer.stopping.set()
        await runner.cleanup()


def run_view_command(
    paths: Sequence[Path],
    *,
    host: str,
    port: int,
    open_browser: bool,
    reviewer: str | None,
    bundle: Path | None,
    dataset: str | None,
    reveal: bool = False,
) -> int:
    console = Console(highlight=False)
    if reveal and (bundle is not None or host not in LOOPBACK):
        raise ConfigError(
            "--reveal shows personal text in clear: only to this machine (--host 127.0.0.1), never in a --bundle"
        )
    # A bundle is made to be shared: it carries no text of a guarded run (prbj.privacy.guard.shown_pairs).
    catalog = open_catalog(paths, dataset, private=bundle is None, reveal=reveal)
    if bundle is not None:
        pages = write_bundle(catalog, bundle)
        print_whole(console, f"wrote {pages} pages to {bundle} (open {bundle / 'index.html'})")
        return 0
    viewer = Viewer(catalog, reviewer or default_reviewer())
    try:
        asyncio.run(serve(viewer, host, port, open_browser=open_browser, console=console))
    except KeyboardInterrupt:
        console.print("prbj view stopped")
    return 0
