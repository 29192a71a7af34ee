"""A reward model written in Python as a judge (`-p py:FILE.py:NAME`, `-p py:package.module:NAME`, an entry point
of the group `prbj.judges`); the interface is prbj.local.rm_api's, the reader's guide docs/plugins.md.

What each item holds about the user, by `--context` (default `profile`):

    none             persona None, history empty
    profile          history: the user's own train and validation preferences, all of them, oldest first;
                     persona: what else describes the user, as the LLM judges are shown it: a persona text as it
                     is; with stated preferences or past posts, those sections rendered (prbj.context.profile_text);
                     on Personalized RewardBench (past posts only) the --profile-k posts most relevant to the
                     question, one `- [category] text` line each. None when there is nothing.
    swapped-profile  the same, of another user (the profile-reliance control)
    planner          persona: the aspects --planner inferred from the profile, one `- aspect` line each
    oracle           persona: the gold rubric aspects (asked by name only: an upper bound, never a result)
    any other        persona: what the LLM judges' context builder renders for it (a persona written from the
                     user's history arrives there), history empty

The judge scores each answer (`score`), or, when the model has `prefer` and `--mode pairwise` (prbj judge's
default), asks it which of the two shown answers wins, in the order `--order` draws (both orders under
`--order both`, as LLM judges). Each model instance serves one context: `--context none --context profile` builds
two, so that what one context's `fit_user` learned never answers for the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from prbj.context.planner import Planner
from prbj.context.profile_text import DEFAULT_PROFILE_K, ProfileOrder, about_user, post_lines
from prbj.data.schema import CONTEXTS, Context, JudgeView, Pair, Preference, UserProfile
from prbj.data.status import Status, most_severe
from prbj.errors import ConfigError
from prbj.judges.base import Judgment, PairTask, PointwiseJudge, ScoreFailure
from prbj.judges.generative import ContextBuilder
from prbj.judges.official import Protocol
from prbj.judges.orders import (
    DEFAULT_ORDER_SEED,
    OrderMode,
    OrderRead,
    combine_reads,
    draw_positions,
    shown_orders,
)
from prbj.judges.orders import shown as shown_answers
from prbj.judges.setup import JudgeOptions
from prbj.llm.gateway import Gateway
from prbj.llm.score_table import digest, item_keys
from prbj.local.models import local_models
from prbj.local.rm_api import PairItem, ScoreItem
from prbj.local.rm_host import Item, Method, Outcome, RMFailure
from prbj.local.rm_loader import ENTRY_POINT_GROUP, PY_PREFIX, RMSource, entry_point_source, parse_spec
from prbj.local.rm_runtime import RMRequest, RMRuntime

# The contexts whose items this module fills itself; every other one prbj knows is rendered as LLM judges see it.
OWN_CONTEXTS: tuple[str, ...] = ("none", "profile", "swapped-profile")
DEFAULT_PY_CONTEXT: Context = "profile"


@dataclass(slots=True)
class Shown:
    """What every item of one judgment holds besides its answers."""

    user_id: str
    pair_id: str
    prompt: str
    persona: str | None
    groups: dict[str, str]
    history: tuple[Preference, ...]
    # A digest of `history` (the key names it, not its text).
    history_digest: bytes


class PythonRMJudge(PointwiseJudge):
    """A reward model in a Python file or package; correct iff it prefers the chosen answer, ties apart."""

    def __init__(
        self,
        spec: str,
        runtime: RMRuntime,
        *,
        context: Context = DEFAULT_PY_CONTEXT,
        profile_k: int = DEFAULT_PROFILE_K,
        profile_order: ProfileOrder = "similar",
        planner: Planner | None = None,
        use_prefer: bool = False,
        order: OrderMode = "random",
        order_seed: int = DEFAULT_ORDER_SEED,
        protocol: Protocol = "prbj",
    ) -> None:
        self.name = spec
        self.runtime = runtime
        self.context = context
        self.profile_k = profile_k
        self.profile_order = profile_order
        self.use_prefer = use_prefer
        self.order = order
        self.order_seed = order_seed
        self.protocol: Protocol = protocol
        self.positions: dict[str, str] = {}
        # Every other context (planner aspects, the gold rubric, what a later context writes) is rendered by the
        # LLM judges' context builder, and arrives as the persona.
        self._builder = (
            None
            if context in OWN_CONTEXTS
            else ContextBuilder(context, profile_k=profile_k, planner=planner, profile_order=profile_order)
        )
        self._history_digests: dict[int, tuple[tuple[Preference, ...], bytes]] = {}
        self._personas: dict[tuple[str, tuple[tuple[str, str], ...]], str | None] = {}
        # Enough judgments at once that the model's calls are whole batches (read by runs.execute).
        self.pairs_in_flight = 4 * runtime.batch_size

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            **self.runtime.loaded.describe(),
            "batch_size": self.runtime.batch_size,
            "method": "prefer" if self.use_prefer else "score",
            **({"order": self.order, "order_seed": self.order_seed} if self.use_prefer else {}),
            "profile_k": self.profile_k if self.context in ("profile", "swapped-profile") else 0,
        }

    def prepare(self, pairs: Sequence[Pair]) -> None:
        if self.use_prefer:
            self.positions = draw_positions(pairs, self.order, self.protocol, self.order_seed)

    # --- what the items hold -----------------------------------------------------------------------------
    def _shown(self, view: JudgeView, user_id: str, groups: dict[str, str]) -> Shown:
        """What the items show of the user in the `none` and profile contexts."""
        if self.context == "none":
            return Shown(user_id, view.pair_id, view.question, None, groups, (), b"")
        history = view.history
        persona = self._persona(view)
        return Shown(user_id, view.pair_id, view.question, persona, groups, history, self._history(history))

    async def _shown_built(self, view: JudgeView, user_id: str, groups: dict[str, str]) -> Shown:
        """What the items show in the other contexts: what the LLM judges' context builder renders, as the persona
        (a planner that failed raises ScoreFailure)."""
        assert self._builder is not None
        block = await self._builder.build(view)
        if block.failure is not None:
            status: Status = block.failure_status or "api_error"
            raise ScoreFailure(status, f"planner: {block.failure.error}", block.failure.cause)
        persona = block.rubrics or block.profile or block.text or None
        return Shown(user_id, view.pair_id, view.question, persona, groups, (), b"")

    async def _shown_for(self, view: JudgeView, user_id: str, groups: dict[str, str]) -> Shown:
        return (
            await self._shown_built(view, user_id, groups)
            if self._builder
            else self._shown(view, user_id, groups)
        )

    def _persona(self, view: JudgeView) -> str | None:
        if view.profile:  # past posts: ranked for each question
            return persona_text(view, self.profile_k, self.profile_order)
        # Otherwise the same for all of a user's items: rendered once.
        memo = (view.persona, view.facts)
        if memo not in self._personas:
            self._personas[memo] = persona_text(view, self.profile_k, self.profile_order)
        return self._personas[memo]

    def _history(self, history: tuple[Preference, ...]) -> bytes:
        """A digest of the history, once per user (a user's pairs share one history tuple)."""
        if not history:
            return b""
        found = self._history_digests.get(id(history))
        if found is not None and found[0] is history:
            return found[1]
        made = digest([(h.id, h.prompt, h.chosen, h.rejected) for h in history])
        self._history_digests[id(history)] = (history, made)
        return made

    def _request(
        self, method: Method, shown: Shown, items: tuple[Item, ...], answers: Sequence[Sequence[str]]
    ) -> RMRequest:
        """The request for `items`, one key per item: the model, and everything it is given for the item (what is
        shown of the user, hashed once for all the items, and `answers`, the item's own texts)."""
        keys = item_keys(
            self.runtime.model_digest,
            (
                method,
                shown.user_id,
                shown.pair_id,
                shown.prompt,
                shown.persona,
                sorted(shown.groups.items()),
                shown.history_digest,
            ),
            answers,
        )
        return RMRequest(method, keys, items)

    def _score_request(self, shown: Shown, answers: Sequence[str]) -> RMRequest:
        items = tuple(
            [
                ScoreItem(
                    shown.user_id, shown.pair_id, shown.prompt, a, shown.persona, shown.groups, shown.history
                )
                for a in answers
            ]
        )
        return self._request("score", shown, items, [(a,) for a in answers])

    # --- judging -----------------------------------------------------------------------------------------
    async def judge(self, task: PairTask) -> Judgment:
        pair = task.pair
        groups = dict(pair.groups)
        if self._builder is None:  # a coroutine less per pair where nothing is awaited
            shown = self._shown(task.view, pair.user_id, groups)
        else:
            try:
                shown = await self._shown_built(task.view, pair.user_id, groups)
            except ScoreFailure as failure:
                return self._judgment(task, status=failure.status, error=failure.message, cause=failure.cause)
        # A best-of-k item is decided by the argmax of `score` (prefer compares two answers only).
        if self.use_prefer and pair.k == 2:
            return await self._judge_pairwise(task, shown)
        result = await self.runtime.submit(self._score_request(shown, pair.candidates))
        if any(isinstance(outcome, RMFailure) for outcome in result.outcomes):
            return self._judgment(task, **_failure(result.outcomes), cached=False)
        scores = [outcome for outcome in result.outcomes if not isinstance(outcome, RMFailure)]
        return self._scored(task, scores, cached=result.cached)

    async def _judge_pairwise(self, task: PairTask, user: Shown) -> Judgment:
        """`prefer` in the order drawn, or in both, read and combined as every judge shown two answers at once is
        (prbj.judges.orders): P(first) above 1/2 picks the first, below it the second, exactly 1/2 is a tie."""
        pair = task.pair
        positions = shown_orders(pair, self.order, self.positions)
        orders = [shown_answers(pair, position) for position in positions]
        items = tuple(
            PairItem(user.user_id, user.pair_id, user.prompt, a, b, user.persona, user.groups, user.history)
            for a, b in orders
        )
        result = await self.runtime.submit(self._request("prefer", user, items, orders))
        combined = combine_reads(positions, [_order_read(outcome) for outcome in result.outcomes])
        if combined.status != "ok":
            return self._judgment(task, **combined.fields(), cached=False)
        return self._judgment(
            task,
            **combined.fields(),
            cached=result.cached,
            extra={"p_chosen": combined.p_chosen, "confidence_source": "prefer"},
        )

    async def score(self, view: JudgeView, answers: Sequence[str]) -> list[float]:
        """Scores for answers outside a benchmark run (`prbj serve`, best-of-N): the user is the request's pair
        id (it has no other), the history what the view holds (none, for a served request)."""
        shown = await self._shown_for(view, view.pair_id, {})
        result = await self.runtime.submit(self._score_request(shown, answers))
        scores = []
        for outcome in result.outcomes:
            if isinstance(outcome, RMFailure):
                failed = _failure(result.outcomes)
                raise ScoreFailure(failed["status"], failed["error"], failed["cause"])
            scores.append(outcome)
        return scores


def _order_read(outcome: Outcome) -> OrderRead:
    """One shown order's `prefer` value as the read of an order: the letter it favours, a tie at exactly 1/2."""
    if isinstance(outcome, RMFailure):
        return OrderRead(cast(Status, outcome.status), error=outcome.message, cause=outcome.cause)
    letter = "A" if outcome > 0.5 else "B" if outcome < 0.5 else None
    return OrderRead("ok", letter, probability_of_a=outcome)


def _failure(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The judgment's status, error and cause when an item failed: the most severe, its first message."""
    failures = [o for o in outcomes if isinstance(o, RMFailure)]
    status = most_severe(f.status for f in failures)
    first = next(f for f in failures if f.status == status)
    return {"status": status, "error": first.message, "cause": first.cause}


def persona_text(view: JudgeView, k: int, order: ProfileOrder) -> str | None:
    """What describes the user besides their earlier choices (see the module docstring), or None."""
    profile = view.user_profile
    rest = UserProfile(posts=profile.posts, persona=profile.persona, facts=profile.facts)
    if rest.only_posts:
        lines = post_lines(view.question, rest, k)
        return "\n".join(lines) if lines else None
    if not rest.posts and not rest.facts:
        return rest.persona
    return about_user(view.question, rest, k, order)


def check_context(spec: str, context: str) -> None:
    if context not in CONTEXTS:
        raise ConfigError(f"-p {spec}: unknown context {context!r} (known: {', '.join(CONTEXTS)})")


def rm_source(spec: str) -> RMSource:
    """Where `spec` says the model is: `py:…`, or an installed entry point's name."""
    if spec.startswith(PY_PREFIX):
        return parse_spec(spec)
    found = entry_point_source(spec)
    if found is None:
        raise ConfigError(
            f"-p {spec}: no installed reward model of that name (entry points {ENTRY_POINT_GROUP})"
        )
    return found


def make_python_judges(
    spec: str, options: JudgeOptions, gateway: Gateway, planner: Planner | None
) -> list[PythonRMJudge]:
    """One judge per --context, each with its own model instance; loading errors are raised here, before any
    pair is judged. With --ray the instances live in Ray actors (prbj.local.ray_executor)."""
    source = rm_source(spec)
    models = local_models(gateway)
    judges = []
    for context in options.contexts or (DEFAULT_PY_CONTEXT,):
        check_context(spec, context)
        if context == "planner" and planner is None:
            raise ConfigError(
                "--context planner needs --planner <provider> (the model that infers the aspects)"
            )
        loaded = models.open_python_rm(source)
        runner = models.python_rm_runner(loaded, options.batch_size)
        runtime = RMRuntime(loaded, cache=gateway.cache, batch_size=options.batch_size, runner=runner)
        judges.append(
            PythonRMJudge(
                spec,
                runtime,
                context=context,
                profile_k=options.profile_k,
                profile_order=options.profile_order,
                planner=planner,
                use_prefer=options.mode == "pairwise" and loaded.has_prefer,
                order=options.order,
                order_seed=options.seed,
                protocol=options.protocol,
            )
        )
    return judges
