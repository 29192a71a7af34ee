"""Options shared by several commands: one definition, one meaning.

Where commands word an option differently today (what --seed seeds, what --concurrency counts), the decorator
takes the help text (and default) as a parameter, so each command's `--help` stays exact. Decorators apply in
the order they are listed above a command, which is the order `--help` shows them in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def stacked(*decorators: Callable[[Any], Any]) -> Callable[[F], F]:
    """Several option decorators as one, listed top to bottom as they would be written above a command."""

    def apply(command: F) -> F:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return apply


# --- run-wide options -------------------------------------------------------------------------------------


def seed_option(help: str) -> Callable[[F], F]:
    """--seed (default 42); the help says what this command seeds."""
    return click.option("--seed", type=int, default=42, show_default=True, help=help)


def fanned_out(what: str) -> str:
    """The help of --concurrency on a command whose model calls fan out through runs.engine."""
    return (
        f"{what} at once on top of the requests in flight the API providers admit (each provider's rate "
        "limit × its latency, at most --max-concurrency), so API calls never wait for it; it bounds the work "
        "of in-process models (hf:, hf-local:), whose inputs are batched, and memory."
    )


def host_option(beyond_loopback: str) -> Callable[[F], F]:
    """--host of the HTTP servers (default 127.0.0.1); `beyond_loopback` says what another address asks for."""
    return click.option(
        "--host",
        default="127.0.0.1",
        show_default=True,
        help=f"Address to listen on. Beyond loopback (0.0.0.0: every address) {beyond_loopback}.",
    )


def allow_host_option(examples: str) -> Callable[[F], F]:
    """--allow-host NAME (repeatable) of the HTTP servers; `examples` says which other names a user may need."""
    return click.option(
        "--allow-host",
        "allow_hosts",
        multiple=True,
        metavar="NAME",
        help=f"Another host name requests may be addressed to ({examples}); repeatable. This machine's own "
        "names and addresses are always accepted.",
    )


def concurrency_option(help: str, *, default: int = 16) -> Callable[[F], F]:
    """--concurrency; the help says what runs at once."""
    return click.option(
        "--concurrency", type=click.IntRange(min=1), default=default, show_default=True, help=help
    )


def profile_k_option(help: str = "Profile posts shown.", *, default: int | None = 10) -> Callable[[F], F]:
    """--profile-k; default None: the benchmark card's (the help then says so)."""
    return click.option(
        "--profile-k",
        type=click.IntRange(min=1),
        default=default,
        show_default=default is not None,
        help=help,
    )


def benchmark_options(help: str) -> Callable[[F], F]:
    """--benchmark (which benchmark the data is: a shipped card or a card file) and --profile-order."""
    return stacked(
        click.option("--benchmark", default=None, metavar="NAME|FILE.toml", help=help),
        click.option(
            "--profile-order",
            type=click.Choice(["similar", "newest"]),
            default=None,
            help="Which of a user's earlier choices a judge sees first, up to --profile-k: similar (most "
            "relevant to the question by BM25) or newest. Default: the benchmark card's, else similar.",
        ),
    )


def out_option(
    help: str, *, default: Path | None = Path("reports"), metavar: str | None = None
) -> Callable[[F], F]:
    """--out: the folder a command writes into (a parent of run directories, or the build directory)."""
    # Without a default nothing is shown; leaving show_default unset keeps click's own behaviour there.
    shown: dict[str, Any] = {"show_default": True} if default is not None else {}
    return click.option(
        "--out",
        type=click.Path(file_okay=False, path_type=Path),
        default=default,
        metavar=metavar,
        help=help,
        **shown,
    )


progress_option = click.option(
    "--progress/--no-progress", default=True, show_default=True, help="Show a progress bar."
)


def dataset_option(help: str) -> Callable[[F], F]:
    return click.option("--dataset", default="sample", show_default=True, metavar="SOURCE", help=help)


def subset_option(help: str) -> Callable[[F], F]:
    return click.option("--subset", "subsets", multiple=True, metavar="NAME", help=help)


def limit_option(help: str) -> Callable[[F], F]:
    return click.option("--limit", type=click.IntRange(min=1), default=None, help=help)


def dataset_options(*, dataset: str, subset: str, limit: str) -> Callable[[F], F]:
    """--dataset, --subset, --limit: which pairs (or questions) a command reads; help texts per command."""
    return stacked(dataset_option(dataset), subset_option(subset), limit_option(limit))


# --- judge options (prbj judge, prbj bon score, prbj serve) ----------------------------------------------


class NearChoice(click.Choice):
    """A choice whose error offers the closest valid values ("did you mean 'profile'?")."""

    def get_invalid_choice_message(self, value: Any, ctx: click.Context | None) -> str:
        from prbj.data.names import did_you_mean

        message = super().get_invalid_choice_message(value, ctx)
        near = did_you_mean(str(value), [str(choice) for choice in self.choices])
        return f"{message}{near.replace(' did', ' Did', 1)}" if near else message


def context_option(choices: Sequence[str], help: str, *, multiple: bool = True) -> Callable[[F], F]:
    """--context: repeatable (`contexts`) where a command builds one judge per context, single otherwise."""
    if multiple:
        return click.option("--context", "contexts", multiple=True, type=NearChoice(list(choices)), help=help)
    return click.option("--context", type=NearChoice(list(choices)), default=None, help=help)


planner_option = click.option(
    "--planner", metavar="PROVIDER", help="Provider that turns profile + question into aspects."
)
synthesizer_option = click.option(
    "--synthesizer",
    metavar="PROVIDER",
    help="Provider that writes each user's persona from their earlier choices (--context synthesized: "
    "SynthesizeMe's persona, one call per user, cached).",
)
synthesis_option = click.option(
    "--synthesis",
    type=click.Choice(["one-call", "verified"]),  # prbj.context.synthesizer.SYNTHESES
    default="one-call",
    show_default=True,
    help="How --synthesizer writes a persona: one-call (from the earlier choices); verified (SynthesizeMe's "
    "step 1: each earlier choice is first predicted blind, one call each, and the persona is written from the "
    "reasoning that predicted the user's pick right).",
)


def mode_option(choices: Sequence[str], help: str) -> Callable[[F], F]:
    return click.option(
        "--mode", type=click.Choice(list(choices)), default=choices[0], show_default=True, help=help
    )


order_option = click.option(
    "--order",
    type=click.Choice(["random", "both"]),
    default=None,
    help="random: chosen answer's position drawn per pair from --seed; both: judge each pair in both orders "
    "(correct only if both verdicts pick the chosen answer; reports order consistency). Default: the benchmark "
    "card's [protocol] order, else random.",
)


def repair_option(what: str) -> Callable[[F], F]:
    """--repair/--no-repair and --retry-failed, the two ways of healing replies without {what}: `what` is the
    part of the reply asked for (the verdict line, the score)."""
    repair = click.option(
        "--repair/--no-repair", default=False, help=f"Ask once more for {what} when unparseable."
    )
    retry_failed = click.option(
        "--retry-failed",
        is_flag=True,
        default=False,
        help="Re-ask calls that ended in parse_error, truncated, refused or api_error with fresh samples (a few "
        "at most), each "
        "cached; without it a rerun serves the cached reply, so failures stay reproducible. The sample used "
        "is recorded (column sample_index).",
    )

    def decorate(command: F) -> F:
        return repair(retry_failed(command))

    return decorate


def judge_template_options(*, system: str, user: str) -> Callable[[F], F]:
    """--judge-template-system and --judge-template-user: prompt files replacing the built-in ones."""
    path = click.Path(dir_okay=False, exists=True, path_type=Path)
    return stacked(
        click.option("--judge-template-system", type=path, help=system),
        click.option("--judge-template-user", type=path, help=user),
    )


batch_size_option = click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Items per call of a reward model written in Python (py:FILE.py:NAME, an installed entry point): its "
    "score() and prefer() see whole batches of this many (docs/plugins.md).",
)


scalar_options = stacked(
    click.option(
        "--dtype",
        type=click.Choice(["auto", "bf16", "fp16", "fp32"]),
        default="auto",
        show_default=True,
        help="Weights and activations of hf: reward models; auto = bf16 on a GPU, fp32 on a CPU.",
    ),
    click.option(
        "--device",
        type=click.Choice(["auto", "cpu", "cuda"]),
        default="auto",
        show_default=True,
        help="Where hf: reward models run; auto = cuda when available.",
    ),
    click.option(
        "--trust-remote-code",
        is_flag=True,
        default=False,
        help="Allow hf: reward models that ship their own Python code to run it (only for models you trust).",
    ),
    click.option(
        "--max-length",
        type=click.IntRange(min=2),
        default=8192,
        show_default=True,
        help="Longest input, in tokens, of hf: reward models; longer ones lose their middle and are flagged "
        "'truncated'.",
    ),
    click.option(
        "--batch-tokens",
        type=click.IntRange(min=1),
        default=None,
        help="Padded tokens per forward pass of hf: reward models (bounds memory; scores change only by float "
        "rounding: ~1e-6 of the score's size in fp32). "
        "Default: 16384 on a GPU, 4096 on a CPU. On a GPU raise --concurrency too, so that more answers wait "
        "to be batched.",
    ),
)
"""--dtype, --device, --trust-remote-code, --max-length, --batch-tokens: how hf: reward models run."""


# --- model-calling options (judge, build, bon, serve) -----------------------------------------------------

gateway_options = stacked(
    click.option(
        "--max-cost", type=click.FloatRange(min=0), default=None, metavar="USD", help="Hard cap on spend."
    ),
    click.option("--dry-run", is_flag=True, help="Print calls needed, cached, tokens and USD; send nothing."),
    click.option(
        "--cache-only", is_flag=True, help="Send nothing: answer from the cache, report what is missing."
    ),
    click.option(
        "--cache-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Response cache folder [default: $PRBJ_CACHE_DIR or ./cache].",
    ),
    click.option("--api-base", metavar="URL", help="Send the provider's requests to this base URL instead."),
    click.option(
        "--providers-dir",
        type=click.Path(file_okay=False, path_type=Path),
        envvar="PRBJ_PROVIDERS_DIR",
        help="Folder of provider profiles that override/add to the bundled ones [env: PRBJ_PROVIDERS_DIR].",
    ),
    click.option(
        "--env-file",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        help="Read API keys from this .env file (variables already set win).",
    ),
    click.option(
        "--rpm",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        help="Requests per minute for this run, overriding the provider profile; a lower limit stated in the "
        "provider's rate-limit headers still wins.",
    ),
    click.option(
        "--tpm",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        help="Tokens per minute (input and output together) for this run, overriding the provider profile.",
    ),
    click.option(
        "--input-tpm",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        help="Input tokens per minute for this run, overriding the provider profile (Anthropic's ITPM).",
    ),
    click.option(
        "--output-tpm",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        help="Output tokens per minute for this run, overriding the provider profile (Anthropic's OTPM).",
    ),
    click.option(
        "--max-concurrency",
        type=click.IntRange(min=1),
        default=None,
        help="Ceiling on requests in flight per provider for this run, overriding the provider profile. "
        "Below it, requests in flight follow the rate limit × the observed latency. [default: 500]",
    ),
    click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="SECONDS",
        help="Seconds before one request is abandoned (and retried), overriding the provider profile.",
    ),
    click.option(
        "--reasoning-effort",
        type=click.Choice(["none", "minimal", "low", "medium", "high"]),
        default=None,
        help="Hidden reasoning of the run's models [default: the profile's]; part of the cache key. LiteLLM maps "
        "it to each provider's control (OpenAI reasoning_effort, Anthropic thinking, Gemini thinkingLevel); a "
        "level a model does not take is refused before any call.",
    ),
)
"""--max-cost, --dry-run, --cache-only, --cache-dir, --api-base, --providers-dir, --env-file, --rpm, --tpm,
--input-tpm, --output-tpm, --max-concurrency, --timeout, --reasoning-effort; the command receives them as keyword
arguments and hands them to prbj.llm.setup.GatewayOptions."""


# --- protocol (judge, bon, serve) ---------------------------------------------------------------------------

protocol_options = stacked(
    click.option(
        "--protocol",
        type=click.Choice(["prbj", "official"]),
        default="prbj",
        show_default=True,
        help="prbj: prbj's protocol (per-pair A/B draw, last verdict, one BOS, middle truncation); official: "
        "the official scripts' setting exactly (their A/B stream, first 'result:', prompts from "
        "--official-repo, their reward-model input). Every difference: docs/protocol.md.",
    ),
    click.option(
        "--official-repo",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        metavar="PATH",
        help="Your clone of the official repository; --protocol official reads its prompt files from it.",
    ),
    click.option(
        "--scalar-input",
        type=click.Choice(["chat", "official"]),
        default=None,
        help="How hf: reward models get their input: chat (messages tokenised once, middle truncation) or "
        "official (chat formatted to text then tokenised again, right truncation, query + profile "
        "concatenated). Default: the --protocol's.",
    ),
)
"""--protocol, --official-repo, --scalar-input: which protocol runs (recorded in run.json)."""


# --- Ray (prbj judge, prbj bon sample|score) ----------------------------------------------------------------

ray_options = stacked(
    click.option(
        "--ray",
        metavar="[auto|ADDRESS]",
        is_flag=False,
        flag_value="auto",
        default=None,
        envvar="PRBJ_RAY_ADDRESS",
        help="Run local models (hf:, hf-local:) in Ray actors: auto = the cluster this machine belongs to (or a "
        "new one-machine cluster), else a cluster address (ray://host:10001, host:6379). The cache, API judges "
        "and reports stay here. Needs pip install 'prbj[ray]' [env: PRBJ_RAY_ADDRESS].",
    ),
    click.option(
        "--gpus-per-model",
        type=click.FloatRange(min=0),
        default=None,
        help="GPUs of each reward-model actor with --ray. Default: 1 when the cluster has GPUs, else 0 (CPU "
        "actors with --cpus-per-model).",
    ),
    click.option(
        "--cpus-per-model",
        type=click.FloatRange(min=0, min_open=True),
        default=1.0,
        show_default=True,
        help="CPUs of each CPU actor with --ray.",
    ),
    click.option(
        "--replicas",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Actors per local model with --ray (data parallel: its cache misses are shared out among them).",
    ),
)
"""--ray, --gpus-per-model, --cpus-per-model, --replicas; the command hands them to
prbj.local.ray_executor.RayOptions."""


batch_options = stacked(
    click.option(
        "--batch",
        is_flag=True,
        help="Buy the calls the cache cannot answer through the provider's batch API (OpenAI, Anthropic, Gemini): "
        "half price, answers within 24 h; they land in the same cache entries as live answers.",
    ),
    click.option(
        "--wait/--no-wait",
        default=True,
        show_default=True,
        help="With --batch: poll the jobs until they end, or submit them and exit 0 (collect later with "
        "`prbj batch collect`, then rerun).",
    ),
)
"""--batch, --wait/--no-wait: the command receives them as keyword arguments for GatewayOptions."""


# --- personal data (judge, build, bon) -----------------------------------------------------------------------


def _entity_kinds(_ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[str, ...] | None:
    """--keep-entities NRP,DATE_TIME (or `none`): the kinds left as they are, upper-cased; None: the default."""
    from prbj.privacy.entities import parse_kinds

    return None if value is None else parse_kinds(value)


privacy_options = stacked(
    click.option(
        "--personal-data",
        type=NearChoice(["local", "zero-retention", "pseudonymized", "any"]),
        envvar="PRBJ_PERSONAL_DATA",
        default=None,
        help="What of the data's text may leave this machine: local (in-process models and profiles with local = "
        'true), zero-retention (also profiles with retention = "zero"; no --batch), pseudonymized (any provider, '
        "after names, places, organizations, emails, phones, addresses, handles and the identifiers Presidio "
        "knows became per-user pseudonyms; needs a spaCy NER model or --ner-model none), any. Under every policy "
        "but any, run files and exports keep pair ids, not texts, and answers are cached in the private store. "
        "Default: any on the bundled samples and the published benchmarks; on your own data or card nothing goes "
        "to a remote model until you state it. See docs/privacy.md. [env: PRBJ_PERSONAL_DATA]",
    ),
    click.option(
        "--pseudonymize-answers/--no-pseudonymize-answers",
        default=None,
        help="With --personal-data pseudonymized: the questions, answers and conversation turns are pseudonymized "
        "with the profile, by the same per-user table [default: yes on per-user data, where they are the user's "
        "own conversations; no on data with one pair per user].",
    ),
    click.option(
        "--ner-model",
        metavar="NAME|PATH|none",
        default=None,
        help="spaCy pipeline that finds names, places and organizations for --personal-data pseudonymized "
        "(installed package or folder; never downloaded) [default: the first of en_core_web_lg, _trf, _md, _sm "
        "installed; with none installed the run is refused]. `none`: send names and places as they are.",
    ),
    click.option(
        "--keep-entities",
        metavar="KIND,...|none",
        default=None,
        callback=_entity_kinds,
        help="With --personal-data pseudonymized: entity kinds left as they are, by Presidio's names (DATE_TIME, "
        "ORGANIZATION, US_DRIVER_LICENSE, ...) [default: NRP, nationality, religion and politics]. `none`: "
        "replace every kind.",
    ),
    click.option(
        "--pseudonymize-terms",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        default=None,
        metavar="FILE",
        help="With --personal-data pseudonymized: terms of your own to replace too, one per line, optionally "
        "with a kind (CONDITION: type 1 diabetes): what no recognizer or NER model finds.",
    ),
    click.option(
        "--private-dir",
        type=click.Path(file_okay=False, path_type=Path),
        envvar="PRBJ_PRIVATE_DIR",
        default=None,
        help="Owner-only folder for pseudonym tables, the texts a guarded run keeps out of its run directory, and "
        "its cached answers [env: PRBJ_PRIVATE_DIR; default: ~/.local/share/prbj/private].",
    ),
)
"""--personal-data, --pseudonymize-answers, --ner-model, --keep-entities, --private-dir: the command hands the first to
GatewayOptions (routing) and the rest to prbj.privacy.guard.PrivacyOptions."""
