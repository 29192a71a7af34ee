"""`--ray`: local models in Ray actors on a one-machine cluster started here, the driver keeping the cache.

Two tiny reward models and one tiny causal LM (built by the tests, as in test_scalar and test_local_hf) are
judged locally and with `--ray`; the run files must agree, a cached rerun must send nothing to the actors, and
an actor killed mid-run must leave every pair judged."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("ray")

import ray
from test_local_hf import build_tiny_llama
from tiny_rm import build_reward_model

from conftest import SUBSET_NAMES, make_record, write_jsonl
from prbj.cli import main
from prbj.local.ray_executor import ActorPool

pytestmark = pytest.mark.slow

N_PAIRS = 12


@pytest.fixture(scope="module")
def cluster() -> Any:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("data")
    records = [make_record(i, SUBSET_NAMES[(i - 1) % 3]) for i in range(1, N_PAIRS + 1)]
    return write_jsonl(folder / "pairs.jsonl", records)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    texts = [dataset.read_text(encoding="utf-8")]
    table = {"<|assistant|>": "Result", "Result": ":", ":": "B", "B": "</s>"}
    return {
        "rm_a": build_reward_model(root / "rm-a", texts, seed=0),
        "rm_b": build_reward_model(root / "rm-b", texts, with_pad=True, seed=1),
        "llm": build_tiny_llama(root / "says-b", table),
    }


def _providers(models: dict[str, Path]) -> list[str]:
    return ["-p", f"hf:{models['rm_a']}", "-p", f"hf:{models['rm_b']}", "-p", f"hf-local:{models['llm']}"]


def _judge(
    tmp_path: Path, name: str, dataset: Path, models: dict[str, Path], *extra: str
) -> tuple[str, Path]:
    out = tmp_path / name
    args = ["judge", "--dataset", str(dataset), "--context", "none", "--out", str(out), *_providers(models)]
    args += ["--cache-dir", str(tmp_path / f"cache-{name.split('-')[0]}"), *extra]
    result = CliRunner().invoke(main, args, catch_exceptions=False, terminal_width=200)
    assert result.exit_code == 0, result.output
    (run_dir,) = out.iterdir()
    return result.output, run_dir


def _frame(run_dir: Path) -> pl.DataFrame:
    frame = pl.read_parquet(run_dir / "judgments.parquet")
    return frame.select("pair_id", "judge", "status", "verdict", "score_chosen", "score_rejected").sort(
        "judge", "pair_id"
    )


def _assert_same_results(local: Path, on_ray: Path) -> None:
    a, b = _frame(local), _frame(on_ray)
    assert a.height == b.height == 3 * N_PAIRS
    assert a.drop("score_chosen", "score_rejected").equals(b.drop("score_chosen", "score_rejected"))
    for column in ("score_chosen", "score_rejected"):
        left, right = a[column].to_list(), b[column].to_list()
        assert [x is None for x in left] == [y is None for y in right]
        assert [x for x in left if x is not None] == pytest.approx(
            [y for y in right if y is not None], abs=1e-5
        )
    assert json.loads((local / "summary.json").read_text()) == json.loads(
        (on_ray / "summary.json").read_text()
    )


def test_ray_gives_the_local_results_and_a_cached_rerun_sends_nothing(
    cluster: Any, tmp_path: Path, dataset: Path, models: dict[str, Path]
) -> None:
    _, local = _judge(tmp_path, "local", dataset, models, "--no-progress")
    # Three models at once on a 2-CPU cluster: each actor asks for half a CPU.
    output, on_ray = _judge(
        tmp_path, "ray-1", dataset, models, "--ray", "--progress", "--cpus-per-model", "0.5"
    )
    _assert_same_results(local, on_ray)
    assert set(_frame(on_ray)["status"]) == {"ok"}
    # One placement line per model, and what each sent.
    for model in models.values():
        assert any(
            line.startswith("ray: ") and str(model) in line and " on 1 actor: " in line
            for line in output.splitlines()
        ), output
    assert f"ray: hf:{models['rm_a']}: {2 * N_PAIRS} items sent" in output

    output, rerun = _judge(
        tmp_path, "ray-2", dataset, models, "--ray", "--progress", "--cpus-per-model", "0.5"
    )
    _assert_same_results(local, rerun)
    # The reward models say so; the causal LM is not even opened (the gateway answers its calls).
    assert output.count("nothing sent (every answer came from the cache)") == 2, output
    assert " on 1 actor: " not in output and "items sent" not in output  # no actor was even started


def test_an_actor_killed_mid_run_is_restarted_and_every_pair_judged(
    cluster: Any, tmp_path: Path, dataset: Path, models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, local = _judge(tmp_path, "local", dataset, models, "--no-progress")
    killed: list[str] = []
    send = ActorPool._send

    def send_then_kill(pool: ActorPool, chunk: Any) -> Any:
        """The first chunk reaches a live actor, which is then killed: it dies holding that chunk. (Killed
        while still loading its model, it would only be restarted before any chunk reached it.)"""
        if killed:
            return send(pool, chunk)
        actor = pool.actors[chunk.actor]
        ray.get(actor.__ray_ready__.remote())
        sent = send(pool, chunk)
        ray.kill(actor, no_restart=False)
        killed.append(pool.label)
        return sent

    monkeypatch.setattr(ActorPool, "_send", send_then_kill)
    output, on_ray = _judge(
        tmp_path,
        "ray-k",
        dataset,
        models,
        "--ray",
        "--progress",
        "--replicas",
        "2",
        "--cpus-per-model",
        "0.25",
    )
    assert killed, "no actor was killed"
    _assert_same_results(local, on_ray)
    assert set(_frame(on_ray)["status"]) == {"ok"}
    assert "on 2 actors" in output
    # The chunks the killed actor held were sent again (the driver's resend path, not Ray's own retries).
    resent = [int(n) for n in re.findall(r"(\d+) chunks resent", output)]
    assert resent and max(resent) >= 1, output


def test_a_model_that_cannot_load_fails_its_judge_alone(
    cluster: Any, tmp_path: Path, dataset: Path, models: dict[str, Path]
) -> None:
    # The driver opens config and tokenizer only; the weights are first read in the actor.
    broken = tmp_path / "broken-rm"
    broken.mkdir()
    for item in models["rm_a"].iterdir():
        if "safetensors" not in item.name:
            (broken / item.name).write_bytes(item.read_bytes())
    (broken / "model.safetensors").write_bytes(b"not weights")
    out = tmp_path / "out"
    args = [
        "judge",
        "--dataset",
        str(dataset),
        "--context",
        "none",
        "--out",
        str(out),
        "--ray",
        "--cpus-per-model",
        "0.5",
    ]
    args += ["-p", f"hf:{broken}", "-p", f"hf:{models['rm_b']}", "--cache-dir", str(tmp_path / "cache")]
    result = CliRunner().invoke(main, args, catch_exceptions=False, terminal_width=200)
    # The other judge's figures are all there, but a judge with no successful judgment fails the run (exit 1).
    assert result.exit_code == 1, result.output
    assert "had no successful judgment" in result.output
    (run_dir,) = out.iterdir()
    frame = _frame(run_dir)
    by_judge = dict(frame.group_by("judge").agg(pl.col("status").unique().sort()).iter_rows())
    assert by_judge == {f"hf:{broken}": ["api_error"], f"hf:{models['rm_b']}": ["ok"]}
    # Said once when it happens, then counted among the failures by cause.
    lines = result.output.splitlines()
    assert sum(line.startswith(f"ray: cannot run hf:{broken} on Ray") for line in lines) == 1


def test_without_ray_installed_the_option_is_one_line_exit_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dataset: Path
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    result = CliRunner().invoke(main, ["judge", "--ray", "--dataset", str(dataset), "--out", str(tmp_path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [
        "error: --ray needs ray, which is not installed (the 'ray' extra): pip install 'prbj[ray]'"
    ]
