"""`prbj serve`: any prbj judge as an HTTP reward model for PPO trainers."""

from __future__ import annotations

from typing import Any

import click

from prbj.cli.options import (
    allow_host_option,
    batch_size_option,
    concurrency_option,
    context_option,
    gateway_options,
    host_option,
    mode_option,
    planner_option,
    profile_k_option,
    protocol_options,
    repair_option,
    seed_option,
)
from prbj.cli.support import friendly_errors
from prbj.web import SERVE_TOKEN_ENV


@click.command()
@click.option(
    "-p",
    "--provider",
    required=True,
    metavar="NAME",
    help="Judge that scores answers, as in 'prbj judge' (offline: random, length, bm25-profile, embed-profile; "
    "your own reward model: py:FILE.py:NAME).",
)
@host_option("a --token is required")
@click.option(
    "--token",
    envvar=SERVE_TOKEN_ENV,
    default=None,
    metavar="TOKEN",
    help="Bearer token every request but GET /health must carry (Authorization: Bearer TOKEN, or ?token=); "
    "required beyond loopback [env: PRBJ_SERVE_TOKEN].",
)
@allow_host_option("a DNS alias, a cluster service name")
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=8000,
    show_default=True,
    help="Port to listen on (0 picks a free one and prints it).",
)
@concurrency_option("Judge calls in flight at once; further requests wait.")
@seed_option("Seed for random judges.")
@context_option(
    ["none", "profile", "planner"],
    "What an LLM judge sees besides query and response: none, profile (top --profile-k posts of the "
    "request's profile) or planner (aspects from --planner). Default: profile.",
    multiple=False,
)
@mode_option(
    ["pointwise"], "LLM judges score each response alone on 1-10 (a reward needs one score per response)."
)
@profile_k_option()
@planner_option
@repair_option("the score")
@protocol_options
@batch_size_option
@gateway_options
@friendly_errors
def serve(**options: Any) -> None:
    """Serve a judge as an HTTP reward model for PPO trainers (verl, TRL, OpenRLHF).

    \b
    POST /score        {response_text, query, profile}  ->  {"score": float}
    POST /score/batch  {"items": [{...}, ...]}          ->  {"scores": [float, ...]}
    POST /get_reward   OpenRLHF remote RM {query, prompts, labels}  ->  {"rewards": [...]}
    GET  /health       ->  {"status": "ok", "judge": ..., "context": ...}
    Add ?scale=0.1 to a URL for reward = score / 10, as the official PPO setup.
    POST bodies must be Content-Type: application/json; requests must name this machine as Host
    (or a name given with --allow-host); cross-site browser requests are refused.

    Stops on Ctrl-C or SIGTERM. Recipes for each trainer: docs/serving.md.

    \b
    LLM judges score through the response cache, with the provider's limits and --max-cost: a response
    seen before costs nothing, and past the budget requests fail (500) rather than spend more.

    \b
    Examples:
      prbj serve -p bm25-profile
      prbj serve -p embed-profile --host 0.0.0.0 --port 8000 --token "$PRBJ_SERVE_TOKEN" --concurrency 32
      GEMINI_API_KEY=... prbj serve -p gemini-3-flash --context profile --max-cost 20
      prbj serve -p openai-compatible --api-base http://127.0.0.1:8001/v1 --cache-dir cache/
    """
    from prbj.serve.command import run_serve_command

    run_serve_command(**options)
