"""`prbj bon sample`: a policy writes N answers per question, each through the gateway as its own cached call.

Sample i of a question is the request (policy prompt, sampling parameters, sample_index=i). The sample index is
part of the cache key, so asking again for N=128 after N=16 reuses samples 0-15 and buys only 16-127. Where the
provider honours a seed (vLLM, OpenAI, Gemini, in-process models) sample i is also sent with seed SEED + i, so
the same samples come back even without the cache.

The policy sees the question and the user's past posts ranked by relevance to it (top k). The official setup
ranks them with Contriever; prbj ranks them with BM25 offline (prbj.context.retrieval), so the k posts shown can differ.
The gold rubric is never shown: the prompt is built from `Pair.view("profile")`, which cannot read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import polars as pl

from prbj.context.profile_text import format_profile
from prbj.data.schema import Pair
from prbj.errors import ConfigError
from prbj.llm.gateway import Gateway, LLMRequest, LLMResult
from prbj.llm.params import Asked
from prbj.llm.providers import ProviderSpec
from prbj.llm.reading import read_reply
from prbj.prompts import Template, builtin, combined_sha
from prbj.runs.engine import run_jobs

SAMPLE_SCHEMA: dict[str, Any] = {
    "pair_id": pl.String,
    "subset": pl.String,
    "sample_index": pl.Int64,
    "text": pl.String,
    "status": pl.String,
    "tokens": pl.Int64,
    "prompt_tokens": pl.Int64,
    "cost": pl.Float64,
    "cached": pl.Boolean,
    "error": pl.String,
    "cause": pl.String,
}
RETRIEVAL_NOTE = "BM25 over the profile posts (offline); the official setup ranks them with Contriever"


# The sampling settings of `prbj bon sample`, with the option that sets each.
SAMPLING_OPTIONS = {"temperature": "--temperature", "top_p": "--top-p", "max_tokens": "--max-tokens"}


@dataclass(frozen=True)
class SamplingSettings:
    """Defaults are the official BoN setup (Qwen2.5-0.5B-Instruct policy): N=128, T=1.0, top_p=0.9, k=10,
    at most 512 new tokens. `typed` names the settings the user gave on the command line: the provider rules
    never change those (prbj.llm.params), while a default a provider rejects is changed and the change printed."""

    n: int = 128
    k_profile: int = 10
    temperature: float = 1.0
    top_p: float = 0.9
    max_tokens: int = 512
    seed: int | None = 42
    typed: frozenset[str] = frozenset()

    def asked(self) -> dict[str, Asked]:
        """What the policy's provider is asked for, with where each value came from; sample i sends seed + i."""
        asked = {
            name: Asked(getattr(self, name), option, "option")
            if name in self.typed
            else Asked(getattr(self, name), "BoN default", "default")
            for name, option in SAMPLING_OPTIONS.items()
        }
        if self.seed is not None:
            asked["seed"] = Asked(self.seed, "--seed, + sample index", "default")
        return asked

    def params(self, index: int) -> dict[str, Any]:
        """The per-sample parameters (the rest are the provider's, settled from `asked`)."""
        return {} if self.seed is None else {"seed": self.seed + index}


def refuse_greedy_samples(provider: ProviderSpec, settings: SamplingSettings) -> None:
    """An in-process `hf-local:` model decodes greedily (prbj.local.generator): asked for N samples at a
    temperature, it would return one answer N times and best-of-N would pick among copies. Refused before any
    model is loaded, naming the way to sample it."""
    if provider.decodes_greedily and settings.n > 1 and settings.temperature > 0:
        raise ConfigError(
            f"--policy {provider.name}: in-process models decode greedily, so its {settings.n} samples of a "
            "question would be one answer repeated; serve the model (vLLM, SGLang) and sample it with "
            "--policy litellm:openai/<model> --api-base http://127.0.0.1:8000/v1 (or pass --n 1)"
        )


class Policy:
    """Builds the policy's requests: one per (question, sample index)."""

    def __init__(
        self,
        provider: ProviderSpec,
        settings: SamplingSettings,
        *,
        system: Template | None = None,
        user: Template | None = None,
    ) -> None:
        refuse_greedy_samples(provider, settings)
        self.provider = provider
        self.settings = settings
        self.system = system or builtin("bon_policy_system")
        self.user = user or builtin("bon_policy_user")

    def prompt(self, pair: Pair) -> str:
        view = pair.view("profile")  # question and posts only: this view cannot read the rubric
        return self.user.render(
            {"question": view.question, "profile": format_profile(view, self.settings.k_profile)}
        )

    def request(self, pair: Pair, index: int) -> LLMRequest:
        return LLMRequest.chat(
            self.system.text,
            self.prompt(pair),
            params=self.settings.params(index),
            template_hash=combined_sha(self.system, self.user),
            sample_index=index,
            purpose="policy",
        )

    async def answer(self, gateway: Gateway, pair: Pair, index: int) -> LLMResult:
        """Sample `index` for `pair`: one cached call."""
        return await gateway.call(self.provider, self.request(pair, index))

    def describe(self) -> dict[str, Any]:
        settings = {k: v for k, v in asdict(self.settings).items() if k != "typed"}
        # What was sent: a setting the provider does not take is recorded as not sent (None).
        sent = self.provider.params
        settled = self.provider.settled
        if settled is not None:
            settings |= {name: sent.get(name) for name in SAMPLING_OPTIONS}
            if "seed" in settled.unsent:
                settings["seed"] = None
        return {
            "provider": self.provider.name,
            "model": self.provider.model,
            "api_base": self.provider.redacted_api_base,
            **settings,
            **({"params": settled.record()} if settled is not None else {}),
            "profile_ranking": RETRIEVAL_NOTE,
            "templates": {t.name: t.sha for t in (self.system, self.user)},
        }


async def _sample_one(policy: Policy, gateway: Gateway, pair: Pair, index: int) -> dict[str, Any]:
    result = await policy.answer(gateway, pair, index)
    # An answer cut at the policy's output cap is still its answer (as in the official sampling); one with no
    # visible text (the cap spent on hidden reasoning) is `truncated`, a refusal is `refused`: no answer.
    reading = read_reply(result, lambda text: text if text.strip() else None, "answer")
    return {
        "pair_id": pair.id,
        "subset": pair.category,
        "sample_index": index,
        "text": reading.value,
        "status": reading.status,
        "tokens": result.completion_tokens,
        "prompt_tokens": result.prompt_tokens,
        "cost": result.cost_usd,
        "cached": result.cached,
        "error": reading.error,
        "cause": reading.cause,
    }


async def sample_answers(
    policy: Policy,
    gateway: Gateway,
    questions: Sequence[Pair],
    *,
    concurrency: int,
    show_progress: bool,
) -> pl.DataFrame:
    """One row per question × sample index, in that order; failed calls keep their status and no text."""
    jobs = [
        partial(_sample_one, policy, gateway, pair, index)
        for pair in questions
        for index in range(policy.settings.n)
    ]
    rows = await run_jobs(
        jobs,
        concurrency=concurrency,
        description="sampling",
        show_progress=show_progress,
        admitted=gateway.in_flight_allowed,
    )
    return pl.DataFrame(rows, schema=SAMPLE_SCHEMA, orient="row")


class DemoPolicy(Policy):
    """The offline demo policy (prbj.bon.demo): writes each sample from the user's own posts, without a call."""

    def __init__(self, settings: SamplingSettings) -> None:
        from prbj.bon.demo import demo_provider

        super().__init__(demo_provider("policy"), settings)

    async def answer(self, gateway: Gateway, pair: Pair, index: int) -> LLMResult:
        from prbj.bon.demo import demo_answer

        text = demo_answer(pair, index, k_profile=self.settings.k_profile, seed=self.settings.seed)
        return LLMResult(status="ok", text=text, completion_tokens=len(text.split()))

    def describe(self) -> dict[str, Any]:
        from prbj.bon.demo import DEMO_NOTE

        return {**super().describe(), "note": DEMO_NOTE}
