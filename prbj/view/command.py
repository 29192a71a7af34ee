"""`prbj view` behind the CLI: open the run directories, then serve them on 127.0.0.1 or write the static
bundle."""

from __future__ import annotations

import asyncio
import getpass
import webbrowser
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web
from rich.console import Console

from prbj.display.width import print_whole
from prbj.errors import ConfigError, DataError
from prbj.runs.rundir import find_run_dirs
from prbj.view.bundle import write_bundle
from prbj.view.catalog import Catalog, is_build
from prbj.view.server import Viewer, make_app

DEFAULT_FOLDER = Path("reports")
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def default_reviewer() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "reviewer"


def open_catalog(paths: Sequence[Path], dataset: str | None, console: Console) -> Catalog:
    """A named folder that holds no run is an error (as for `prbj show`); a run that cannot be read gets a page
    saying why. Without paths, every run under reports/, which must hold some."""
    def note(message: str) -> None:
        print_whole(console, f"note: {message}")

    if paths:
        return Catalog.open(paths, note=note, dataset=dataset)
    if not DEFAULT_FOLDER.is_dir():
        raise DataError(f"no {DEFAULT_FOLDER}/ folder here: name the run directories to view")
    found = find_run_dirs(DEFAULT_FOLDER, also=is_build)
    if not found:
        raise DataError(f"no run directory in {DEFAULT_FOLDER}/: run `prbj judge` first")
    catalog = Catalog.open(found, note=note, dataset=dataset)
    if not any(entry.header is not None for entry in catalog.runs.values()) and not catalog.builds:
        raise DataError(f"no readable run directory in {DEFAULT_FOLDER}/: run `prbj judge` first")
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
) -> int:
    console = Console(highlight=False)
    catalog = open_catalog(paths, dataset, Console(stderr=True, highlight=False))
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
