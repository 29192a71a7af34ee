"""Turn a `--provider` value into a ProviderSpec ready to call on a run's gateway, in-process models included.

`hf-local:<path-or-id>` (and a profile whose model id starts with `prbj-local/`) is answered by the gateway's
`local` transport, which this registers; everything else is a LiteLLM provider (prbj.llm.providers). Price and
key are checked here, once.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from prbj.extras import LOCAL
from prbj.llm import providers
from prbj.llm.cache import ResponseCache
from prbj.llm.gateway import Gateway
from prbj.llm.providers import LOCAL_PREFIX, ProviderSpec
from prbj.local.generator import DEFAULT_MAX_BATCH, DEFAULT_MAX_NEW_TOKENS, MODEL_PREFIX
from prbj.local.model_files import fingerprint, locate
from prbj.local.models import LOCAL_TRANSPORT, local_models


def resolve_provider(
    spec: str,
    *,
    providers_dir: Path | None,
    api_base: str | None,
    gateway: Gateway,
) -> ProviderSpec:
    """The provider `spec` names, priced, with its transport registered on `gateway` (its key is looked for by
    the caller, once the run's routing allows it). Configuration errors are one-line ConfigErrors."""
    if spec.startswith(LOCAL_PREFIX):
        # api_base means nothing to a local model, but it has always been part of the spec (and so of the
        # cache key): kept, so that existing caches still hit.
        provider = local_provider(spec[len(LOCAL_PREFIX) :], memo=gateway.cache).with_api_base(api_base)
    else:
        provider = providers.resolve_provider(spec, providers_dir, api_base)
        if provider.model.startswith(MODEL_PREFIX):  # a profile naming an in-process model
            LOCAL.require(f"-p {spec}")
            provider = replace(provider, transport=LOCAL_TRANSPORT)
    if provider.transport == LOCAL_TRANSPORT:
        local_models(gateway)
    provider.check_priced()
    return provider


def local_provider(path_or_id: str, *, memo: ResponseCache | None = None) -> ProviderSpec:
    """A free provider for an in-process causal LM; the path is checked now so that a typo fails before any
    call. `memo` remembers file hashes, so that a rerun does not hash the weights again."""
    # Before the model is looked for: a hub id is not downloaded for a run that could not load it.
    LOCAL.require(f"-p {LOCAL_PREFIX}{path_or_id}")
    source = locate(path_or_id, option="hf-local", gguf=True)
    weights = fingerprint(source, memo)
    return ProviderSpec(
        name=f"{LOCAL_PREFIX}{path_or_id}",
        # An absolute location, so that the cache key does not depend on the directory prbj runs from.
        model=f"{MODEL_PREFIX}{source.label}",
        api_key_env=None,
        api_key_required=False,
        paid=False,
        max_concurrency=DEFAULT_MAX_BATCH,
        input_price=0.0,
        output_price=0.0,
        price_source="local",
        # The fingerprint rides along as a parameter so that it is part of every cache key (the local
        # transport ignores it): new weights at the same path are never answered from the cache.
        params={"max_tokens": DEFAULT_MAX_NEW_TOKENS, "weights_fingerprint": weights},
        # CPU generation of a batch can take minutes; a timeout would only make it start over.
        timeout=3600.0,
        source="--provider",
        transport=LOCAL_TRANSPORT,
    )
