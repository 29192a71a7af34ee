"""Model lifecycle: providers retire models on announced dates, after which every call answers 404.

The dates come from LiteLLM's bundled model map (`deprecation_date`). A run on a model past its date, or
within WARN_DAYS of it, is warned before its first call; a 404 names the date and, where a bundled or user
profile declares that it `replaces` the retired one, the profile to use instead. "Today" is a parameter
everywhere (tests and reports must not depend on the wall clock).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from pathlib import Path

from prbj.llm.litellm_setup import ModelFacts, model_facts
from prbj.llm.providers import LITELLM_TRANSPORT, ProviderSpec, list_providers

WARN_DAYS = 30


def today() -> date:
    """The date lifecycle warnings are judged against (one seam for tests)."""
    return date.today()


def retirement_warning(
    provider: ProviderSpec, facts: ModelFacts, on: date, successor: str | None
) -> str | None:
    """One line when `provider`'s model retires within WARN_DAYS of `on` or has retired; None otherwise."""
    retires = facts.retires_on
    if retires is None or (retires - on).days > WARN_DAYS:
        return None
    instead = f"; use the profile {successor!r} instead" if successor else ""
    if retires < on:
        return (
            f"{provider.model} was retired on {retires.isoformat()} (LiteLLM's model map): calls will likely "
            f"answer 404{instead}"
        )
    days = (retires - on).days
    return (
        f"{provider.model} retires on {retires.isoformat()} (in {days} day{'s' if days != 1 else ''}; "
        f"LiteLLM's model map){instead}"
    )


def successor(provider: ProviderSpec, user_dir: Path | None = None) -> str | None:
    """The profile that declares it replaces `provider` (by profile name or model id), if any."""
    names = {provider.name, provider.model, provider.model.split("/", 1)[-1]}
    for candidate in list_providers(user_dir, resolve_prices=False):
        if candidate.name != provider.name and names & set(candidate.replaces):
            return candidate.name
    return None


def not_found_note(provider: ProviderSpec, facts: ModelFacts, on: date, instead: str | None) -> str:
    """What a 404 from `provider` adds to its cause: the model's retirement date and the profile to use instead,
    as far as they are known ("" when neither is)."""
    parts = []
    retires = facts.retires_on
    if retires is not None:
        tense = "was retired" if retires <= on else "retires"
        parts.append(f"{provider.model} {tense} on {retires.isoformat()} (LiteLLM's model map)")
    if instead:
        parts.append(f"use the profile {instead!r} instead")
    return "; ".join(parts)


def checked(provider: ProviderSpec, user_dir: Path | None = None, on: date | None = None) -> ProviderSpec:
    """`provider` with its lifecycle known: a warning among its settled parameters' warnings (printed before the
    first call, recorded in run.json) when its model retires within WARN_DAYS or has retired, and the note a 404
    from it will carry."""
    if provider.transport != LITELLM_TRANSPORT:
        return provider
    facts = model_facts(provider.model)
    if facts.retires_on is None:
        return provider
    on = on or today()
    instead = successor(provider, user_dir)
    warning = retirement_warning(provider, facts, on, instead)
    settled = provider.settled
    if warning is not None and settled is not None:
        settled = replace(settled, warnings=(*settled.warnings, warning))
    return replace(provider, settled=settled, not_found_note=not_found_note(provider, facts, on, instead))
