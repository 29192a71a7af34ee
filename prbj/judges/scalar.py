"""Scalar reward models: Hugging Face sequence-classification checkpoints (`--provider hf:<path-or-hub-id>`).

Each answer is scored on its own as the assistant turn of a conversation whose user turn is the question (plus,
in the 'profile' context, the user's ten most relevant past posts). Scores go through the run's response cache;
misses from all pairs being judged at once are gathered into length-sorted batches and scored on one worker
thread, so the event loop (progress bar, Ctrl-C) stays free. torch and transformers are imported only here,
and only when such a judge is built.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prbj.data.schema import Context, JudgeView
from prbj.errors import ConfigError
from prbj.judges.base import Judgment, PairTask, PointwiseJudge, verdict_from_scores
from prbj.llm.cache import ResponseCache, cache_key
from prbj.context.retrieval import rank_profile

if TYPE_CHECKING:
    from prbj.llm.gateway import Gateway
    from prbj.local.batcher import Emit, MicroBatcher
    from prbj.local.scalar_model import ScalarModel

HF_PREFIX = "hf:"
DTYPE_CHOICES = ("auto", "bf16", "fp16", "fp32")
DEVICE_CHOICES = ("auto", "cpu", "cuda")
SCALAR_CONTEXTS: tuple[str, ...] = ("none", "profile")
PROFILE_POSTS = 10
# Bumped whenever the way a score is computed changes (truncation, pooling, turn layout), so that old cache
# entries are missed rather than reused.
SCORER_VERSION = 1
TRUNCATION = "middle"
PROFILE_TURN = "{question}\n\nPosts this user wrote before, most relevant first:\n{posts}"


@dataclass(frozen=True, slots=True)
class ScalarOptions:
    """How local reward models are loaded and run (`prbj judge --dtype/--device/--max-length/...`)."""

    dtype: str = "auto"
    device: str = "auto"
    trust_remote_code: bool = False
    max_length: int = 8192
    # Padded tokens (rows × longest row) per forward pass: bounds memory, not results. None: by device.
    batch_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class ItemScore:
    score: float
    truncated: bool
    tokens: int


def conversation(view: JudgeView, answer: str) -> list[dict[str, str]]:
    """The messages a reward model scores: one user turn, one assistant turn (the answer)."""
    user = view.question
    if view.context == "profile" and view.profile:
        posts = rank_profile(view.question, view.profile, k=PROFILE_POSTS)
        listing = "\n".join(f"{n}. {post.text}" for n, post in enumerate(posts, start=1))
        user = PROFILE_TURN.format(question=view.question, posts=listing)
    return [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]


@dataclass(frozen=True, slots=True)
class _Request:
    messages: list[dict[str, str]]
    key: str
    cache: ResponseCache


class _Runtime:
    """One loaded model with its worker thread and batcher, shared by every judge that uses the same model
    with the same options (e.g. the same model in two contexts), so weights are loaded once."""

    def __init__(self, model: ScalarModel) -> None:
        from prbj.local.batcher import MicroBatcher, WorkerThread

        self.model = model
        self.worker = WorkerThread(f"prbj-scalar:{model.ref}")
        self.batcher: MicroBatcher[_Request, ItemScore] = MicroBatcher(self._score_batch, self.worker)

    def _score_batch(self, requests: list[_Request], emit: Emit, stop: threading.Event) -> None:
        # The same conversation can be asked for twice in one batch (two judges, a repeated answer): score once.
        first_of: dict[str, int] = {}
        for index, request in enumerate(requests):
            first_of.setdefault(request.key, index)
        unique = list(first_of.values())
        waiting: dict[str, list[int]] = {}
        for index, request in enumerate(requests):
            waiting.setdefault(request.key, []).append(index)

        def on_score(position: int, score: float, truncated: bool, tokens: int) -> None:
            request = requests[unique[position]]
            result = ItemScore(score, truncated, tokens)
            # Stored from the worker as soon as the batch is done, so an interrupted run keeps what it paid for.
            request.cache.set(request.key, asdict(result))
            for index in waiting[request.key]:
                emit(index, result)

        self.model.score_conversations([requests[i].messages for i in unique], on_score, stop)


_RUNTIMES: dict[tuple[str, ScalarOptions], _Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def _runtime(ref: str, folder: Path, options: ScalarOptions) -> _Runtime:
    from prbj.local.scalar_model import ScalarModel

    key = (str(folder.resolve()), options)
    with _RUNTIMES_LOCK:
        if key not in _RUNTIMES:
            model = ScalarModel(
                folder,
                ref=ref,
                dtype=options.dtype,
                device=options.device,
                trust_remote_code=options.trust_remote_code,
                max_length=options.max_length,
                batch_tokens=options.batch_tokens,
            )
            _RUNTIMES[key] = _Runtime(model)
        return _RUNTIMES[key]


class ScalarJudge(PointwiseJudge):
    """A sequence-classification reward model; correct iff score(chosen) > score(rejected), ties apart."""

    def __init__(
        self,
        ref: str,
        runtime: _Runtime,
        *,
        fingerprint: str,
        cache: ResponseCache,
        context: Context = "none",
    ) -> None:
        self.name = f"{HF_PREFIX}{ref}"
        self.ref = ref
        self.context = context
        self.fingerprint = fingerprint
        self.cache = cache
        self._runtime = runtime
        self.template_sha256 = hashlib.sha256(runtime.model.chat_template.encode()).hexdigest()
        # A hub id names the model; a local folder's name says nothing, its fingerprint says it all.
        self._model_id = None if Path(ref).expanduser().exists() else ref

    @property
    def model(self) -> ScalarModel:
        return self._runtime.model

    @property
    def batcher(self) -> MicroBatcher[_Request, ItemScore]:
        return self._runtime.batcher

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
            "truncation": TRUNCATION,
            "chat_template_sha256": self.template_sha256,
            "profile_posts": PROFILE_POSTS if self.context == "profile" else 0,
            "scorer_version": SCORER_VERSION,
        }

    def cache_key(self, messages: list[dict[str, str]]) -> str:
        model = self.model
        return cache_key(
            "scalar",
            model=self._model_id,
            weights=self.fingerprint,
            messages=messages,
            template=self.template_sha256,
            max_length=model.max_length,
            dtype=model.dtype_name,
            truncation=TRUNCATION,
            scorer_version=SCORER_VERSION,
        )

    async def score(self, view: JudgeView, answers: Sequence[str]) -> list[float]:
        return [item.score for item in await self.score_items(view, answers)]

    async def score_items(self, view: JudgeView, answers: Sequence[str]) -> list[ItemScore]:
        """Each answer's score, from the cache when it is there; the rest queued for the next batch."""
        results: list[ItemScore | asyncio.Future[ItemScore]] = []
        for answer in answers:
            messages = conversation(view, answer)
            key = self.cache_key(messages)
            stored = self.cache.get(key)
            if stored is not None:
                results.append(ItemScore(**stored))
            else:
                results.append(self.batcher.submit(_Request(messages, key, self.cache)))
        return [r if isinstance(r, ItemScore) else await r for r in results]

    async def judge(self, task: PairTask) -> Judgment:
        chosen, rejected = await self.score_items(task.view, [task.pair.chosen, task.pair.rejected])
        return self._judgment(
            task,
            verdict=verdict_from_scores(chosen.score, rejected.score),
            score_chosen=chosen.score,
            score_rejected=rejected.score,
            truncated=chosen.truncated or rejected.truncated,
        )


def make_scalar_judge(
    ref: str, *, context: Context, options: ScalarOptions, gateway: Gateway, seed: int
) -> ScalarJudge:
    """The judge for `--provider hf:<ref>`; configuration errors (missing folder, offline hub id, not a reward
    model, remote code not trusted) are raised here, before any pair is judged."""
    from prbj.local.model_files import locate_model, model_fingerprint

    ref = ref.strip()
    if not ref:
        raise ConfigError("--provider hf:<path-or-hub-id>: the model is missing after 'hf:'")
    del seed  # a reward model's score is deterministic
    if context not in SCALAR_CONTEXTS:
        raise ConfigError(
            f"--provider hf:{ref}: context {context!r} is not supported by scalar reward models "
            f"(supported: {', '.join(SCALAR_CONTEXTS)})"
        )
    # Scores go through the run's cache, which every judge of the run shares.
    cache = gateway.cache if gateway.cache is not None else ResponseCache()
    folder = locate_model(ref)
    runtime = _runtime(ref, folder, options)
    fingerprint = model_fingerprint(folder, memo=cache)
    return ScalarJudge(ref, runtime, fingerprint=fingerprint, cache=cache, context=context)
