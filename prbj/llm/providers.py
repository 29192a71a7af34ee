"""Provider profiles: `providers/*.toml` → ProviderSpec (model id, key variable, limits, prices, params).

Profiles ship inside the wheel; a user folder (`--providers-dir` or PRBJ_PROVIDERS_DIR) overrides profiles of
the same name and adds new ones. `litellm:<model-id>` names a model without a profile; `hf-local:<path-or-id>`
a Hugging Face causal LM run in-process, which prbj.local.provider resolves (it needs the run's gateway to
register its transport on).
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from prbj.errors import ConfigError
from prbj.llm.routing import RETENTIONS, Retention
from prbj.llm.urls import check_api_base, redact_url

if TYPE_CHECKING:
    from prbj.llm.param_rules import SettledParams

PROVIDERS_ENV = "PRBJ_PROVIDERS_DIR"
LITELLM_PREFIX = "litellm:"
# What a `litellm:<model-id>` provider was read from: the option itself, there is no profile.
ADHOC_SOURCE = "--provider"
# `hf-local:<path-or-id>`: a Hugging Face causal LM run in-process (prbj.local.provider), free of charge.
LOCAL_PREFIX = "hf-local:"
TAKE_LITELLM_PRICE = "litellm"
# The transport (prbj.llm.transport) of every provider but in-process ones: a live LiteLLM call.
LITELLM_TRANSPORT = "litellm"
# Self-hosted servers (vLLM, llama.cpp) need no key, but the OpenAI, Anthropic and Gemini clients refuse to send
# a request without one: they get this placeholder, as vLLM's own docs suggest.
KEYLESS_PLACEHOLDER = "EMPTY"
_PER_MILLION = 1_000_000

_KNOWN_KEYS = {
    "extends",
    "model",
    "api_key_env",
    "api_key_required",
    "api_base",
    "paid",
    "rpm",
    "tpm",
    "input_tpm",
    "output_tpm",
    "max_concurrency",
    "price",
    "params",
    "timeout",
    "logprobs",
    "replaces",
    "retention",
    "local",
}

# LiteLLM request parameters that send a request to another address than the profile's api_base: refused in
# [params], where --personal-data (which reads api_base and what the profile states of it) would not see them.
ROUTING_PARAMS = frozenset({"api_base", "base_url"})
# Set in a profile's merged fields when what its base states of locality or retention was dropped (never a key a
# TOML file can hold: it has a space).
CLAIMS_DROPPED = "claims dropped"

# Where a model id without a profile gets its key from, by LiteLLM's provider prefix.
_KEY_ENV_BY_PREFIX = {
    "gemini": "GEMINI_API_KEY",
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}


@dataclass(frozen=True)
class ProviderSpec:
    name: str
    model: str
    api_key_env: str | None
    api_key_required: bool = True
    api_base: str | None = None
    paid: bool = True
    # Per minute: requests, tokens (input and output together), and input and output tokens apart (Anthropic
    # counts them apart). None: no limit known; prbj.llm.pacing learns them from the provider's headers.
    rpm: float | None = None
    tpm: float | None = None
    input_tpm: float | None = None
    output_tpm: float | None = None
    # Requests in flight at most; None: prbj.llm.pacing's ceiling (DEFAULT_MAX_IN_FLIGHT).
    max_concurrency: int | None = None
    # USD per token, resolved; None when unknown.
    input_price: float | None = None
    output_price: float | None = None
    price_source: str = "profile"
    # USD per token in a provider batch job ([price] batch_input / batch_output); None: half the live price.
    batch_input_price: float | None = None
    batch_output_price: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    timeout: float = 120.0
    source: str = ""
    # Which of the gateway's transports sends this provider's requests (prbj.llm.transport).
    transport: str = LITELLM_TRANSPORT
    # Whether the model returns token log-probabilities (`logprobs = true|false` in a profile); None: not
    # stated (see supports_logprobs).
    logprobs: bool | None = None
    # Profile names and model ids this profile takes over from once they retire (prbj.llm.lifecycle).
    replaces: tuple[str, ...] = ()
    # The parameters as settled for this run (prbj.llm.params.with_params): what is sent, changes, warnings.
    settled: SettledParams | None = None
    # What a 404 from this provider adds to its cause: the model's retirement date, the profile to use instead.
    not_found_note: str = ""
    # The limits (field names above) set for this run by a flag (--rpm, ...), not by the profile.
    flagged: frozenset[str] = frozenset()
    # Where what it is sent goes, as its profile states it (prbj.llm.routing): whether the provider keeps it
    # ("standard", the default: most APIs keep requests for abuse monitoring) or not ("zero"), and whether it
    # runs on machines of the user's own (in-process models, a self-hosted server). Never read from the URL.
    retention: Retention = "standard"
    local: bool = False
    # Why what a profile stated above does not hold for this run: --api-base sent it elsewhere, or the profile
    # extends one that stated it and changed its endpoint or model.
    claims_note: str = ""

    @property
    def family(self) -> str:
        return self.model.split("/", 1)[0] if "/" in self.model else "openai"

    @property
    def decodes_greedily(self) -> bool:
        """An in-process model (`hf-local:`, or a profile naming one): prbj.local.generator decodes greedily,
        so asking again gives the same reply whatever the temperature."""
        return self.transport != LITELLM_TRANSPORT

    @property
    def runs_here(self) -> bool:
        """In-process (its transport is not a remote call) or stated local in its profile."""
        return self.local or self.decodes_greedily

    @property
    def supports_logprobs(self) -> bool | None:
        """What the profile says; else False for Anthropic (its API has no log-probabilities), None (unknown:
        ask, and judge without them where none come back). LiteLLM 1.110's model map has no such field."""
        if self.logprobs is not None:
            return self.logprobs
        return False if self.family == "anthropic" else None

    def with_api_base(self, api_base: str | None) -> ProviderSpec:
        return self if api_base is None else replace(self, api_base=check_api_base(api_base))

    def sent_elsewhere(self, api_base: str | None) -> ProviderSpec:
        """This profile with its requests sent to `api_base` (--api-base): what the profile states about
        retention and locality vouches for its own endpoint only, so at another one it is dropped (standard
        retention, not local) and a note says why, and how to state it for the new address."""
        moved = self.with_api_base(api_base)
        if (
            api_base is None
            or moved.api_base == self.api_base
            or not (self.local or self.retention == "zero")
        ):
            return moved
        claim = "local = true" if self.local else 'retention = "zero"'
        where = redact_url(self.api_base) if self.api_base else "the provider's own endpoint"
        return replace(
            moved,
            local=False,
            retention="standard",
            claims_note=(
                f"its profile states {claim} for {where} only, and --api-base {redact_url(api_base)} sends it "
                f"elsewhere; if that holds there too, state it in a profile of your own in --providers-dir: "
                f'extends = "{self.name}", api_base = "{redact_url(api_base)}", {claim}'
            ),
        )

    @property
    def redacted_api_base(self) -> str | None:
        """The base URL as it may be written to run.json or printed: credentials blanked."""
        return redact_url(self.api_base)

    def api_key(self) -> str | None:
        """The key from the environment; a one-line error naming the variable when it is required and unset."""
        value = os.environ.get(self.api_key_env) if self.api_key_env else None
        if not value and self.api_key_env and self.api_key_required:
            raise MissingKey(self.api_key_env, self.name)
        if not value and self.family == "openai" and self.api_base:
            # The OpenAI client refuses to send a request without a key; self-hosted servers ignore it.
            return KEYLESS_PLACEHOLDER
        return value or None

    def key_is_set(self) -> bool:
        return bool(self.api_key_env and os.environ.get(self.api_key_env))

    def check_priced(self) -> None:
        """A paid provider with no known price would make the budget meaningless: refuse it."""
        if (
            self.paid
            and (self.input_price is None or self.output_price is None)
            and self.source == ADHOC_SOURCE
        ):
            # A litellm:<model-id> has no profile to set a price in: name the two ways out.
            raise ConfigError(
                f"provider {self.name!r}: LiteLLM knows no price for {self.model}; a model you serve yourself "
                "needs --api-base URL (it is then free, no key needed), a paid one a profile in --providers-dir "
                "with [price] input and output (USD per million tokens)"
            )
        if self.paid and (self.input_price is None or self.output_price is None):
            raise ConfigError(
                f"provider {self.name!r} ({self.model}): no price known for a paid model; set [price] input and "
                f"output (USD per million tokens) in {self.source or 'its profile'}, or paid = false"
            )

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        if not self.paid:
            return 0.0
        self.check_priced()
        return prompt_tokens * (self.input_price or 0.0) + completion_tokens * (self.output_price or 0.0)


def bundled_providers_dir() -> Path:
    """Profiles inside the installed wheel, or the repository's providers/ folder in a source checkout."""
    packaged = Path(str(resources.files("prbj"))) / "_providers"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "providers"


def _profile_folders(user_dir: Path | None) -> list[Path]:
    """The bundled folder, then the user's (whose profiles win)."""
    folders = [bundled_providers_dir()]
    user_dir = user_dir or (Path(os.environ[PROVIDERS_ENV]) if os.environ.get(PROVIDERS_ENV) else None)
    if user_dir is not None:
        if not user_dir.is_dir():
            raise ConfigError(f"--providers-dir {user_dir}: no such folder")
        folders.append(user_dir)
    return folders


def _profile_files(user_dir: Path | None) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for folder in _profile_folders(user_dir):
        for path in sorted(folder.glob("*.toml")):
            files[path.stem] = path  # later folders override earlier ones
    return files


def list_providers(user_dir: Path | None = None, *, resolve_prices: bool = True) -> list[ProviderSpec]:
    """Every profile, by name. Without `resolve_prices`, a "litellm" price stays unresolved (price_source
    "litellm", prices None): listing profiles then never imports LiteLLM, which takes seconds."""
    return [
        load_profile(name, path, user_dir=user_dir, resolve_prices=resolve_prices)
        for name, path in sorted(_profile_files(user_dir).items())
    ]


def unknown_provider_message(spec: str, known: list[str], user_dir: Path | None = None) -> str:
    """The one-line error for a provider name that is not a profile: the profile that replaced it when it was
    retired, else the closest names."""
    from prbj.data.names import did_you_mean

    retired = retired_profile_message(spec, user_dir)
    if retired is not None:
        return retired
    return (
        f"--provider {spec!r}: no such provider profile;{did_you_mean(spec, known)} known: {', '.join(known)}"
    )


def retired_profile_message(spec: str, user_dir: Path | None = None) -> str | None:
    """For a profile name that a profile `replaces` (a model retired with its profile): which one to use."""
    if spec in _profile_files(user_dir):
        return None
    for successor in list_providers(user_dir, resolve_prices=False):
        if spec in successor.replaces:
            models = [m for m in successor.replaces if "/" in m]
            old = f" (model {models[0]})" if models else ""
            return (
                f"--provider {spec!r}: this profile was retired with its model{old}, which its provider no "
                f"longer serves; use --provider {successor.name} ({successor.model}) instead"
            )
    return None


def profile_names(user_dir: Path | None = None) -> list[str]:
    return sorted(_profile_files(user_dir))


def is_provider_name(spec: str, user_dir: Path | None = None) -> bool:
    return spec.startswith((LITELLM_PREFIX, LOCAL_PREFIX)) or spec in _profile_files(user_dir)


def check_provider_name(spec: str, user_dir: Path | None = None) -> None:
    """A one-line ConfigError when `spec` names no provider (a profile, litellm:<id> or hf-local:<path>);
    nothing is loaded, priced or key-checked."""
    if not is_provider_name(spec, user_dir):
        raise ConfigError(unknown_provider_message(spec, profile_names(user_dir), user_dir))


def resolve_provider(spec: str, user_dir: Path | None = None, api_base: str | None = None) -> ProviderSpec:
    if spec.startswith(LITELLM_PREFIX):
        provider = _adhoc(spec[len(LITELLM_PREFIX) :], self_hosted=api_base is not None)
    elif spec.startswith(LOCAL_PREFIX):
        raise ConfigError(
            f"--provider {spec}: in-process models are not available for this option "
            f"(internal: resolve them with prbj.local.provider.resolve_provider)"
        )
    else:
        files = _profile_files(user_dir)
        if spec not in files:
            raise ConfigError(unknown_provider_message(spec, sorted(files), user_dir))
        return load_profile(spec, files[spec], user_dir=user_dir).sent_elsewhere(api_base)
    return provider.with_api_base(api_base)


def _adhoc(model: str, *, self_hosted: bool = False) -> ProviderSpec:
    """A model id without a profile. With --api-base and an id LiteLLM has no price for, it is taken to be a
    self-hosted server (vLLM, SGLang, llama.cpp): free, and the key optional."""
    if not model:
        raise ConfigError(
            "--provider litellm:<model-id>: no model id given (e.g. litellm:gemini/gemini-3-flash-preview)"
        )
    family = model.split("/", 1)[0] if "/" in model else "openai"
    spec = ProviderSpec(
        name=f"{LITELLM_PREFIX}{model}",
        model=model,
        api_key_env=_KEY_ENV_BY_PREFIX.get(family),
        params={"max_tokens": 1024},
        source=ADHOC_SOURCE,
    )
    priced = _with_litellm_price(spec, required=False)
    if self_hosted and priced.price_source == "unknown":
        return replace(priced, paid=False, api_key_required=False, input_price=0.0, output_price=0.0)
    return priced


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{path}: not a readable TOML provider profile ({err})") from None


def _base_profile_path(base: str, path: Path, user_dir: Path | None) -> Path:
    """The file `extends = base` names: the last folder's profile of that name other than `path` itself, so
    that a user's gemini-3-flash.toml may extend the bundled gemini-3-flash."""
    candidates = [
        folder / f"{base}.toml"
        for folder in _profile_folders(user_dir)
        if (folder / f"{base}.toml").is_file() and (folder / f"{base}.toml").resolve() != path.resolve()
    ]
    if not candidates:
        from prbj.data.names import did_you_mean

        known = sorted(_profile_files(user_dir))
        raise ConfigError(
            f"{path}: field 'extends': no provider profile {base!r};{did_you_mean(base, known)} "
            f"known: {', '.join(known)}"
        )
    return candidates[-1]


def _merged_raw(path: Path, user_dir: Path | None, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The profile's fields with those of the profile it extends beneath them ([price] and [params] merged
    key by key): a partial profile states only what changes. Its own `extends`, if any, is kept (it names the
    profile's source). What a base states about where data goes (`local`, `retention`) vouches for the base's
    endpoint and model: a profile that changes either inherits neither, unless it states them itself
    (CLAIMS_DROPPED names why in the merged fields)."""
    raw = _read_toml(path)
    base = raw.get("extends")
    if base is None:
        return raw
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{path}: field 'extends': expected a profile name such as \"gemini-3-flash\"")
    base_path = _base_profile_path(base, path, user_dir)
    if base_path.resolve() in seen:
        raise ConfigError(f"{path}: field 'extends': profiles extend each other in a circle")
    merged = _merged_raw(base_path, user_dir, (*seen, path.resolve()))
    changed = [key for key in ("api_base", "model") if key in raw and raw[key] != merged.get(key)]
    inherited = [key for key in ("local", "retention") if key in merged and key not in raw]
    claimed = merged.get("local") is True or merged.get("retention") == "zero"
    if changed and inherited and claimed:
        stated = "local = true" if merged.get("local") is True else 'retention = "zero"'
        for claim in inherited:
            merged.pop(claim)
        merged[CLAIMS_DROPPED] = (
            f"{path} extends {base} and changes its {' and '.join(changed)}, so the {stated} stated for {base} "
            f"does not carry over: state it in {path} if it holds there"
        )
    if "local" in raw or "retention" in raw:
        merged.pop(CLAIMS_DROPPED, None)
    for key, value in raw.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def load_profile(
    name: str, path: Path, *, user_dir: Path | None = None, resolve_prices: bool = True
) -> ProviderSpec:
    raw = _merged_raw(path, user_dir, ())
    extends = raw.pop("extends", None)
    claims_note = str(raw.pop(CLAIMS_DROPPED, ""))
    unknown = set(raw) - _KNOWN_KEYS
    if unknown:
        raise ConfigError(
            f"{path}: field '{sorted(unknown)[0]}': unknown; expected {', '.join(sorted(_KNOWN_KEYS))}"
        )
    model = raw.get("model")
    if model is not None and not isinstance(model, str):
        raise ConfigError(
            f"{path}: field 'model': expected a string (a LiteLLM model id such as "
            f"gemini/gemini-3-flash-preview), got {model!r}"
        )
    if not model:
        raise ConfigError(
            f"{path}: field 'model': missing (a LiteLLM model id such as gemini/gemini-3-flash-preview)"
        )
    price = _table(raw, "price", path)
    params = _table(raw, "params", path)
    routed = sorted(ROUTING_PARAMS & set(params))
    if routed:
        raise ConfigError(
            f"{path}: field 'params.{routed[0]}': where requests go is the profile's api_base (what "
            f"--personal-data and the cache key read), never a request parameter: set api_base instead"
        )
    max_tokens = params.get("max_tokens")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise ConfigError(
            f"{path}: field 'params.max_tokens': expected a whole number >= 1, got {max_tokens!r}"
        )
    concurrency = raw.get("max_concurrency")
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise ConfigError(
            f"{path}: field 'max_concurrency': expected a whole number >= 1, got {concurrency!r}"
        )
    spec = ProviderSpec(
        name=name,
        model=raw["model"],
        api_key_env=_optional_string(raw, "api_key_env", path),
        api_key_required=_flag(raw, "api_key_required", path, default=True),
        api_base=_profile_api_base(raw, path),
        paid=_flag(raw, "paid", path, default=True),
        rpm=_positive(raw, "rpm", path),
        tpm=_positive(raw, "tpm", path),
        input_tpm=_positive(raw, "input_tpm", path),
        output_tpm=_positive(raw, "output_tpm", path),
        max_concurrency=concurrency,
        input_price=_price(price, "input", path),
        output_price=_price(price, "output", path),
        batch_input_price=_price(price, "batch_input", path),
        batch_output_price=_price(price, "batch_output", path),
        params=params,
        timeout=float(_positive(raw, "timeout", path) or 120.0),
        logprobs=_optional_flag(raw, "logprobs", path),
        replaces=_names(raw, "replaces", path),
        retention=_retention(raw, path),
        local=_flag(raw, "local", path, default=False),
        # The file a profile was read from, and the profile it extends when it is partial.
        source=f"{path} (extends {extends})" if extends is not None else str(path),
        claims_note=claims_note,
    )
    if TAKE_LITELLM_PRICE in (price.get("input"), price.get("output")):
        if not resolve_prices:
            return replace(spec, price_source=TAKE_LITELLM_PRICE)
        spec = _with_litellm_price(spec, required=spec.paid)
    return spec


def _table(raw: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: field '{key}': expected a table ([{key}] section), got {value!r}")
    return dict(value)


def _optional_string(raw: dict[str, Any], key: str, path: Path) -> str | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{path}: field '{key}': expected a string, got {value!r}")
    return value


def _retention(raw: dict[str, Any], path: Path) -> Retention:
    value = raw.get("retention", "standard")
    if value not in RETENTIONS:
        raise ConfigError(
            f'{path}: field \'retention\': expected "zero" or "standard" (what the provider keeps of what it is '
            f"sent), got {value!r}"
        )
    return cast(Retention, value)


def _names(raw: dict[str, Any], key: str, path: Path) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ConfigError(f"{path}: field '{key}': expected a list of names, got {value!r}")
    return tuple(value)


def _flag(raw: dict[str, Any], key: str, path: Path, *, default: bool) -> bool:
    # bool("no") is True: anything but a TOML boolean would silently mean the opposite of what was written.
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{path}: field '{key}': expected true or false, got {value!r}")
    return value


def _optional_flag(raw: dict[str, Any], key: str, path: Path) -> bool | None:
    return None if raw.get(key) is None else _flag(raw, key, path, default=False)


def _profile_api_base(raw: dict[str, Any], path: Path) -> str | None:
    value = _optional_string(raw, "api_base", path)
    return None if value is None else check_api_base(value, option=f"{path}: field 'api_base':")


def _is_number(value: Any) -> bool:
    # TOML reads nan and inf as floats; either would make a rate limit or the budget meaningless.
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _positive(raw: dict[str, Any], key: str, path: Path) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if not _is_number(value) or value <= 0:
        raise ConfigError(f"{path}: field '{key}': expected a positive number (finite), got {value!r}")
    return float(value)


def _price(price: dict[str, Any], key: str, path: Path) -> float | None:
    value = price.get(key)
    if value is None or value == TAKE_LITELLM_PRICE:
        return None
    if not _is_number(value) or value < 0:
        raise ConfigError(
            f"{path}: field 'price.{key}': expected USD per million tokens (a finite number >= 0) or "
            f'"litellm", got {value!r}'
        )
    return float(value) / _PER_MILLION


def _with_litellm_price(spec: ProviderSpec, *, required: bool) -> ProviderSpec:
    from prbj.llm.litellm_setup import litellm_price

    found = litellm_price(spec.model)
    if found is None:
        if required:
            raise ConfigError(
                f"{spec.source}: LiteLLM's price map has no entry for {spec.model!r}; an unknown id would cost "
                f"$0.00 silently. Pin a model id it knows or set [price] input/output explicitly."
            )
        return replace(spec, paid=spec.paid, price_source="unknown")
    return replace(
        spec,
        input_price=spec.input_price if spec.input_price is not None else found[0],
        output_price=spec.output_price if spec.output_price is not None else found[1],
        price_source="litellm",
    )


class MissingKey(ConfigError):
    """A provider's API key is not in the environment (exit 2); `of_several` names every one a run lacks."""

    def __init__(self, env: str, provider: str) -> None:
        super().__init__(
            f"provider {provider!r} needs an API key: set the environment variable {env} (or pass --env-file "
            f"with a line {env}=...)"
        )
        self.env = env
        self.provider = provider

    @staticmethod
    def of_several(missing: Sequence[MissingKey]) -> ConfigError:
        """One error for every key a run lacks, so that one look sets them all."""
        if len({(key.env, key.provider) for key in missing}) == 1:
            return missing[0]
        keys = ", ".join(_by_variable((key.env, key.provider) for key in missing))
        return ConfigError(
            f"API keys not set: {keys}; set these environment variables (or pass --env-file with a line NAME=... "
            "for each)"
        )


def missing_keys(specs: Iterable[ProviderSpec]) -> list[str]:
    """`VARIABLE (providers)` for every key a real run of these providers needs and the environment lacks: what
    a dry run (which sends nothing, so needs no key) says before the user pays for a run that would fail."""
    lacking = {
        (spec.api_key_env, spec.name)
        for spec in specs
        if spec.api_key_env and spec.api_key_required and not spec.key_is_set()
    }
    return _by_variable(sorted(lacking))


def _by_variable(lacking: Iterable[tuple[str, str]]) -> list[str]:
    """`VARIABLE (providers)` for the variables of these (variable, provider) pairs: each variable and each of
    its providers named once, in the order they first come."""
    named: dict[str, dict[str, None]] = {}
    for env, provider in lacking:
        named.setdefault(env, {})[provider] = None
    return [f"{env} ({', '.join(providers)})" for env, providers in named.items()]
