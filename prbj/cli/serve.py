"""`prbj serve`: any prbj judge as an HTTP reward model for PPO trainers."""

from __future__ import annotations

import sys
from typing import Any

import click
from rich.console import Console

from prbj.cli.options import gateway_options
from prbj.cli.support import friendly_errors
from prbj.errors import DataError


@click.command()
@click.option(
    "-p",
    "--provider",
    required=True,
    metavar="NAME",
    help="Judge that scores answers, as in 'prbj judge' (offline: random, length, bm25-profile, embed-profile).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=8000,
    show_default=True,
    help="Port to listen on (0 picks a free one and prints it).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Judge calls in flight at once; further requests wait.",
)
@click.option("--seed", type=int, default=42, show_default=True, help="Seed for random judges.")
@click.option(
    "--context",
    type=click.Choice(["none", "profile", "planner"]),
    default=None,
    help="What an LLM judge sees besides query and response: none, profile (top --profile-k posts of the "
    "request's profile) or planner (aspects from --planner). Default: profile.",
)
@click.option(
    "--mode",
    type=click.Choice(["pointwise"]),
    default="pointwise",
    show_default=True,
    help="LLM judges score each response alone on 1-10 (a reward needs one score per response).",
)
@click.option(
    "--profile-k", type=click.IntRange(min=1), default=10, show_default=True, help="Profile posts shown."
)
@click.option("--planner", metavar="PROVIDER", help="Provider that turns profile + question into aspects.")
@click.option("--repair/--no-repair", default=False, help="Ask once more for the score when unparseable.")
@gateway_options
@friendly_errors
def serve(
    provider: str,
    host: str,
    port: int,
    concurrency: int,
    seed: int,
    context: str | None,
    mode: str,
    profile_k: int,
    planner: str | None,
    repair: bool,
    **gateway_settings: Any,
) -> None:
    """Serve a judge as an HTTP reward model for PPO trainers (verl, TRL, OpenRLHF).

    \b
    POST /score        {response_text, query, profile}  ->  {"score": float}
    POST /score/batch  {"items": [{...}, ...]}          ->  {"scores": [float, ...]}
    POST /get_reward   OpenRLHF remote RM {query, prompts, labels}  ->  {"rewards": [...]}
    GET  /health       ->  {"status": "ok", "judge": ..., "context": ...}
    Add ?scale=0.1 to a URL for reward = score / 10, as the official PPO setup.

    Stops on Ctrl-C or SIGTERM. Recipes for each trainer: docs/serving.md.

    \b
    LLM judges score through the response cache, with the provider's limits and --max-cost: a response
    seen before costs nothing, and past the budget requests fail (500) rather than spend more.

    \b
    Examples:
      prbj serve -p bm25-profile
      prbj serve -p embed-profile --host 0.0.0.0 --port 8000 --concurrency 32
      GEMINI_API_KEY=... prbj serve -p gemini-3-flash --context profile --max-cost 20
      prbj serve -p openai-compatible --api-base http://127.0.0.1:8001/v1 --cache-dir cache/
    """
    import asyncio

    from prbj.judges.setup import JudgeOptions, build_judges
    from prbj.llm.setup import GatewayOptions
    from prbj.serve.server import serve as serve_judge
    from prbj.serve.server import served_context

    del mode  # the only mode a reward server can use
    shared = GatewayOptions.pop_from(gateway_settings)
    if shared.dry_run:
        raise DataError(
            "--dry-run: a server answers live requests; use --cache-only to serve cached scores only"
        )
    gateway = shared.open()
    options = JudgeOptions(
        seed=seed,
        contexts=(context,) if context else (),
        profile_k=profile_k,
        planner=planner,
        repair=repair,
    )
    (judge,), _ = build_judges([provider], options, shared, gateway)
    context = served_context(judge)

    def ready(url: str) -> None:
        click.echo(
            f"prbj serve: judge {judge.name} (context {context}) listening on {url} "
            "(POST /score, POST /score/batch, POST /get_reward, GET /health); Ctrl-C stops"
        )
        sys.stdout.flush()

    try:
        asyncio.run(serve_judge(judge, host=host, port=port, concurrency=concurrency, on_ready=ready))
    finally:
        if gateway.cache is not None:
            gateway.cache.close()
    usage = [s.as_dict() for s in gateway.stats()]
    if usage:
        from prbj.report.terminal import usage_table

        Console().print(usage_table(usage))
    click.echo("prbj serve: stopped")
