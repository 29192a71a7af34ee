"""The providers' parameter rules, in one table: which generation parameters each model family rejects or
ignores, each rule with the provider documentation it comes from.

A rule reads a proposal (the parameters prbj would send, where each came from, and how LiteLLM maps them for
the model) and reports a finding: what is wrong, which parameters are to blame, and the documented change that
resolves it when none of them was typed for this run. prbj.llm.params applies the table: a finding on a value
the user typed is refused with the rule and its fix (exit 2); otherwise the change is made, printed and
recorded; a warning is printed and recorded and the request goes as asked. docs/providers.md "Provider parameters"
lists the table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from prbj.llm.litellm_setup import ModelFacts

# Where a parameter's value came from: typed for this run (never changed by a rule), the provider profile, or
# prbj's own default for the command (best-of-N's sampling, gold grading, the output cap).
Origin = Literal["option", "profile", "default"]
OUTPUT_BOUNDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
# Output tokens a request is bounded by when no source states a bound (sent as max_tokens).
DEFAULT_MAX_TOKENS = 1024
# Hidden reasoning spends the output cap (OpenAI's max_completion_tokens, Gemini's maxOutputTokens and
# Anthropic's max_tokens all count it): the tokens prbj leaves for reasoning at each effort, above the answer.
REASONING_ROOM = {"none": 0, "minimal": 1024, "low": 4096, "medium": 8192, "high": 16384, "xhigh": 32768}
ANTHROPIC_MIN_BUDGET = 1024

_OPENAI_REASONING = re.compile(r"^(gpt-[5-9]|o[1-9])")
_CLAUDE_VERSION = re.compile(r"^claude-[a-z]+-(\d)(?:-(\d{1,2}))?(?=$|[-@])")


@dataclass(frozen=True)
class Asked:
    """A parameter's value and where it came from, as the user would name the source."""

    value: Any
    source: str
    origin: Origin = "default"

    @property
    def typed(self) -> bool:
        return self.origin == "option"

    def shown(self, name: str) -> str:
        return f"{name} {self.value!r} ({self.source})"


@dataclass(frozen=True)
class SettledParams:
    """The parameters prbj sends (OpenAI's names; the cache key holds these), what LiteLLM makes of them for
    the provider (None for in-process models), and the changes and warnings the rules made."""

    params: dict[str, Any]
    wire: dict[str, Any] | None = None
    changes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    # Per-request parameters the provider does not take (a sample's seed): left out of every request.
    unsent: frozenset[str] = field(default_factory=frozenset)

    def record(self) -> dict[str, Any]:
        """run.json's account of one provider's parameters."""
        return {
            "asked": self.params,
            "sent": self.wire if self.wire is not None else self.params,
            "changes": list(self.changes),
            "warnings": list(self.warnings),
        }

    @property
    def notices(self) -> tuple[str, ...]:
        return self.changes + self.warnings


@dataclass(frozen=True)
class Proposal:
    """What would be sent to one model: prbj's parameters (OpenAI's names), their sources, LiteLLM's mapping of
    them (None for in-process models, which take them as they are) and the model map's facts."""

    provider: str
    model: str
    params: Mapping[str, Any]
    asked: Mapping[str, Asked]
    wire: Mapping[str, Any] | None
    facts: ModelFacts
    # LiteLLM's mapping of the parameters without one of them (for the drop rule).
    wire_without: Callable[[str], Mapping[str, Any]] = field(default=lambda name: {})

    @property
    def bare(self) -> str:
        return self.model.split("/")[-1].lower()

    def source(self, name: str) -> Asked:
        return self.asked.get(name) or Asked(self.params.get(name), "prbj")

    def shown(self, name: str) -> str:
        return self.source(name).shown(name)


@dataclass(frozen=True)
class Finding:
    what: str
    # The parameters a change would touch: when the user typed one of them, the run is refused instead.
    blamed: tuple[str, ...] = ()
    # The documented change (new parameters) and how it reads; None: nothing prbj may change resolves it.
    repair: Mapping[str, Any] | None = None
    change: str = ""
    warn_only: bool = False


@dataclass(frozen=True)
class ParamRule:
    name: str
    models: str
    applies: Callable[[Proposal], bool]
    check: Callable[[Proposal], Finding | None]
    fix: str
    source: str


# --- which models ------------------------------------------------------------------------------------------


def claude_version(p: Proposal) -> tuple[int, int] | None:
    """(4, 5) for claude-sonnet-4-6-20250929, (5, 0) for claude-sonnet-5; None for older naming schemes."""
    match = _CLAUDE_VERSION.match(p.bare)
    return None if match is None else (int(match.group(1)), int(match.group(2) or 0))


def _claude_from(major: int, minor: int) -> Callable[[Proposal], bool]:
    return lambda p: p.wire is not None and (claude_version(p) or (0, 0)) >= (major, minor)


def _claude(p: Proposal) -> bool:
    return p.wire is not None and p.bare.startswith("claude-")


def _openai_reasoning(p: Proposal) -> bool:
    return (
        p.wire is not None
        and bool(_OPENAI_REASONING.match(p.bare))
        and "chat" not in p.bare
        and not p.model.startswith(("anthropic/", "gemini/", "vertex_ai/"))
    )


def _gemini_3(p: Proposal) -> bool:
    return p.wire is not None and p.bare.startswith("gemini-3")


def _litellm(p: Proposal) -> bool:
    return p.wire is not None


# --- helpers -----------------------------------------------------------------------------------------------


def _without(p: Proposal, names: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in p.params.items() if k not in names}


def _drop(p: Proposal, offending: list[str], what: str, why: str) -> Finding:
    """A finding resolved by not sending `offending`, unless the user typed one of them."""
    blamed = tuple(offending)
    typed = [n for n in blamed if p.source(n).typed]
    change = ", ".join(p.shown(n) for n in blamed) + f" not sent: {why}"
    return Finding(what, blamed, None if typed else _without(p, blamed), change)


def _thinking(p: Proposal) -> dict[str, Any]:
    thinking = (p.wire or {}).get("thinking")
    return thinking if isinstance(thinking, dict) else {}


def output_cap(params: Mapping[str, Any]) -> int | None:
    """The largest output bound among the parameters (max_tokens, max_completion_tokens, max_output_tokens and
    a thinking budget): what a reply may cost at most."""
    bounds = [params.get(name) for name in OUTPUT_BOUNDS]
    thinking = params.get("thinking")
    if isinstance(thinking, dict):
        bounds.append(thinking.get("budget_tokens"))
    numbers = [int(b) for b in bounds if isinstance(b, int | float) and not isinstance(b, bool)]
    return max(numbers) if numbers else None


def _raised_cap(p: Proposal, extra: int) -> dict[str, Any]:
    """The parameters with every output bound they state raised by `extra` tokens."""
    return {k: (int(v) + extra if k in OUTPUT_BOUNDS else v) for k, v in p.params.items()}


def _cap_name(p: Proposal) -> str:
    return next((n for n in OUTPUT_BOUNDS if n in p.params), "max_tokens")


def reasoning_room(p: Proposal) -> tuple[int, str] | None:
    """Tokens of hidden reasoning the request allows for (from REASONING_ROOM by effort, or Gemini's thinking
    budget), and how that effort reads; None when the model does not reason on this request."""
    wire = p.wire or {}
    if _claude(p):
        if _thinking(p).get("type") != "adaptive":
            return None  # manual thinking: claude-thinking-budget checks its budget against max_tokens
        effort = str((wire.get("output_config") or {}).get("effort") or "high")
    elif p.bare.startswith("gemini-"):
        config = wire.get("thinkingConfig") or {}
        budget = config.get("thinkingBudget")
        if isinstance(budget, int) and budget >= 0:
            return (budget, f"thinking budget {budget}") if budget else None
        effort = str(config.get("thinkingLevel") or ("high" if p.facts.supports_reasoning else "none"))
    elif _openai_reasoning(p):
        effort = str(wire.get("reasoning_effort") or p.facts.default_reasoning_effort or "medium")
    else:
        return None
    room = REASONING_ROOM.get(effort, REASONING_ROOM["high"])
    return (room, f"reasoning effort {effort!r}") if room else None


# --- the rules ---------------------------------------------------------------------------------------------


def _litellm_refuses(p: Proposal) -> Finding | None:
    message = (p.wire or {}).get("error")
    return None if message is None else Finding(f"LiteLLM cannot send these parameters: {message}")


def _claude_5_sampling(p: Proposal) -> Finding | None:
    offending = [
        n
        for n in ("temperature", "top_p", "top_k")
        if n in p.params and not (n in ("temperature", "top_p") and p.params[n] == 1)
    ]
    if not offending:
        return None
    return _drop(
        p, offending, f"{', '.join(p.shown(n) for n in offending)} set", "Claude Sonnet 5 takes none"
    )


def _claude_temperature_or_top_p(p: Proposal) -> Finding | None:
    if "temperature" not in p.params or "top_p" not in p.params:
        return None
    what = f"{p.shown('temperature')} and {p.shown('top_p')} together"
    # The default one goes (top_p first: temperature is the knob prbj's settings and the official setup lead with).
    spare = [n for n in ("top_p", "temperature") if not p.source(n).typed]
    if not spare:
        return Finding(what, ("temperature", "top_p"))
    return _drop(p, spare[:1], what, "Claude 4.5 and later take temperature or top_p, not both")


def _claude_manual_thinking(p: Proposal) -> Finding | None:
    if _thinking(p).get("type") != "enabled":
        return None
    return Finding(f"thinking {_thinking(p)} (manual extended thinking)", ("thinking",))


def _claude_thinking_budget(p: Proposal) -> Finding | None:
    thinking = _thinking(p)
    if thinking.get("type") != "enabled":
        return None
    budget = int(thinking.get("budget_tokens") or 0)
    cap = int((p.wire or {}).get("max_tokens") or 0)
    shown = f"thinking budget {budget}"
    if budget < ANTHROPIC_MIN_BUDGET:
        return Finding(f"{shown} below {ANTHROPIC_MIN_BUDGET}", ("thinking",))
    if budget < cap:
        return None
    name = _cap_name(p)
    blamed = (name,)
    what = f"{shown} not below {p.shown(name)}"
    if p.source(name).typed:
        return Finding(what, blamed)
    return Finding(
        what,
        blamed,
        _raised_cap(p, budget),
        f"{p.shown(name)} raised to {cap + budget}: thinking (budget {budget}) counts against it, and must "
        "leave room for the answer",
    )


def _claude_thinking_sampling(p: Proposal) -> Finding | None:
    if _thinking(p).get("type") not in ("enabled", "adaptive"):
        return None
    params = p.params
    offending = [
        n
        for n in ("temperature", "top_p", "top_k")
        if n in params
        and not (n == "temperature" and params[n] == 1)
        and not (n == "top_p" and 0.95 <= float(params[n]) <= 1)
    ]
    if not offending:
        return None
    what = f"{', '.join(p.shown(n) for n in offending)} with thinking on"
    return _drop(p, offending, what, "Claude's thinking takes temperature 1 only, top_p 0.95-1 and no top_k")


def _openai_reasoning_sampling(p: Proposal) -> Finding | None:
    wire = p.wire or {}
    offending = [
        n
        for n in ("temperature", "top_p", "logprobs", "top_logprobs")
        if n in p.params and wire.get(n) != p.params[n]
    ]
    if not offending:
        return None
    effort = wire.get("reasoning_effort") or p.facts.default_reasoning_effort or "the model's default"
    what = f"{', '.join(p.shown(n) for n in offending)} at reasoning effort {effort!r}"
    return _drop(p, offending, what, "OpenAI reasoning models take them only at reasoning effort 'none'")


def _openai_effort_level(p: Proposal) -> Finding | None:
    if "reasoning_effort" not in p.params or "reasoning_effort" in (p.wire or {}):
        return None
    return Finding(f"{p.shown('reasoning_effort')}, a level {p.bare} does not take", ("reasoning_effort",))


def _gemini_3_temperature(p: Proposal) -> Finding | None:
    temperature = p.params.get("temperature")
    if temperature is None or float(temperature) >= 1:
        return None
    return Finding(
        f"{p.shown('temperature')} below 1.0: Google advises keeping Gemini 3 at 1.0 (lower can loop or "
        "degrade); sent as asked",
        warn_only=True,
    )


def _gemini_3_thinking_floor(p: Proposal) -> Finding | None:
    level = ((p.wire or {}).get("thinkingConfig") or {}).get("thinkingLevel")
    if p.params.get("reasoning_effort") != "none" or not level:
        return None
    return Finding(
        f"{p.shown('reasoning_effort')} is sent as thinkingLevel {level!r}: Gemini 3 cannot turn thinking off",
        warn_only=True,
    )


def _reasoning_room(p: Proposal) -> Finding | None:
    room = reasoning_room(p)
    cap = output_cap(p.params)
    if room is None or cap is None or cap > room[0]:
        return None
    tokens, effort = room
    name = _cap_name(p)
    cap_source, effort_source = p.source(name), p.source("reasoning_effort")
    what = f"{p.shown(name)} leaves no room for the answer at {effort} (~{tokens} reasoning tokens)"
    # A profile's cap at the profile's own effort is the profile's choice: warned, not changed.
    if cap_source.typed or (cap_source.origin == "profile" and not effort_source.typed):
        return Finding(
            f"{what}: replies may come back empty, cut off by the cap",
            (name,),
            warn_only=not cap_source.typed,
        )
    return Finding(
        what,
        (name,),
        _raised_cap(p, tokens),
        f"{p.shown(name)} raised to {cap + tokens}: hidden reasoning at {effort} spends the output cap first",
    )


def _litellm_drops(p: Proposal) -> Finding | None:
    wire = p.wire or {}
    for name in p.params:
        if p.wire_without(name) != wire:
            continue
        if name == "reasoning_effort" and p.params[name] == "none":
            # No reasoning is what the model does unasked: the request is honoured, the key must not claim it.
            return Finding(
                f"{p.shown(name)} has no effect",
                (),
                _without(p, (name,)),
                f"{p.shown(name)} not sent: the model does not reason unless asked",
            )
        return _drop(p, [name], f"{p.shown(name)}, which LiteLLM does not send to {p.bare}", "not taken by "
                     f"{p.bare} (LiteLLM drops it)")  # fmt: skip
    return None


_ANTHROPIC_THINKING = "https://platform.claude.com/docs/en/build-with-claude/extended-thinking"
_OPENAI_LATEST = "https://platform.openai.com/docs/guides/latest-model"

RULES: tuple[ParamRule, ...] = (
    ParamRule(
        "litellm-refuses",
        "every model LiteLLM calls",
        _litellm,
        _litellm_refuses,
        "change or remove the parameter LiteLLM names",
        "https://docs.litellm.ai/docs/completion/input",
    ),
    ParamRule(
        "claude-5-sampling",
        "Claude Sonnet 5",
        lambda p: p.wire is not None and p.bare.startswith("claude-sonnet-5"),
        _claude_5_sampling,
        "leave out --temperature and --top-p; steer with --reasoning-effort",
        "https://platform.claude.com/docs/en/models/sonnet-5/migration-guide",
    ),
    ParamRule(
        "claude-temperature-or-top-p",
        "Claude Sonnet/Opus/Haiku 4.5 and later",
        _claude_from(4, 5),
        _claude_temperature_or_top_p,
        "give only one of --temperature and --top-p",
        "https://platform.claude.com/docs/en/about-claude/models/migrating-to-claude-4",
    ),
    ParamRule(
        "claude-manual-thinking",
        "Claude 4.7 and later",
        _claude_from(4, 7),
        _claude_manual_thinking,
        "remove thinking.budget_tokens from the profile and use --reasoning-effort (adaptive thinking)",
        _ANTHROPIC_THINKING,
    ),
    ParamRule(
        "claude-thinking-budget",
        "Claude with extended thinking",
        _claude,
        _claude_thinking_budget,
        "a budget of at least 1024 tokens, below the output cap (raise --max-tokens or lower --reasoning-effort)",
        _ANTHROPIC_THINKING,
    ),
    ParamRule(
        "claude-thinking-sampling",
        "Claude with thinking on",
        _claude,
        _claude_thinking_sampling,
        "leave out --temperature/--top-p, or pass --reasoning-effort none",
        _ANTHROPIC_THINKING,
    ),
    ParamRule(
        "openai-reasoning-sampling",
        "OpenAI reasoning models (GPT-5 and later, o-series)",
        _openai_reasoning,
        _openai_reasoning_sampling,
        "add --reasoning-effort none (gpt-5.1 and later), or leave out --temperature/--top-p",
        _OPENAI_LATEST,
    ),
    ParamRule(
        "openai-reasoning-effort-level",
        "OpenAI reasoning models",
        _openai_reasoning,
        _openai_effort_level,
        "gpt-5.1 and later take none, low, medium, high; earlier GPT-5 models minimal, low, medium, high",
        "https://platform.openai.com/docs/api-reference/chat/create#chat-create-reasoning_effort",
    ),
    ParamRule(
        "gemini-3-temperature",
        "Gemini 3",
        _gemini_3,
        _gemini_3_temperature,
        "leave out --temperature (Gemini 3's default is 1.0)",
        "https://ai.google.dev/gemini-api/docs/gemini-3",
    ),
    ParamRule(
        "gemini-3-thinking-floor",
        "Gemini 3",
        _gemini_3,
        _gemini_3_thinking_floor,
        "use --reasoning-effort minimal or low",
        "https://ai.google.dev/gemini-api/docs/thinking",
    ),
    ParamRule(
        "reasoning-room",
        "reasoning models (OpenAI, Gemini, Claude with adaptive thinking)",
        _litellm,
        _reasoning_room,
        "raise the output cap (--max-tokens, or max_tokens in the profile) or lower --reasoning-effort",
        "https://platform.openai.com/docs/guides/reasoning#allocating-space-for-reasoning",
    ),
    ParamRule(
        "litellm-drops",
        "every model LiteLLM calls",
        _litellm,
        _litellm_drops,
        "leave the parameter out: this model does not take it",
        "https://docs.litellm.ai/docs/completion/drop_params",
    ),
)
