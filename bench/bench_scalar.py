"""Time prbj's scalar reward-model scoring against a plain one-item-at-a-time transformers loop.

Both score the same conversations with the same model (a Llama sequence classifier with random weights and a
few million parameters, built here; no download) in the same dtype and on the same device. prbj runs the way
`prbj judge` does: every pair through the engine, answers gathered into length-sorted batches on the worker
thread, scores written to a fresh cache. The script prints both timings, their ratio, tokens per second, the
largest score difference between the two (it must be tiny: batching may not change a score) and the time of
a rerun served from the cache.

    python bench/bench_scalar.py                      # the bundled sample, or hand-made pairs without it
    python bench/bench_scalar.py --dataset pairs.jsonl --context none --concurrency 64
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402
from tiny_rm import build_reward_model  # noqa: E402
from transformers import AutoModelForSequenceClassification, AutoTokenizer  # noqa: E402

from conftest import SUBSET_NAMES, make_record  # noqa: E402
from prbj.data import load_dataset  # noqa: E402
from prbj.data.loaders import Dataset  # noqa: E402
from prbj.data.validate import parse_pair  # noqa: E402
from prbj.errors import PrbjError  # noqa: E402
from prbj.judges.scalar import ScalarOptions, conversation, make_scalar_judge  # noqa: E402
from prbj.llm.cache import ResponseCache  # noqa: E402
from prbj.llm.gateway import Gateway  # noqa: E402
from prbj.runs.execute import judge_dataset  # noqa: E402


def hand_made_pairs(n: int = 60) -> Dataset:
    """Pairs in the benchmark's schema with answers and profiles of varied length, for when no sample exists."""
    words = (
        "film camera street light lens budget travel music jazz guitar garden soil compost bread oven recipe "
        "history novel poetry museum painting running knee injury sleep routine savings rent career interview"
    ).split()
    pairs = []
    for i in range(n):
        rotate = words[i % len(words) :] + words[: i % len(words)]
        posts = [
            {"id": f"h{i}-p{k}", "category": "misc", "text": " ".join(rotate[k : k + 12 + (i * k) % 30])}
            for k in range(8 + i % 8)
        ]
        chosen = " ".join((rotate * 8)[: 60 + (i * 37) % 220])
        rejected = " ".join(reversed((rotate * 8)[: 50 + (i * 53) % 240]))
        record = make_record(i + 1, SUBSET_NAMES[i % 3], profile=posts, chosen=chosen, rejected=rejected)
        pairs.append(parse_pair(record))
    return Dataset("hand-made", tuple(pairs))


def pairs_for(spec: str) -> Dataset:
    try:
        return load_dataset(spec)
    except PrbjError as error:
        if spec != "sample":
            raise
        print(f"(no bundled sample: {error}; using hand-made pairs)")
        return hand_made_pairs()


def build_model(folder: Path, dataset: Dataset, hidden: int, layers: int) -> Path:
    texts = []
    for pair in dataset.pairs:
        texts += [pair.question, pair.chosen, pair.rejected, *(post.text for post in pair.profile)]
    return build_reward_model(folder, texts, hidden=hidden, layers=layers, heads=4, max_positions=16384)


class PlainLoop:
    """What a straightforward script does: one conversation, one tokenizer call, one forward pass."""

    def __init__(self, folder: Path, dtype: torch.dtype) -> None:
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=dtype).eval()

    def score(self, conversations: list[list[dict[str, str]]]) -> tuple[list[float], int]:
        scores, tokens = [], 0
        with torch.inference_mode():
            for messages in conversations:
                ids = self.tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False)
                tokens += len(ids)
                scores.append(float(self.model(torch.tensor([ids])).logits[0, 0].float()))
        return scores, tokens


def prbj_judge(folder: Path, args: argparse.Namespace, cache_dir: Path, batch_tokens: int | None) -> Any:
    options = ScalarOptions(dtype=args.dtype, max_length=args.max_length, batch_tokens=batch_tokens)
    gateway = Gateway(ResponseCache(cache_dir))
    return make_scalar_judge(str(folder), context=args.context, options=options, gateway=gateway, seed=0)


def prbj_run(judge: Any, dataset: Dataset, concurrency: int) -> list[Any]:
    return asyncio.run(judge_dataset(dataset, [judge], concurrency=concurrency, show_progress=False))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="sample", help="pairs to score (default: the bundled sample)")
    parser.add_argument("--context", choices=["none", "profile"], default="profile")
    parser.add_argument("--hidden", type=int, default=256, help="hidden size of the benchmark model")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=64, help="pairs in flight in prbj's engine")
    parser.add_argument(
        "--batch-tokens", type=int, default=None, help="default: prbj's default for the device"
    )
    parser.add_argument("--max-length", type=int, default=8192)
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each side; the best counts")
    args = parser.parse_args()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]

    dataset = pairs_for(args.dataset)
    with tempfile.TemporaryDirectory(prefix="prbj-bench-") as tmp:
        folder = build_model(Path(tmp) / "model", dataset, args.hidden, args.layers)
        conversations = [
            conversation(pair.view(args.context), answer)  # type: ignore[arg-type]
            for pair in dataset.pairs
            for answer in (pair.chosen, pair.rejected)
        ]
        plain = PlainLoop(folder, dtype)
        n_params = sum(p.numel() for p in plain.model.parameters())
        print(
            f"model: Llama classifier, {n_params / 1e6:.1f}M parameters, {args.dtype}, "
            f"torch threads {torch.get_num_threads()}"
        )
        print(
            f"data: {dataset.source}, {len(dataset.pairs)} pairs, {len(conversations)} answers, {args.context}"
        )

        # Both sides load their weights before the clock starts; prbj's first run is the warm-up that loads.
        judge = prbj_judge(folder, args, Path(tmp) / "cache-warm-up", args.batch_tokens)
        prbj_run(judge, dataset, args.concurrency)
        plain.score(conversations[:4])

        plain_s = prbj_s = plain_cpu = prbj_cpu = float("inf")
        for run in range(args.repeat):
            start, cpu = time.perf_counter(), time.process_time()
            reference, tokens = plain.score(conversations)
            plain_s = min(plain_s, time.perf_counter() - start)
            plain_cpu = min(plain_cpu, time.process_time() - cpu)

            judge = prbj_judge(folder, args, Path(tmp) / f"cache-{run}", args.batch_tokens)
            passes, batches = judge.model.forward_passes, judge.batcher.batches_run
            computed = judge.model.tokens_scored
            start, cpu = time.perf_counter(), time.process_time()
            judgments = prbj_run(judge, dataset, args.concurrency)
            prbj_s = min(prbj_s, time.perf_counter() - start)
            prbj_cpu = min(prbj_cpu, time.process_time() - cpu)
            passes, batches = judge.model.forward_passes - passes, judge.batcher.batches_run - batches
            computed = judge.model.tokens_scored - computed

        # Another batch size shares the cache entries but not the loaded model: a truly fresh rerun.
        rerun = prbj_judge(folder, args, Path(tmp) / f"cache-{args.repeat - 1}", judge.model.batch_tokens + 1)
        start = time.perf_counter()
        prbj_run(rerun, dataset, args.concurrency)
        cached_s = time.perf_counter() - start

    ours = [score for j in judgments for score in (j.score_chosen, j.score_rejected)]
    worst = max(abs(a - b) for a, b in zip(ours, reference, strict=True))
    # A pair's verdict is what the benchmark scores; a rounding difference must never flip one.
    flipped = sum(
        (a > b) != (c > d) or (a == b) != (c == d)
        for a, b, c, d in zip(ours[::2], ours[1::2], reference[::2], reference[1::2], strict=True)
    )
    truncated = sum(bool(j.truncated) for j in judgments)
    print(
        f"tokens: {tokens} (mean {tokens / len(conversations):.0f} per answer; {truncated} pairs truncated)"
    )
    print(f"best of {args.repeat}, weights already loaded, tokenising included; wall clock and CPU time:")
    print(
        f"  plain transformers loop, one item at a time: {plain_s:7.3f} s  {plain_cpu:7.3f} s CPU  "
        f"{tokens / plain_s:7.0f} tokens/s"
    )
    print(
        f"  prbj scalar judge (engine, batches, cache):  {prbj_s:7.3f} s  {prbj_cpu:7.3f} s CPU  "
        f"{tokens / prbj_s:7.0f} tokens/s"
    )
    print(
        f"  prbj: {passes} forward passes in {batches} batches (concurrency {args.concurrency}, "
        f"batch tokens {judge.model.batch_tokens}), "
        f"{computed} tokens computed for {tokens} in the conversations "
        f"(shared prefixes: {judge.model.prefix_sharing})"
    )
    print(f"ratio plain / prbj: {plain_s / prbj_s:.2f}x wall clock, {plain_cpu / prbj_cpu:.2f}x CPU time")
    print(f"largest score difference prbj vs plain: {worst:.2e}; verdicts that differ: {flipped}")
    print(
        f"rerun served from the cache: {cached_s:.3f} s, {rerun.model.forward_passes} forward passes, "
        f"weights loaded: {rerun.model.loaded}"
    )


if __name__ == "__main__":
    main()
