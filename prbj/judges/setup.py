"""What the user asked of the judges (JudgeOptions), and the one place a provider spec becomes a ProviderSpec
ready to call. `prbj judge`, `prbj bon` (score, sample, evaluate), `prbj build` and `prbj serve` all resolve
their providers through `resolve_provider`, so each is resolved, priced and key-checked once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.markup import escape

from prbj.context.choice_checks import ChoiceChecker
from prbj.context.planner import Planner
from prbj.context.profile_text import DEFAULT_PROFILE_K, ProfileOrder
from prbj.context.synthesizer import CHOICE_WORDS, Synthesis, Synthesizer
from prbj.data.schema import Context
from prbj.errors import ConfigError
from prbj.judges.official import OfficialRepo, Protocol, require_repo
from prbj.judges.scalar import ScalarOptions
from prbj.judges.verdict import verdict_and_reasoning
from prbj.llm import lifecycle
from prbj.llm.gateway import Gateway
from prbj.llm.logprobs import DEFAULT_TOP_LOGPROBS, LOGPROB_PARAMS, request_params
from prbj.llm.params import Asked, with_params
from prbj.llm.providers import LITELLM_TRANSPORT, ProviderSpec
from prbj.llm.setup import GatewayOptions
from prbj.local import provider as local_provider
from prbj.local.rm_runtime import DEFAULT_BATCH_SIZE
from prbj.prompts import Template, from_file

# What a user template must show, by mode, or the judge would never see that input.
_REQUIRED_PLACEHOLDERS = {
    "pairwise": {"question", "Response_A", "Response_B"},
    "pointwise": {"question", "response"},
}


def resolve_provider(
    spec: str, shared: GatewayOptions, gateway: Gateway, asked: Mapping[str, Asked] | None = None
) -> ProviderSpec:
    """A provider ready to call: resolved (profile, litellm:<id> or hf-local:<path>), priced, with its key
    present when calls will really be sent, and its parameters settled (prbj.llm.params): the profile's, then
    the run's --reasoning-effort, then `asked` (the command's own settings), checked against the provider rules
    before any call. Every command resolves its providers here and only here; what a rule changed or warns
    about, and a model near or past its retirement date, is printed once (stderr) and recorded in run.json."""
    provider = local_provider.resolve_provider(
        spec, providers_dir=shared.providers_dir, api_base=shared.api_base, gateway=gateway
    )
    # Refused before its key is looked for: whether it may be sent the data at all comes first.
    gateway.routing.check(provider)
    if shared.sends:
        provider.api_key()
    # Limits never enter the cache key, so overriding them for one run keeps every cached answer.
    overrides = shared.limit_overrides
    # Which limits were set by a flag is kept, so that the run reports each limit's source and a provider's
    # headers do not overrule it.
    if overrides:
        # The overrides are ProviderSpec fields (rpm, tpm, ..., timeout) with values of their types.
        provider = replace(provider, **overrides, flagged=frozenset(overrides))  # type: ignore[arg-type]
    run_params = dict(asked or {})
    notes: list[str] = []
    if shared.reasoning_effort is not None:
        if provider.transport == LITELLM_TRANSPORT:
            run_params["reasoning_effort"] = Asked(shared.reasoning_effort, "--reasoning-effort", "option")
        else:
            notes.append(
                f"--reasoning-effort not sent to {provider.name}: in-process models do not reason on request"
            )
    if any(name in run_params for name in LOGPROB_PARAMS) and provider.supports_logprobs is False:
        for name in LOGPROB_PARAMS:
            run_params.pop(name, None)
        notes.append(
            "--confidence logprobs: no log-probabilities asked (the model returns none); its probabilities come "
            "from both orders, samples or scores where the run has them"
        )
    provider = announce(
        lifecycle.checked(with_params(provider, run_params), shared.providers_dir), gateway, notes
    )
    return provider


def announce(provider: ProviderSpec, gateway: Gateway, extra: Sequence[str] = ()) -> ProviderSpec:
    """Print what the parameter rules and the model's lifecycle say about `provider`, each line once per run
    (the gateway records the settled parameters in the run's usage when the provider is first called)."""
    settled = provider.settled
    lines = [*(settled.notices if settled is not None else ()), *extra]
    fresh = [line for line in lines if line not in gateway.announced]
    if fresh:
        gateway.announced.update(fresh)
        console = Console(stderr=True, highlight=False, soft_wrap=True)
        for line in fresh:
            console.print(f"[yellow]note:[/yellow] {provider.name}: {escape(line)}")
    return provider


@dataclass(frozen=True)
class JudgeOptions:
    """The judge options of `prbj judge`, `prbj bon score` and `prbj serve`, named as on the command line."""

    seed: int = 42
    contexts: tuple[Context, ...] = ()
    profile_k: int = DEFAULT_PROFILE_K
    # --profile-order: which earlier choices of a user a judge sees first (prbj.context.profile_text).
    profile_order: ProfileOrder = "similar"
    planner: str | None = None
    # --synthesizer: the model that writes each user's persona for the `synthesized` context.
    synthesizer: str | None = None
    # --synthesis: how the persona is written (one call, or after SynthesizeMe's check of each earlier choice).
    synthesis: Synthesis = "one-call"
    repair: bool = False
    # --retry-failed: re-ask parse_error/api_error calls with fresh sample indexes (see generative.py).
    retry_failed: bool = False
    judge_template_system: Path | None = None
    judge_template_user: Path | None = None
    # Scoring one answer at a time is what best-of-N and a reward server need; `prbj judge` also offers pairwise.
    mode: Literal["pairwise", "pointwise"] = "pointwise"
    order: Literal["random", "both"] = "random"
    scalar: ScalarOptions = field(default_factory=ScalarOptions)
    # --protocol official reproduces the official scripts (prbj.judges.official); its prompts come from
    # --official-repo, the user's clone of the official repository.
    protocol: Protocol = "prbj"
    official_repo: Path | None = None
    # --temperature (prbj judge): the LLM judges' sampling temperature for this run; None keeps the profile's.
    temperature: float | None = None
    # --confidence logprobs (prbj judge): the LLM judges ask for verdict-token log-probabilities.
    logprobs: bool = False
    # --batch-size: items per call of a reward model written in Python (py:, entry points).
    batch_size: int = DEFAULT_BATCH_SIZE

    @property
    def judge_params(self) -> dict[str, Asked]:
        """What the LLM judges ask of their providers besides the profile (the planner asks nothing). The
        log-probabilities are asked where a model can give them: a provider rule may leave them out (a
        default, not a typed value, so such a judge runs without them rather than refusing the run)."""
        params: dict[str, Asked] = {}
        if self.temperature is not None:
            params["temperature"] = Asked(self.temperature, "--temperature", "option")
        if self.logprobs:
            params |= {
                name: Asked(value, "--confidence logprobs", "default")
                for name, value in request_params(DEFAULT_TOP_LOGPROBS).items()
            }
        return params

    @classmethod
    def pop_from(cls, options: dict[str, Any]) -> JudgeOptions:
        """Take the judge options (and the scalar ones, --dtype, --device, ...) out of a command's keyword
        arguments; a command that lacks some keeps their defaults. --scalar-input defaults to the protocol's."""
        scalar = {f.name: options.pop(f.name) for f in fields(ScalarOptions) if f.name in options}
        mine = {f.name: options.pop(f.name) for f in fields(cls) if f.name != "scalar" and f.name in options}
        if scalar.get("scalar_input") is None:
            scalar["scalar_input"] = "official" if mine.get("protocol") == "official" else "chat"
        return cls(**mine, scalar=ScalarOptions(**scalar))

    @cached_property
    def official(self) -> OfficialRepo | None:
        """The official repository under --protocol official (required then), None under prbj's protocol."""
        return require_repo(self.official_repo, self.protocol)

    @cached_property
    def system_template(self) -> Template | None:
        """--judge-template-system, read and checked once (on first use)."""
        return _template(self.judge_template_system, "--judge-template-system", set())

    @cached_property
    def user_template(self) -> Template | None:
        """--judge-template-user, read once and checked to show what the mode needs."""
        return _template(self.judge_template_user, "--judge-template-user", _REQUIRED_PLACEHOLDERS[self.mode])


def _template(path: Path | None, option: str, required: set[str]) -> Template | None:
    return from_file(path, option=option, required=required) if path is not None else None


def make_planner(options: JudgeOptions, shared: GatewayOptions, gateway: Gateway) -> Planner | None:
    """The planner of the `planner` context (--planner), on the run's gateway; None when none is asked for."""
    if not options.planner:
        return None
    return Planner(
        resolve_provider(options.planner, shared, gateway),
        gateway,
        profile_k=options.profile_k,
        profile_order=options.profile_order,
        repair=options.repair,
    )


def make_synthesizer(options: JudgeOptions, shared: GatewayOptions, gateway: Gateway) -> Synthesizer | None:
    """The synthesizer of the `synthesized` context (--synthesizer), on the run's gateway, resolved like any
    provider (so the run's --personal-data policy refuses it exactly as it would a judge or the planner); None
    when none is asked for."""
    if "synthesized" in options.contexts and not options.synthesizer:
        raise ConfigError(
            "--context synthesized needs --synthesizer <provider> (the model that writes each user's persona "
            "from their earlier choices)"
        )
    if not options.synthesizer:
        if options.synthesis != "one-call":
            raise ConfigError(f"--synthesis {options.synthesis} needs --synthesizer <provider>")
        return None
    provider = resolve_provider(options.synthesizer, shared, gateway)
    checker = (
        ChoiceChecker(provider, gateway, CHOICE_WORDS, verdict_and_reasoning)
        if options.synthesis == "verified"
        else None
    )
    return Synthesizer(provider, gateway, checker=checker)
