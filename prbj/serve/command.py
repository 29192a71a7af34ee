"""`prbj serve` behind the CLI: build the judge from options, serve it until stopped, report the usage."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from prbj.data.schema import Context
from prbj.display.width import output_console
from prbj.errors import DataError
from prbj.judges.registry import build_judges
from prbj.judges.setup import JudgeOptions
from prbj.llm.setup import GatewayOptions
from prbj.report.terminal import usage_table
from prbj.serve import server
from prbj.web.access import is_loopback


def run_serve_command(
    *,
    provider: str,
    host: str,
    port: int,
    concurrency: int,
    context: Context | None,
    token: str | None = None,
    allow_hosts: Sequence[str] = (),
    **options: Any,
) -> None:
    """The body of `prbj serve`, until Ctrl-C or SIGTERM stops the server. The remaining keyword arguments
    are the judge options (JudgeOptions; --mode is pointwise, the only mode a reward server can use) and the
    shared model options (GatewayOptions)."""
    token = server.check_bind(
        host, token, allow_hosts
    )  # before a judge is built: a refused start costs nothing
    shared = GatewayOptions.pop_from(options)
    if shared.dry_run:
        raise DataError(
            "--dry-run: a server answers live requests; use --cache-only to serve cached scores only"
        )
    judging = JudgeOptions.pop_from({**options, "contexts": (context,) if context else ()})
    with shared.open() as gateway:
        (judge,), _ = build_judges([provider], judging, shared, gateway)
        served = server.served_context(judge)

        def ready(url: str) -> None:
            if not is_loopback(host) or allow_hosts:
                also = f" and as {', '.join(allow_hosts)}" if allow_hosts else ""
                print(
                    f"prbj serve: warning: serving on {host}{also} (port {url.rsplit(':', 1)[-1]}): any machine "
                    "that can reach it and holds the token can score with this judge and spend its budget",
                    file=sys.stderr,
                    flush=True,
                )
            print(
                f"prbj serve: judge {judge.name} (context {served}) listening on {url} "
                "(POST /score, POST /score/batch, POST /get_reward, GET /health); Ctrl-C stops",
                flush=True,
            )

        asyncio.run(
            server.serve(
                judge,
                host=host,
                port=port,
                concurrency=concurrency,
                on_ready=ready,
                protocol=judging.protocol,
                token=token,
                allow_hosts=allow_hosts,
            )
        )
    usage = [s.as_dict() for s in gateway.stats()]
    if usage:
        output_console().print(usage_table(usage))
    print("prbj serve: stopped", flush=True)
