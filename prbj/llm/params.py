"""The generation parameters a provider is sent, settled once before any call: every source merged (profile,
run options, the command's own defaults), the provider rules of prbj.llm.param_rules applied, and LiteLLM's
mapping of the result kept, so that what prbj keys, reserves money for and records is what leaves.

`settle` refuses (ConfigError, exit 2) a combination the provider would reject or drop when the user typed the
offending value, and otherwise makes the rule's documented change; changes and warnings are returned to be
printed and recorded in run.json (`usage[].params`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from prbj.errors import ConfigError
from prbj.llm.param_rules import (
    DEFAULT_MAX_TOKENS,
    RULES,
    Asked,
    Finding,
    Origin,
    ParamRule,
    Proposal,
    SettledParams,
    output_cap,
)
from prbj.llm.providers import ADHOC_SOURCE, LITELLM_TRANSPORT, ProviderSpec

__all__ = ["Asked", "Origin", "SettledParams", "output_cap", "settle", "with_params"]

# A change can enable another rule (dropping a temperature may leave a cap too small, ...): rounds are bounded.
_MAX_ROUNDS = 2 * len(RULES)


def with_params(provider: ProviderSpec, asked: Mapping[str, Asked] | None = None) -> ProviderSpec:
    """`provider` with its parameters settled: the profile's, then `asked` (run options and the command's
    defaults, which win), checked against the provider rules. Raises ConfigError for a refused combination."""
    # A `litellm:<id>` or `hf-local:` provider has no profile: its parameters are prbj's defaults for it.
    profiled = provider.source != ADHOC_SOURCE
    sources = {
        name: Asked(value, f"profile {provider.name}", "profile")
        if profiled
        else Asked(value, f"prbj's default for {provider.name}")
        for name, value in provider.params.items()
    }
    sources |= dict(asked or {})
    if not any(name in sources for name in ("max_tokens", "max_completion_tokens", "max_output_tokens")):
        # The output bound reserved by the budget is the bound sent: without it a reply could run unbounded.
        sources["max_tokens"] = Asked(DEFAULT_MAX_TOKENS, "prbj's default output cap")
    settled = settle(provider, sources)
    return replace(provider, params=settled.params, settled=settled)


def settle(provider: ProviderSpec, asked: Mapping[str, Asked]) -> SettledParams:
    """The parameters to send to `provider`, from `asked`, after the provider rules (see the module doc)."""
    per_request = {name for name, a in asked.items() if a.origin == "default" and name == "seed"}
    params = {name: a.value for name, a in asked.items()}
    sources = dict(asked)
    changes: list[str] = []
    facts = _facts(provider)
    litellm = provider.transport == LITELLM_TRANSPORT
    for _ in range(_MAX_ROUNDS):
        proposal = _proposal(provider, params, sources, facts, litellm=litellm)
        warnings: list[str] = []
        for rule in RULES:
            if not rule.applies(proposal):
                continue
            finding = rule.check(proposal)
            if finding is None:
                continue
            if finding.warn_only:
                warnings.append(_notice(rule, finding.what))
                continue
            if finding.repair is None or any(proposal.source(n).typed for n in finding.blamed):
                raise ConfigError(_refusal(provider, rule, finding))
            params = dict(finding.repair)
            sources = _carried(sources, params, rule)
            changes.append(_notice(rule, finding.change))
            break
        else:
            return SettledParams(
                params=params,
                wire=dict(proposal.wire) if litellm and proposal.wire is not None else None,
                changes=tuple(changes),
                warnings=tuple(warnings),
                unsent=frozenset(per_request - set(params)),
            )
    raise ConfigError(f"provider {provider.name!r}: its parameter rules do not settle ({'; '.join(changes)})")


def _proposal(
    provider: ProviderSpec,
    params: dict[str, Any],
    sources: Mapping[str, Asked],
    facts: Any,
    *,
    litellm: bool,
) -> Proposal:
    if not litellm:
        return Proposal(provider.name, provider.model, params, sources, None, facts)
    from prbj.llm.wire_params import wire_params

    def without(name: str) -> Mapping[str, Any]:
        return wire_params(provider.model, {k: v for k, v in params.items() if k != name})

    return Proposal(
        provider.name, provider.model, params, sources, wire_params(provider.model, params), facts, without
    )


def _facts(provider: ProviderSpec) -> Any:
    from prbj.llm.litellm_setup import ModelFacts, model_facts

    return model_facts(provider.model) if provider.transport == LITELLM_TRANSPORT else ModelFacts()


def _carried(sources: Mapping[str, Asked], params: Mapping[str, Any], rule: ParamRule) -> dict[str, Asked]:
    """The sources of the changed parameters: a value a rule changed is the rule's, never the user's."""
    carried = {}
    for name, value in params.items():
        before = sources.get(name)
        if before is not None and before.value == value:
            carried[name] = before
        else:
            origin = before.source if before is not None else "prbj"
            carried[name] = Asked(value, f"{origin}, changed by rule {rule.name}", "default")
    return carried


def _notice(rule: ParamRule, text: str) -> str:
    return f"{text} [{rule.name}]"


def _refusal(provider: ProviderSpec, rule: ParamRule, finding: Finding) -> str:
    return (
        f"provider {provider.name!r} ({provider.model}): {finding.what}; rule {rule.name} ({rule.models}: "
        f"{rule.source}); fix: {rule.fix}"
    )
