"""Scalar reward models: Hugging Face sequence-classification checkpoints (`--provider hf:<path-or-hub-id>`).

Each answer is scored on its own as the assistant turn of a conversation whose user turn is the question (plus,
in the 'profile' context, the user's profile: on Personalized RewardBench the --profile-k (10) most relevant past
posts, on other benchmarks whatever the user's profile holds, rendered by prbj.context.profile_text; in the
'synthesized' context, the persona written from the user's earlier choices, prbj.context.synthesizer). A question
that is a conversation (several turns) is scored as that conversation, the profile added to its last user turn.
Scores go through the run's gateway (`Gateway.cached`: its cache, with identical requests computed once); misses
from all pairs being judged at once are gathered into length-sorted batches and scored on the model's worker
thread (prbj.local.models), so the event loop (progress bar, Ctrl-C) stays free. torch and transformers are
imported only when such a judge is built.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prbj.context.profile_text import DEFAULT_PROFILE_K, ProfileOrder, about_user
from prbj.context.retrieval import rank_profile
from prbj.context.synthesizer import shown_persona
from prbj.data.schema import Context, JudgeView
from prbj.errors import ConfigError
from prbj.extras import LOCAL
from prbj.judges.base import Judgment, PairTask, PointwiseJudge, ScoreFailure
from prbj.judges.official import official_posts, official_user_turn
from prbj.llm.cache import cache_key
from prbj.llm.gateway import Gateway
from prbj.local.model_files import ModelSource, download, fingerprint, locate
from prbj.local.models import ItemScore, LocalModelError, ScalarOptions, Scorer, local_models

if TYPE_CHECKING:
    from prbj.local.batcher import MicroBatcher
    from prbj.local.scalar_model import ScalarModel

__all__ = ["HF_PREFIX", "ItemScore", "ScalarJudge", "ScalarOptions", "conversation", "make_scalar_judge"]

HF_PREFIX = "hf:"
DTYPE_CHOICES = ("auto", "bf16", "fp16", "fp32")
DEVICE_CHOICES = ("auto", "cpu", "cuda")
SCALAR_CONTEXTS: tuple[str, ...] = ("none", "profile", "swapped-profile", "synthesized")
PROFILE_POSTS = DEFAULT_PROFILE_K
# Bumped whenever the way a score is computed changes (truncation, pooling, turn layout), so that old cache
# entries are missed rather than reused.
SCORER_VERSION = 1
TRUNCATION = "middle"
PROFILE_TURN = "{question}\n\nPosts this user wrote before, most relevant first:\n{posts}"
ABOUT_TURN = "{question}\n\nWhat is known about this user:\n{about}"


def conversation(
    view: JudgeView,
    answer: str,
    *,
    scalar_input: str = "chat",
    profile_k: int = PROFILE_POSTS,
    profile_order: ProfileOrder = "similar",
) -> list[dict[str, str]]:
    """The messages a reward model scores: the question's user turn (or the conversation it is), one assistant
    turn (the answer). With the official input the profile turn is the official BoN/PPO one: question and
    profile concatenated as is."""
    # The turns before the last user turn, when the question is a conversation.
    earlier = [{"role": role, "content": content} for role, content in view.turns[:-1]]
    question = view.turns[-1][1] if view.turns else view.question
    user = question
    profile = view.user_profile
    # A swapped view holds another user's profile: the profile-reliance control of a scalar RM.
    if view.context in ("profile", "swapped-profile") and profile.only_posts and profile.posts:
        posts = rank_profile(view.question, profile.posts, k=profile_k)
        if scalar_input == "official":
            user = official_user_turn(question, official_posts(posts, profile_k))
        else:
            listing = "\n".join(f"{n}. {post.text}" for n, post in enumerate(posts, start=1))
            user = PROFILE_TURN.format(question=question, posts=listing)
    elif view.context == "synthesized" or (
        view.context in ("profile", "swapped-profile") and not profile.only_posts
    ):
        # A synthesized persona is shown as a dataset's persona would be (profile_text.about_user).
        about = (
            f"Persona: {shown_persona(view)}"
            if view.context == "synthesized"
            else about_user(view.question, profile, profile_k, profile_order)
        )
        # The official input concatenates query and profile with nothing between them.
        user = (
            official_user_turn(question, about)
            if scalar_input == "official"
            else ABOUT_TURN.format(question=question, about=about)
        )
    return [*earlier, {"role": "user", "content": user}, {"role": "assistant", "content": answer}]


class ScalarJudge(PointwiseJudge):
    """A sequence-classification reward model; correct iff score(chosen) > score(rejected), ties apart."""

    def __init__(
        self,
        ref: str,
        scorer: Scorer,
        *,
        fingerprint: str,
        gateway: Gateway,
        context: Context = "none",
        profile_k: int = PROFILE_POSTS,
        profile_order: ProfileOrder = "similar",
    ) -> None:
        self.name = f"{HF_PREFIX}{ref}"
        self.ref = ref
        self.context = context
        self.profile_k = profile_k
        self.profile_order = profile_order
        self.fingerprint = fingerprint
        self.gateway = gateway
        self._scorer = scorer
        self.template_sha256 = hashlib.sha256(scorer.model.chat_template.encode()).hexdigest()
        # A hub id names the model; a local folder's name says nothing, its fingerprint says it all.
        self._model_id = None if Path(ref).expanduser().exists() else ref

    @property
    def model(self) -> ScalarModel:
        return self._scorer.model

    @property
    def batcher(self) -> MicroBatcher[list[dict[str, str]], ItemScore]:
        return self._scorer.batcher

    def describe(self) -> dict[str, Any]:
        model = self.model
        return {
            **super().describe(),
            "model": self.ref,
            "weights": self.fingerprint,
            "dtype": model.dtype_name,
            "device": model.device,
            "max_length": model.max_length,
            "batch_tokens": model.batch_tokens,
            "truncation": self.truncation,
            "scalar_input": self.scalar_input,
            "chat_template_sha256": self.template_sha256,
            "profile_posts": self.profile_k if self.context in ("profile", "swapped-profile") else 0,
            "scorer_version": SCORER_VERSION,
        }

    @property
    def scalar_input(self) -> str:
        return self.model.scalar_input

    @property
    def truncation(self) -> str:
        return "right" if self.scalar_input == "official" else TRUNCATION

    def cache_key(self, messages: list[dict[str, str]]) -> str:
        model = self.model
        # The official input is named in the key only when used, so prbj's default keys stay as they were.
        official = {"scalar_input": "official"} if self.scalar_input == "official" else {}
        return cache_key(
            "scalar",
            model=self._model_id,
            weights=self.fingerprint,
            messages=messages,
            template=self.template_sha256,
            max_length=model.max_length,
            dtype=model.dtype_name,
            truncation=self.truncation,
            scorer_version=SCORER_VERSION,
            **official,
        )

    async def score(self, view: JudgeView, answers: Sequence[str]) -> list[float]:
        return [item.score for item in await self.score_items(view, answers)]

    async def score_items(self, view: JudgeView, answers: Sequence[str]) -> list[ItemScore]:
        """Each answer's score through the gateway's cache; the misses of every pair being judged at once are
        scored together in the next batch (so all answers are asked for before any is awaited)."""

        def scored(answer: str) -> list[dict[str, str]]:
            return conversation(
                view,
                answer,
                scalar_input=self.scalar_input,
                profile_k=self.profile_k,
                profile_order=self.profile_order,
            )

        try:
            stored = await asyncio.gather(*(self._cached_score(scored(a)) for a in answers))
        except (
            LocalModelError
        ) as err:  # the model cannot run (e.g. a Ray actor cannot load it): this judge fails
            raise ScoreFailure("api_error", str(err)) from None
        return [ItemScore(**value) for value in stored]

    async def _cached_score(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        async def compute() -> dict[str, Any]:
            return asdict(await self._scorer.score(messages))

        return await self.gateway.cached(self.cache_key(messages), compute)

    async def judge(self, task: PairTask) -> Judgment:
        try:
            items = await self.score_items(task.view, task.pair.candidates)
        except ScoreFailure as failure:
            return self._judgment(task, status=failure.status, error=failure.message)
        return self._scored(
            task, [item.score for item in items], truncated=any(item.truncated for item in items)
        )


def make_scalar_judge(
    ref: str,
    *,
    context: Context,
    options: ScalarOptions,
    gateway: Gateway,
    seed: int,
    profile_k: int = PROFILE_POSTS,
    profile_order: ProfileOrder = "similar",
) -> ScalarJudge:
    """The judge for `--provider hf:<ref>`; configuration errors (missing folder, offline hub id, not a reward
    model, remote code not trusted) are raised here, before any pair is judged. The model is loaded once per
    gateway for all judges that share it (e.g. one per context); its scores go through the gateway's cache."""
    del seed  # a reward model's score is deterministic; the seed is every judge factory's argument
    ref = ref.strip()
    if not ref:
        raise ConfigError("--provider hf:<path-or-hub-id>: the model is missing after 'hf:'")
    if context not in SCALAR_CONTEXTS:
        raise ConfigError(
            f"--provider hf:{ref}: context {context!r} is not supported by scalar reward models "
            f"(supported: {', '.join(SCALAR_CONTEXTS)})"
        )
    # Before the model is looked for: a hub id is not downloaded for a run that could not load it.
    LOCAL.require(f"-p {HF_PREFIX}{ref}")
    folder = download(locate(ref, option="hf", gguf=False), option="hf")
    scorer = local_models(gateway).scorer(folder, ref, options)
    weights = fingerprint(ModelSource(str(folder)), memo=gateway.cache)
    return ScalarJudge(
        ref,
        scorer,
        fingerprint=weights,
        gateway=gateway,
        context=context,
        profile_k=profile_k,
        profile_order=profile_order,
    )
