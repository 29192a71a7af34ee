"""Scalar reward models (`--provider hf:<folder>`), on tiny Llama classifiers with random weights built here."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import torch
from click.testing import CliRunner
from tiny_rm import BOS, build_causal_lm, build_reward_model, mark_as_remote_code
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from conftest import SUBSET_NAMES, make_record, write_jsonl
from prbj.analysis.stats import summarize
from prbj.cli import main
from prbj.context.retrieval import rank_profile
from prbj.data.loaders import Dataset
from prbj.data.validate import parse_pair
from prbj.errors import ConfigError
from prbj.judges.base import PairTask
from prbj.judges.registry import resolve_judges
from prbj.judges.scalar import ScalarJudge, ScalarOptions, conversation, make_scalar_judge
from prbj.judges.setup import JudgeOptions
from prbj.llm.cache import ResponseCache
from prbj.llm.gateway import Gateway
from prbj.llm.setup import GatewayOptions
from prbj.local.packing import group_by_prefix, pack_by_tokens, pack_groups, truncate_middle
from prbj.runs.execute import judge_dataset

FILLER = (
    "I like long walks with my dog in the hills near the lake and I also enjoy cooking spicy food for my "
    "friends on weekends while listening to old jazz records"
)


def _records() -> list[dict[str, Any]]:
    """Pairs with answers of different lengths, so that batches need padding."""
    records = []
    for i in range(1, 13):
        extra = " ".join(FILLER.split()[: (i * 7) % 26])
        records.append(
            make_record(
                i,
                SUBSET_NAMES[(i - 1) % 3],
                chosen=f"A used manual rangefinder is cheap. {extra}",
                rejected=f"A new mirrorless camera is fast. {' '.join(reversed(extra.split()))}",
            )
        )
    return records


RECORDS = _records()
VOCAB_TEXTS = [FILLER] + [
    " ".join([r["question"], r["chosen"], r["rejected"], *(p["text"] for p in r["profile"])]) for r in RECORDS
]


@dataclass(frozen=True)
class Models:
    plain: Path  # no pad token anywhere: the common case for released RMs
    padded: Path  # tokenizer and config define a pad token
    three_class: Path
    zero_head: Path


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> Models:
    root = tmp_path_factory.mktemp("tiny-rms")
    return Models(
        plain=build_reward_model(root / "plain", VOCAB_TEXTS),
        padded=build_reward_model(root / "padded", VOCAB_TEXTS, with_pad=True, seed=1),
        three_class=build_reward_model(root / "three-class", VOCAB_TEXTS, num_labels=3, seed=2),
        zero_head=build_reward_model(root / "zero-head", VOCAB_TEXTS, zero_head=True, seed=3),
    )


def _judge(folder: Path, tmp_path: Path, context: str = "none", **options: Any) -> ScalarJudge:
    """A judge on a gateway of its own (as a new run would have), over the test's one cache folder."""
    return make_scalar_judge(
        str(folder),
        context=context,  # type: ignore[arg-type]
        options=ScalarOptions(**options),
        gateway=Gateway(ResponseCache(tmp_path / "cache")),
        seed=42,
    )


def _scalar_judges(specs: Sequence[str], tmp_path: Path, options: JudgeOptions | None = None) -> list[Any]:
    """Judges as `prbj judge` builds them, through the registry, on a gateway with its own cache."""
    gateway = Gateway(ResponseCache(tmp_path / "cache"))
    return resolve_judges(specs, options or JudgeOptions(), GatewayOptions(), gateway)


def _pairs(records: Sequence[dict[str, Any]] = RECORDS) -> tuple[Any, ...]:
    return tuple(parse_pair(r) for r in records)


def _hand_run(
    folder: Path, messages: list[dict[str, str]], keep: Callable[[list[int]], list[int]] = list
) -> float:
    """The reference: plain transformers, one conversation, no padding, nothing from prbj."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32).eval()
    ids = keep(tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False))
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()
    return float(logits[0]) if logits.numel() == 1 else float(torch.softmax(logits, -1)[-1])


def _turns(question: str, answer: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


async def _judge_all(judge: ScalarJudge, pairs: Sequence[Any], concurrency: int = 16) -> list[Any]:
    return await judge_dataset(
        Dataset("test", tuple(pairs)), [judge], concurrency=concurrency, show_progress=False
    )


@pytest.mark.parametrize("variant", ["plain", "padded", "three_class"])
async def test_scores_equal_a_hand_run_forward_pass(models: Models, tmp_path: Path, variant: str) -> None:
    folder = getattr(models, variant)
    judge = _judge(folder, tmp_path)
    pairs = _pairs()[:4]
    judgments = await _judge_all(judge, pairs)
    for pair, judgment in zip(pairs, judgments, strict=True):
        assert judgment.score_chosen == pytest.approx(
            _hand_run(folder, _turns(pair.question, pair.chosen)), abs=1e-5
        )
        assert judgment.score_rejected == pytest.approx(
            _hand_run(folder, _turns(pair.question, pair.rejected)), abs=1e-5
        )
        assert judgment.truncated is False
    if variant == "three_class":
        assert all(0.0 < j.score_chosen < 1.0 for j in judgments)  # a probability, not a logit


@contextmanager
def _rows_mode(model: Any, shared: bool) -> Iterator[None]:
    """Score whole rows, or run shared prefixes once (then check that the model's own self-check chose it)."""
    model._ensure_loaded()
    before = model.prefix_sharing
    model.prefix_sharing = None if shared else False
    try:
        yield
        assert model.prefix_sharing is shared
    finally:
        model.prefix_sharing = before


@pytest.mark.parametrize("shared", [False, True], ids=["whole-rows", "shared-prefixes"])
@pytest.mark.parametrize("variant", ["plain", "padded"])
def test_an_items_score_does_not_depend_on_batch_or_neighbours(
    models: Models, tmp_path: Path, variant: str, shared: bool
) -> None:
    model = _judge(getattr(models, variant), tmp_path).model
    conversations = [_turns(p.question, answer) for p in _pairs() for answer in (p.chosen, p.rejected)]
    rows = [e.ids for e in model.encode(conversations)]
    assert len({len(r) for r in rows}) > 3, "the items must differ in length, or padding is not exercised"
    # The reference: each conversation alone, one unpadded row.
    alone = [model.forward([row])[0] for row in rows]

    def scores(order: Sequence[int], batch_tokens: int) -> dict[int, float]:
        model.batch_tokens = batch_tokens
        found: dict[int, float] = {}
        model.score_conversations(
            [conversations[i] for i in order], lambda pos, score, *_: found.__setitem__(order[pos], score)
        )
        return found

    everything = list(range(len(conversations)))
    default_budget = model.batch_tokens
    try:
        with _rows_mode(model, shared):
            for order, budget in [
                (everything, 10**9),  # one batch
                (everything[::-1], 200),  # several small batches
                (everything[::3] + everything[1::3], 10**9),  # other neighbours
                ([5], 10**9),  # alone, through the batch path
            ]:
                batched = scores(order, budget)
                for i in order:
                    assert batched[i] == pytest.approx(alone[i], abs=1e-5)
    finally:
        model.batch_tokens = default_budget


@pytest.mark.parametrize("shared", [False, True], ids=["whole-rows", "shared-prefixes"])
async def test_the_model_sees_exactly_one_bos(models: Models, tmp_path: Path, shared: bool) -> None:
    tokenizer = AutoTokenizer.from_pretrained(models.plain)
    messages = _turns("which camera ?", "a cheap one .")
    bos = tokenizer.convert_tokens_to_ids(BOS)
    # The trap this guards against: templated text tokenised again gets the tokenizer's own BOS as well.
    retokenised = tokenizer(tokenizer.apply_chat_template(messages, tokenize=False))["input_ids"]
    assert retokenised[:2] == [bos, bos]

    judge = _judge(models.plain, tmp_path)
    calls: list[tuple[torch.Tensor, torch.Tensor]] = []
    loaded = judge.model._ensure_loaded()

    def record(_module: Any, _args: Any, kwargs: dict[str, Any]) -> None:
        # With a cache, the mask also covers the cached prefix: the last columns belong to these ids.
        ids = kwargs["input_ids"]
        calls.append((ids, kwargs["attention_mask"][:, -ids.shape[1] :].bool()))

    with _rows_mode(judge.model, shared):
        hook = loaded.register_forward_pre_hook(record, with_kwargs=True)
        try:
            await _judge_all(judge, _pairs()[:3])
        finally:
            hook.remove()
    # Padding may reuse the BOS id (it never ends a row); only the tokens the model attends to count.
    bos_per_row = [((ids == bos) & real).sum(dim=1).tolist() for ids, real in calls]
    if shared:
        # Check passes aside, the last two calls are one batch: each prefix has the BOS, no row's own tokens do.
        prefixes, own = bos_per_row[-2:]
        assert set(prefixes) == {1} and set(own) == {0} and len(own) == 6
    else:
        assert [n for row in bos_per_row for n in row] == [1] * 6


async def test_too_long_inputs_lose_their_middle_and_are_flagged(models: Models, tmp_path: Path) -> None:
    max_length = 24
    judge = _judge(models.plain, tmp_path, max_length=max_length)
    long_pair = parse_pair(make_record(1, chosen=FILLER, rejected="Cheap film ."))
    short_pair = parse_pair(make_record(2, question="camera ?", chosen="film .", rejected="digital ."))
    long_judgment, short_judgment = await _judge_all(judge, [long_pair, short_pair])
    assert long_judgment.truncated is True
    assert short_judgment.truncated is False

    def middle_cut(ids: list[int]) -> list[int]:
        assert len(ids) > max_length
        return ids[: max_length // 2] + ids[len(ids) - (max_length - max_length // 2) :]

    expected = _hand_run(models.plain, _turns(long_pair.question, FILLER), keep=middle_cut)
    assert long_judgment.score_chosen == pytest.approx(expected, abs=1e-5)
    assert truncate_middle(list(range(10)), 4) == ([0, 1, 8, 9], True)
    assert truncate_middle([1, 2], 4) == ([1, 2], False)


async def test_a_shorter_max_length_is_never_served_the_longer_ones_scores(
    models: Models, tmp_path: Path
) -> None:
    """Issue 31 (a mutation the suite let through): --max-length changes what the model reads, so it is part
    of the cache key. Scored first whole, then with room for 24 tokens on the same cache, a long pair must be
    scored again, cut, not replayed whole."""
    long_pair = parse_pair(make_record(1, chosen=FILLER, rejected="Cheap film ."))
    (whole,) = await _judge_all(_judge(models.plain, tmp_path), [long_pair])
    assert whole.truncated is False
    short = _judge(models.plain, tmp_path, max_length=24)
    (cut,) = await _judge_all(short, [long_pair])
    assert short.model.forward_passes > 0
    assert cut.truncated is True and cut.score_chosen != pytest.approx(whole.score_chosen, abs=1e-6)


async def test_a_zero_head_gives_ties_counted_apart(models: Models, tmp_path: Path) -> None:
    judgments = await _judge_all(_judge(models.zero_head, tmp_path), _pairs())
    assert {j.verdict for j in judgments} == {"tie"}
    frame = pl.DataFrame([j.row() for j in judgments])
    overall = next(s for s in summarize(frame, seed=1) if s.subset == "all")
    assert (overall.ties, overall.correct, overall.accuracy) == (len(RECORDS), 0, 0.0)


async def test_a_rerun_from_the_cache_runs_no_forward_pass(models: Models, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    shutil.copytree(models.padded, folder)
    first = _judge(folder, tmp_path)
    before = await _judge_all(first, _pairs())
    assert first.model.forward_passes > 0

    # Other options that cannot change a score (batch size) share cache entries but not the loaded model.
    second = _judge(folder, tmp_path, batch_tokens=123)
    assert second.model is not first.model
    after = await _judge_all(second, _pairs())
    assert second.model.forward_passes == 0
    assert not second.model.loaded, "a rerun served from the cache must not even load the weights"
    assert [j.row() for j in after] == [j.row() for j in before]

    # Different weights (same folder, same names) must miss the cache.
    with torch.no_grad():
        model = AutoModelForSequenceClassification.from_pretrained(folder)
        model.score.weight.mul_(-1.0)
        model.save_pretrained(folder)
    third = _judge(folder, tmp_path, batch_tokens=124)
    assert third.fingerprint != first.fingerprint
    flipped = await _judge_all(third, _pairs())
    assert third.model.forward_passes > 0
    assert flipped[0].score_chosen == pytest.approx(-before[0].score_chosen, abs=1e-4)


async def test_concurrent_pairs_are_scored_in_few_batches(models: Models, tmp_path: Path) -> None:
    judge = _judge(models.three_class, tmp_path)
    model = judge.model
    # Count what judging adds.
    batches, passes, tokens = judge.batcher.batches_run, model.forward_passes, model.tokens_scored
    await _judge_all(judge, _pairs(), concurrency=len(RECORDS))
    assert model.prefix_sharing is True
    # 24 answers arrive at once: one batch, two forward passes (the 12 shared user turns, then the 24 answers).
    assert judge.batcher.batches_run - batches == 1
    assert model.forward_passes - passes == 2
    row_tokens = sum(
        len(e.ids)
        for e in model.encode([_turns(p.question, a) for p in _pairs() for a in (p.chosen, p.rejected)])
    )
    user_turn_tokens = sum(len(e.ids) for e in model.encode([[_turns(p.question, "")[0]] for p in _pairs()]))
    # Each pair's user turn runs once instead of twice.
    assert model.tokens_scored - tokens <= row_tokens - user_turn_tokens + len(RECORDS)


async def test_profile_context_puts_the_ranked_posts_in_the_user_turn(models: Models, tmp_path: Path) -> None:
    posts = [{"id": f"p{i}", "category": "c", "text": f"post number {i} about cooking"} for i in range(12)]
    posts[7]["text"] = "rangefinder film camera street photography"
    pair = parse_pair(make_record(1, profile=posts))
    user_turn = conversation(pair.view("profile"), pair.chosen)[0]["content"]
    assert user_turn.startswith(pair.question)
    lines = [line for line in user_turn.splitlines() if line[:1].isdigit()]
    assert len(lines) == 10  # the top ten posts only
    assert lines[0] == "1. rangefinder film camera street photography"  # the most relevant first
    assert conversation(pair.view("none"), pair.chosen)[0]["content"] == pair.question

    plain = await _judge(models.plain, tmp_path).judge(PairTask(pair, "none"))
    profiled = await _judge(models.plain, tmp_path, context="profile").judge(PairTask(pair, "profile"))
    assert profiled.context == "profile"
    assert profiled.score_chosen == pytest.approx(
        _hand_run(models.plain, _turns(user_turn, pair.chosen)), abs=1e-5
    )
    assert profiled.score_chosen != plain.score_chosen


def test_pack_by_tokens_respects_the_budget_and_keeps_every_item() -> None:
    lengths = [5, 40, 12, 12, 3, 90, 7, 40]
    batches = pack_by_tokens(lengths, budget=80)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        widths = [lengths[i] for i in batch]
        assert widths == sorted(widths, reverse=True)
        assert len(batch) == 1 or len(batch) * max(widths) <= 80
    assert [5] in batches  # longer than the budget: alone


def test_rows_sharing_a_prefix_are_grouped_and_keep_their_scored_token() -> None:
    user_turn = list(range(100, 130))
    rows = [
        [*user_turn, 1, 2, 3, 9],  # a pair's two answers
        [*user_turn, 1, 5, 9],
        [7, 8, 9, 4, 4, 4],  # ends in pad tokens: the scored token is the 9
        [*user_turn[:10], 6],  # shares a little: joining would cost the others more than it saves
        [*user_turn, 1, 2, 3, 9],  # the same conversation twice
    ]
    groups = group_by_prefix(rows, pad_id=4)
    assert sorted(i for g in groups for i in g.members) == list(range(len(rows)))
    for group in groups:
        first = rows[group.members[0]]
        for i in group.members:
            assert rows[i][: group.prefix_length] == first[: group.prefix_length]
            scored = max(k for k, token in enumerate(rows[i]) if token != 4)
            assert group.prefix_length <= scored  # the pooled token stays in the row's own part
    by_member = {i: g for g in groups for i in g.members}
    assert by_member[0] is by_member[1] is by_member[4]
    assert by_member[0].prefix_length == len(user_turn) + 1
    assert by_member[2].prefix_length == 2 and len(by_member[3].members) == 1

    # A template header shared by everyone must not pull a pair apart: A is alone, B and B' share a long turn.
    header, turn = list(range(500, 520)), list(range(600, 700))
    a, b, b2 = [*header, 1, 2, 9], [*header, *turn, 3, 9], [*header, *turn, 4, 9]
    grouped = {g.members: g.prefix_length for g in group_by_prefix([a, b, b2])}
    assert grouped == {(0,): 22, (1, 2): len(header) + len(turn)}

    lengths = [len(r) for r in rows]
    batches = pack_groups(groups, lengths, budget=80)
    assert sorted(g.members for batch in batches for g in batch) == sorted(g.members for g in groups)
    for batch in batches:
        n_rows = sum(len(g.members) for g in batch)
        widest = max(g.prefix_length for g in batch) + max(
            lengths[i] - g.prefix_length for g in batch for i in g.members
        )
        assert len(batch) == 1 or n_rows * widest <= 80


def test_cli_end_to_end(models: Models, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "pairs.jsonl", RECORDS[:6])
    out = tmp_path / "reports"
    args = [
        "judge",
        "--no-progress",
        "--provider",
        f"hf:{models.plain}",
        "--dataset",
        str(data),
        "--out",
        str(out),
    ]
    env = {"PRBJ_CACHE_DIR": str(tmp_path / "cache")}
    result = CliRunner(env=env).invoke(main, [*args, "--max-length", "30"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (run_dir,) = out.iterdir()
    frame = pl.read_parquet(run_dir / "judgments.parquet")
    assert frame.height == 6
    assert frame["judge"].unique().to_list() == [f"hf:{models.plain}"]
    assert frame["status"].unique().to_list() == ["ok"]
    assert frame["margin"].to_list() == pytest.approx(
        (frame["score_chosen"] - frame["score_rejected"]).to_list()
    )
    truncated = int(frame["truncated"].sum())
    assert 0 < truncated < 6, "--max-length 30 cuts the longer pairs only"
    assert f"{truncated} of 6 pairs had an input longer than --max-length 30" in " ".join(
        result.output.split()
    )
    (judge,) = json.loads((run_dir / "run.json").read_text())["judges"]
    assert judge["weights"].startswith("sha256:") and judge["max_length"] == 30 and judge["dtype"] == "fp32"
    assert (tmp_path / "cache").is_dir()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("hf:/no/such/folder", "no such folder"),
        ("hf:prbj-tests/no-such-reward-model", "pass its local path"),
        ("hf:", "the model is missing"),
    ],
)
def test_unusable_models_are_one_line_exit_2(spec: str, message: str, tmp_path: Path) -> None:
    runner = CliRunner(env={"PRBJ_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"})
    result = runner.invoke(main, ["judge", "--no-progress", "--provider", spec, "--out", str(tmp_path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


def test_checkpoints_that_are_no_reward_model_are_refused(models: Models, tmp_path: Path) -> None:
    causal = build_causal_lm(tmp_path / "causal", VOCAB_TEXTS[:2])
    with pytest.raises(ConfigError, match="not a sequence-classification reward model"):
        _scalar_judges([f"hf:{causal}"], tmp_path)

    no_template = Path(shutil.copytree(models.plain, tmp_path / "no-template"))
    (no_template / "chat_template.jinja").unlink()
    config = json.loads((no_template / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (no_template / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="no chat template"):
        _scalar_judges([f"hf:{no_template}"], tmp_path)


async def test_a_failing_batch_fails_its_callers_and_not_the_next_batch() -> None:
    from prbj.local.batcher import MicroBatcher, WorkerThread

    def batch_fn(items: list[int], emit: Callable[[int, int], None], stop: Any) -> None:
        if 13 in items:
            raise ValueError("unlucky")
        for index, item in enumerate(items):
            emit(index, item * 2)

    batcher: MicroBatcher[int, int] = MicroBatcher(batch_fn, WorkerThread("test"))
    bad = await asyncio.gather(*(batcher.submit(i) for i in (1, 13)), return_exceptions=True)
    assert all(isinstance(e, ValueError) for e in bad)
    assert await asyncio.gather(*(batcher.submit(i) for i in range(5))) == [0, 2, 4, 6, 8]


@pytest.mark.parametrize("auto_class", ["AutoModelForSequenceClassification", "AutoModel"])
async def test_models_with_their_own_code_run_only_when_trusted(
    models: Models, tmp_path: Path, auto_class: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import dynamic_module_utils

    # Keep the imported model code out of the user's ~/.cache.
    monkeypatch.setattr(dynamic_module_utils, "HF_MODULES_CACHE", str(tmp_path / "modules"))
    remote = mark_as_remote_code(Path(shutil.copytree(models.plain, tmp_path / "remote")), auto_class)
    with pytest.raises(ConfigError, match="--trust-remote-code"):
        _scalar_judges([f"hf:{remote}"], tmp_path)

    trusted = JudgeOptions(scalar=ScalarOptions(trust_remote_code=True))
    (judge,) = _scalar_judges([f"hf:{remote}"], tmp_path, trusted)
    pair = _pairs()[0]
    judgment = await judge.judge(PairTask(pair, "none"))
    assert type(judge.model._ensure_loaded()).__name__ == "CustomRewardModel"
    # Same weights as the plain model: same scores.
    expected = _hand_run(models.plain, _turns(pair.question, pair.chosen))
    assert judgment.score_chosen == pytest.approx(expected, abs=1e-5)


async def test_official_scalar_input_has_two_bos_and_is_cut_from_the_right(
    models: Models, tmp_path: Path
) -> None:
    """--scalar-input official: the chat as text tokenised again (a second BOS on this tokenizer), right
    truncation; the scores equal that hand-built input and differ from prbj's one-BOS input."""
    max_length = 24
    tokenizer = AutoTokenizer.from_pretrained(models.plain)
    bos = tokenizer.convert_tokens_to_ids(BOS)
    long_pair = parse_pair(make_record(1, chosen=FILLER, rejected="Cheap film ."))
    short_pair = parse_pair(make_record(2, question="camera ?", chosen="film .", rejected="digital ."))
    judge = _judge(models.plain, tmp_path, max_length=max_length, scalar_input="official")
    assert judge.describe()["truncation"] == "right" and judge.describe()["scalar_input"] == "official"
    long_judgment, short_judgment = await _judge_all(judge, [long_pair, short_pair])
    assert long_judgment.truncated is True and short_judgment.truncated is False

    def official_ids(question: str, answer: str) -> list[int]:
        text = tokenizer.apply_chat_template(_turns(question, answer), tokenize=False)
        ids = tokenizer(text)["input_ids"]
        assert ids[:2] == [bos, bos]
        return ids[:max_length]

    model = AutoModelForSequenceClassification.from_pretrained(models.plain, dtype=torch.float32).eval()
    for pair, judgment in ((long_pair, long_judgment), (short_pair, short_judgment)):
        with torch.no_grad():
            expected = float(model(torch.tensor([official_ids(pair.question, pair.chosen)])).logits[0, 0])
        assert judgment.score_chosen == pytest.approx(expected, abs=1e-5)
    prbj_default = (await _judge_all(_judge(models.plain, tmp_path), [short_pair]))[0]
    assert prbj_default.score_chosen != pytest.approx(short_judgment.score_chosen, abs=1e-7)


def test_official_protocol_selects_the_official_scalar_input_and_layout() -> None:
    from prbj.judges.official import official_posts

    assert (
        JudgeOptions.pop_from({"protocol": "official", "scalar_input": None}).scalar.scalar_input
        == "official"
    )
    assert JudgeOptions.pop_from({"protocol": "prbj", "scalar_input": None}).scalar.scalar_input == "chat"
    chosen = JudgeOptions.pop_from({"protocol": "official", "scalar_input": "chat"})
    assert chosen.scalar.scalar_input == "chat"
    posts = [{"id": f"p{i}", "category": "c", "text": f"post {i} about film cameras"} for i in range(3)]
    pair = parse_pair(make_record(1, profile=posts))
    user_turn = conversation(pair.view("profile"), pair.chosen, scalar_input="official")[0]["content"]
    ranked = rank_profile(pair.question, pair.profile, k=10)
    assert user_turn == pair.question + official_posts(ranked)  # raw concatenation, nothing between
    assert user_turn[len(pair.question) :].startswith("Post 1 (Category: c):\n")


def test_swapped_profile_control_for_a_scalar_rm(models: Models, tmp_path: Path) -> None:
    """--context swapped-profile: the reward model reads another user's posts in the same place as the real
    ones; with --context profile beside it, summary.json reports the RM's profile reliance."""
    mine = parse_pair(make_record(1, profile=[{"id": "a", "category": "c", "text": "film darkroom budget"}]))
    donor = parse_pair(make_record(2, profile=[{"id": "b", "category": "c", "text": "sourdough starter"}]))
    swapped = conversation(mine.view("swapped-profile", swapped_profile=donor.user_profile), mine.chosen)
    assert "sourdough starter" in swapped[0]["content"] and "film darkroom" not in swapped[0]["content"]

    records = [
        make_record(
            i, SUBSET_NAMES[i % 3], profile=[{"id": f"p{i}", "category": "c", "text": f"user {i} post"}]
        )
        for i in range(1, 7)
    ]
    data = write_jsonl(tmp_path / "pairs.jsonl", records)
    out = tmp_path / "reports"
    args = ["judge", "--no-progress", "-p", f"hf:{models.plain}", "--dataset", str(data), "--out", str(out)]
    args += ["--context", "profile", "--context", "swapped-profile"]
    result = CliRunner(env={"PRBJ_CACHE_DIR": str(tmp_path / "cache")}).invoke(
        main, args, catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    (run_dir,) = out.iterdir()
    (row,) = json.loads((run_dir / "summary.json").read_text())["profile_reliance"]
    assert row["judge"] == f"hf:{models.plain}" and row["n"] == 6
    assert row["reliance"] == pytest.approx(row["accuracy_profile"] - row["accuracy_swapped"])
