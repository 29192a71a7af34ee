"""`prbj view` behind the CLI: open the run directories, then serve them (on 127.0.0.1 unless told otherwise) or
write the static bundle."""

from __future__ import annotations

import asyncio
import getpass
import socket
import webbrowser
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web
from rich.console import Console

from prbj.data.labels import check_reviewer
from prbj.display.width import print_whole
from prbj.errors import ConfigError, DataError
from prbj.runs.rundir import find_run_dirs
from prbj.view.bundle import write_bundle
from prbj.view.catalog import Catalog, is_build
from prbj.view.server import Viewer, make_app
from prbj.web import IDLE_TIMEOUT
from prbj.web.access import HostPolicy, checked_allowed_hosts, is_loopback, is_wildcard

DEFAULT_FOLDER = Path("reports")


def default_reviewer() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "reviewer"


def open_catalog(paths: Sequence[Path], dataset: str | None, console: Console, **privacy: Any) -> Catalog:
    """A named folder that holds no run is an error (as for `prbj show`); a run that cannot be read gets a page
    saying why. Without paths, every run under reports/, which must hold some. `privacy`: how guarded runs are
    shown (Catalog's private, reveal)."""

    def note(message: str) -> None:
        print_whole(console, f"note: {message}")

    if paths:
        return Catalog.open(paths, note=note, dataset=dataset, **privacy)
    if not DEFAULT_FOLDER.is_dir():
        raise DataError(f"no {DEFAULT_FOLDER}/ folder here: name the run directories to view")
    found = find_run_dirs(DEFAULT_FOLDER, also=is_build)
    if not found:
        raise DataError(f"no run directory in {DEFAULT_FOLDER}/: run `prbj judge` first")
    catalog = Catalog.open(found, note=note, dataset=dataset, **privacy)
    if not any(entry.header is not None for entry in catalog.runs.values()) and not catalog.builds:
        raise DataError(f"no readable run directory in {DEFAULT_FOLDER}/: run `prbj judge` first")
    return catalog


def _url_host(host: str) -> str:
    # A wildcard bind is reached by the machine's name; 0.0.0.0 itself is no address a browser should use.
    name = socket.gethostname() if is_wildcard(host) else host
    return f"[{name}]" if ":" in name else name


async def serve(
    viewer: Viewer,
    host: str,
    port: int,
    *,
    open_browser: bool,
    console: Console,
    allow_hosts: Sequence[str] = (),
    on_ready: Callable[[str], None] | None = None,
    idle_timeout: float = IDLE_TIMEOUT,
) -> None:
    """Serve until cancelled (Ctrl-C). Requests must name this machine (HostPolicy); beyond loopback, or with a
    name allowed (--allow-host: a reverse proxy's, whoever reaches it reaches the viewer), every page needs the
    token, which the printed URL carries. A connection idle, or whose request has not arrived, for `idle_timeout`
    is closed."""
    allowed = checked_allowed_hosts(allow_hosts)
    runner = web.AppRunner(make_app(viewer), access_log=None, keepalive_timeout=idle_timeout)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as err:
        await runner.cleanup()
        raise ConfigError(f"cannot listen on {host}:{port}: {err.strerror}") from None
    bound = runner.addresses[0][1]
    viewer.access = HostPolicy.for_bind(host, allowed)
    viewer.token_to_read = not is_loopback(host) or bool(allowed)
    url = f"http://{_url_host(host)}:{bound}/"
    if viewer.token_to_read:
        url += f"?token={viewer.token}"
        where = "every address of this machine" if is_wildcard(host) else host
        if allowed and is_loopback(host):
            where = f"{host} and whatever reaches it as {', '.join(allowed)}"
        console.print(
            f"[yellow]warning: serving on {where} (port {bound}): whoever can reach it and holds the token in "
            "the address below can read every run under the folders given (questions, answers, profiles, the "
            "judges' replies, costs) and write labels into them; requests naming another host are refused "
            "(--allow-host NAME adds one)[/yellow]",
            soft_wrap=True,
        )
    console.print(f"prbj view: {url}  (Ctrl-C stops)", highlight=False, soft_wrap=True)
    if on_ready is not None:
        on_ready(url)
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
    allow_hosts: Sequence[str] = (),
    reveal: bool = False,
) -> int:
    console = Console(highlight=False)
    if reveal and (bundle is not None or not is_loopback(host)):
        raise ConfigError(
            "--reveal shows personal text in clear: only to this machine (--host 127.0.0.1), never in a --bundle"
        )
    if reveal and allow_hosts:
        raise ConfigError(
            "--reveal shows personal text in clear, only to this machine: not with --allow-host (whoever reaches "
            "that name reaches the viewer)"
        )
    checked_allowed_hosts(allow_hosts)  # one line before any run is opened
    # Checked as the label reader checks it, before anything is served: a name it refuses could label nothing.
    name = check_reviewer(reviewer if reviewer is not None else default_reviewer(), "--reviewer")
    # A bundle is made to be shared: it carries no text of a guarded run (prbj.privacy.guard.shown_pairs).
    catalog = open_catalog(
        paths, dataset, Console(stderr=True, highlight=False), private=bundle is None, reveal=reveal
    )
    if bundle is not None:
        pages = write_bundle(catalog, bundle)
        print_whole(console, f"wrote {pages} pages to {bundle} (open {bundle / 'index.html'})")
        return 0
    viewer = Viewer(catalog, name)
    try:
        asyncio.run(
            serve(viewer, host, port, open_browser=open_browser, console=console, allow_hosts=allow_hosts)
        )
    except KeyboardInterrupt:
        console.print("prbj view stopped")
    return 0
