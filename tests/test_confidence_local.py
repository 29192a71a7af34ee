"""--confidence logprobs with a local model (`hf-local:`): the probability comes from the model's own logits at
the verdict token. The tiny Llama of test_local_hf answers "Result : B" with logits set by hand at the verdict
position, so its P(A) over the two letters is known in closed form."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_local_hf import HIDDEN, _dataset, build_tiny_llama

from prbj.cli import main

# After ":" the model's logit for B is 1.0 and for A 0.5 times the normalised hidden state, which RMSNorm
# scales to 1 / sqrt(1/HIDDEN + eps) (one-hot embeddings, attention and MLP outputs zeroed); every other token 0.
SCALE = 1.0 / math.sqrt(1.0 / HIDDEN + 1e-6)
P_A = 1.0 / (1.0 + math.exp((1.0 - 0.5) * SCALE))


def test_a_local_models_probability_comes_from_its_logits(tmp_path: Path) -> None:
    table = {"<|assistant|>": "Result", "Result": ":", ":": "B", "B": "</s>"}
    model = build_tiny_llama(tmp_path / "model", table, strengths={(":", "B"): 1.0, (":", "A"): 0.5})
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        [
            "judge",
            "--no-progress",
            "-p",
            f"hf-local:{model}",
            "--dataset",
            str(_dataset(tmp_path, 6)),
            "--context",
            "none",
            "--confidence",
            "logprobs",
            "--out",
            str(out),
            "--cache-dir",
            str(tmp_path / "c"),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    (run_dir,) = list(out.iterdir())
    frame = pl.read_parquet(run_dir / "judgments.parquet")
    assert set(frame["verdict"].drop_nulls()) <= {"chosen", "rejected"} and frame.height == 6
    assert set(frame["confidence_source"]) == {"logprobs"}
    for position, p_chosen, confidence in zip(
        frame["chosen_position"], frame["p_chosen"], frame["confidence"], strict=True
    ):
        assert p_chosen == pytest.approx(P_A if position == "A" else 1 - P_A, abs=1e-5)
        # It said B: its confidence is P(B) whichever answer B was.
        assert confidence == pytest.approx(1 - P_A, abs=1e-5)


def test_a_greedy_local_judge_is_judged_once_under_samples(tmp_path: Path) -> None:
    # Its K samples would be one reply K times (agreement 100%, vote share 0 or 1): judged once, as offline
    # judges are, and its probability still comes from its logits.
    table = {"<|assistant|>": "Result", "Result": ":", ":": "B", "B": "</s>"}
    model = build_tiny_llama(tmp_path / "model", table, strengths={(":", "B"): 1.0, (":", "A"): 0.5})
    out = tmp_path / "out"
    command = ["judge", "--no-progress", "-p", f"hf-local:{model}", "-p", "length", "--context", "none"]
    command += ["--dataset", str(_dataset(tmp_path, 6)), "--samples", "3", "--confidence", "logprobs"]
    command += ["--out", str(out), "--cache-dir", str(tmp_path / "c")]
    result = CliRunner().invoke(main, command, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (
        f"note: --samples 3: hf-local:{model} decodes greedily (in-process), so it is judged once"
        in " ".join(result.output.split())
    )
    (run_dir,) = list(out.iterdir())
    frame = pl.read_parquet(run_dir / "judgments.parquet").filter(pl.col("judge") == f"hf-local:{model}")
    assert frame.height == 6
    assert "sample_verdicts" not in frame.columns or frame["sample_verdicts"].is_null().all()
    assert set(frame["confidence_source"]) == {"logprobs"}
