"""Best-of-N end to end on the bundled sample: a scripted policy, LLM reward model and gold judge on the loopback
provider (real HTTP), offline reward models, then `prbj downstream add` and `prbj correlate`. Requests are
counted at the server."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from bon_script import ANSWERS, POLICY_MARK, gold_aspect_score, is_gold, reply
from click.testing import CliRunner
from loopback import ProviderServer

from prbj.cli import main
from prbj.data import load_dataset

LIMIT = 1  # questions per subset: 3 questions
OFFLINE_RMS = ("random", "length", "bm25-profile", "embed-profile")
QUESTIONS = {p.id: p for p in load_dataset().select(limit=LIMIT).pairs}


@pytest.fixture(scope="module")
def server() -> Iterator[ProviderServer]:
    with ProviderServer(reply=reply) as running:
        yield running


@pytest.fixture(scope="module", autouse=True)
def keys() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test-bon")
        patch.setenv("GEMINI_API_KEY", "gem-test-bon")
        yield


def prbj(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@dataclass
class Workspace:
    server: ProviderServer
    root: Path

    @property
    def cache(self) -> list[str]:
        providers = self.root / "providers"
        if not providers.is_dir():
            providers.mkdir()
            # A paid gold judge with its own prices and no rate limit, so that the tests do not wait on pacing.
            (providers / "gold.toml").write_text(
                'model = "openai/gold-judge"\napi_key_env = "OPENAI_API_KEY"\nmax_concurrency = 16\n'
                "[price]\ninput = 1\noutput = 2\n[params]\ntemperature = 0\nmax_tokens = 200\n"
            )
        return [
            "--cache-dir",
            str(self.root / "cache"),
            "--api-base",
            self.server.url,
            "--no-progress",
            "--providers-dir",
            str(providers),
        ]

    def sample(self, n: int) -> Path:
        out = self.root / f"runs-n{n}"
        prbj(
            "bon",
            "sample",
            "--policy",
            "openai-compatible",
            "--n",
            str(n),
            "--limit",
            str(LIMIT),
            "--out",
            str(out),
            *self.cache,
        )
        runs = sorted(out.iterdir())
        return runs[-1]

    def sent(self) -> int:
        return self.server.count()


@pytest.fixture(scope="module")
def chain(keys: None, server: ProviderServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """sample (N=2, then N=4) → score (offline RMs + an LLM RM) → evaluate, counting requests at each step."""
    ws = Workspace(server, tmp_path_factory.mktemp("bon"))
    server.reset()
    counts: dict[str, int] = {}
    small = ws.sample(2)
    counts["sample n=2"] = ws.sent()
    run = ws.sample(4)
    counts["sample n=4"] = ws.sent() - counts["sample n=2"]
    before = ws.sent()
    ws.sample(4)
    counts["sample rerun"] = ws.sent() - before
    rm_args = [a for rm in OFFLINE_RMS for a in ("-p", rm)]
    before = ws.sent()
    prbj("bon", "score", str(run), *rm_args, *ws.cache)
    counts["score offline"] = ws.sent() - before
    before = ws.sent()
    prbj("bon", "score", str(run), "-p", "gemini-3-flash", *ws.cache)
    counts["score llm"] = ws.sent() - before
    before = ws.sent()
    prbj("bon", "score", str(run), "-p", "gemini-3-flash", *ws.cache)
    counts["score llm rerun"] = ws.sent() - before
    before = ws.sent()
    output = prbj("bon", "evaluate", str(run), "--gold", "gold", *ws.cache)
    counts["evaluate"] = ws.sent() - before
    first_summary = (run / "summary.json").read_bytes()
    before = ws.sent()
    prbj("bon", "evaluate", str(run), "--gold", "gold", *ws.cache)
    counts["evaluate rerun"] = ws.sent() - before
    return {
        "ws": ws,
        "small": small,
        "run": run,
        "counts": counts,
        "requests": list(server.requests),
        "evaluate_output": output,
        "first_summary": first_summary,
    }


def test_growing_n_buys_only_new_samples_and_reruns_cost_nothing(chain) -> None:
    counts = chain["counts"]
    questions = len(QUESTIONS)
    assert counts["sample n=2"] == 2 * questions
    assert counts["sample n=4"] == 2 * questions  # samples 0 and 1 come from the cache
    assert counts["sample rerun"] == 0
    assert counts["score offline"] == 0
    assert counts["score llm"] == 4 * questions  # one call per sample
    assert counts["score llm rerun"] == 0
    assert counts["evaluate rerun"] == 0
    small = pl.read_parquet(chain["small"] / "samples.parquet")
    grown = pl.read_parquet(chain["run"] / "samples.parquet")
    assert grown.height == 4 * questions and set(grown["status"]) == {"ok"}
    assert small.sort("pair_id", "sample_index")["text"].to_list() == (
        grown.filter(pl.col("sample_index") < 2).sort("pair_id", "sample_index")["text"].to_list()
    )
    # The keyless self-hosted policy got a placeholder key, not the OPENAI_API_KEY set for the gold judge.
    policy = [r for r in chain["requests"] if POLICY_MARK in r.system]
    assert {r.headers.get("Authorization") for r in policy} == {"Bearer EMPTY"}
    # Each sample was requested with its own seed (42 + index), so the scripted policy wrote distinct answers.
    assert grown.group_by("pair_id").agg(pl.col("text").n_unique())["text"].to_list() == [4] * questions


def test_picks_shared_by_rms_and_k_are_graded_once(chain) -> None:
    picks = pl.read_parquet(chain["run"] / "picks.parquet")
    distinct = picks.filter(pl.col("sample_index").is_not_null()).select("pair_id", "sample_index").unique()
    assert picks.height > distinct.height  # several RMs and k share picks
    assert chain["counts"]["evaluate"] == distinct.height  # per-answer mode: one call per distinct pick
    gold = pl.read_parquet(chain["run"] / "gold.parquet")
    assert gold.height == distinct.height


def _expected_curves(run: Path) -> dict[tuple[str, str, int], list[float]]:
    """Recompute picks from the RM scores (first k samples, highest score, lowest index on ties, failures
    never win) and grade them with the scripted gold rule, independently of prbj's own pick code."""
    samples = pl.read_parquet(run / "samples.parquet")
    texts = {(r["pair_id"], r["sample_index"]): r["text"] for r in samples.iter_rows(named=True)}
    scores = pl.read_parquet(run / "scores.parquet").filter(pl.col("status") == "ok")
    expected: dict[tuple[str, str, int], list[float]] = {}
    for (rm, pair_id), rows in scores.group_by(["rm", "pair_id"]):
        by_index = dict(zip(rows["sample_index"], rows["score"], strict=True))
        for k in (1, 2, 4):
            candidates = sorted((i, s) for i, s in by_index.items() if i < k)
            best = max(candidates, key=lambda item: (item[1], -item[0]))[0]
            text = texts[(pair_id, best)]
            if text.startswith("UNGRADABLE"):
                continue
            value = gold_aspect_score(text) / 2
            subset = QUESTIONS[pair_id].category
            for key in ((rm, subset, k), (rm, "all", k)):
                expected.setdefault(key, []).append(value)
    return expected


def test_summary_matches_an_independent_recomputation(chain) -> None:
    run = chain["run"]
    summary = json.loads((run / "summary.json").read_text())
    expected = _expected_curves(run)
    rows = {(r["rm"], r["subset"], r["k"]): r for r in summary["results"]}
    assert set(rows) == {
        (rm, s, k)
        for rm in [*OFFLINE_RMS, "gemini-3-flash:pointwise"]
        for s in ["all", *(p.category for p in QUESTIONS.values())]
        for k in (1, 2, 4)
    }
    for key, row in rows.items():
        values = expected.get(key, [])
        assert row["n_scored"] == len(values), key
        assert row["gold_failed"] == row["n"] - len(values), key
        if values:
            assert row["mean"] == pytest.approx(float(np.mean(values)))
            assert row["std"] == pytest.approx(float(np.std(values)))
            assert row["ci_low"] <= row["mean"] <= row["ci_high"]
        else:
            assert row["mean"] is None
    # The length RM takes the longest of the first k: 4 words at k=1 (gold 1 of 2), 9 at k=2 (2 of 2); at k=4
    # the longest is the ungradable sample, which is counted as a gold failure, not scored 0.
    assert rows[("length", "all", 1)]["mean"] == pytest.approx(0.5)
    assert rows[("length", "all", 2)]["mean"] == pytest.approx(1.0)
    assert rows[("length", "all", 4)]["gold_failed"] == len(QUESTIONS)
    assert ANSWERS[43][1] == ANSWERS[44][1]  # the LLM RM ties samples 1 and 2 (same length): index 1 wins
    picks = pl.read_parquet(run / "picks.parquet")
    llm_k4 = picks.filter(pl.col("rm") == "gemini-3-flash:pointwise", pl.col("k") == 4)
    assert llm_k4["sample_index"].to_list() == [1] * len(QUESTIONS)
    # The terminal table shows the same figures; evaluating again writes the same summary.json.
    length_row = next(line for line in chain["evaluate_output"].splitlines() if line.startswith("length"))
    assert length_row.split()[1:4] == ["0.500", "1.000", "—"]
    assert (run / "summary.json").read_bytes() == chain["first_summary"]


def test_official_summary_and_downstream_table(chain) -> None:
    run = chain["run"]
    summary = {
        (r["rm"], r["subset"], r["k"]): r for r in json.loads((run / "summary.json").read_text())["results"]
    }
    official = json.loads((run / "rms" / "length" / "evaluation_summary.json").read_text())
    assert set(official) == {p.category for p in QUESTIONS.values()}
    for subset, by_k in official.items():
        for k_key, entry in by_k.items():
            row = summary[("length", subset, int(k_key))]
            # On the official 0-2 scale: summary.json's [0, 1] figures times 2.
            assert entry == {
                "k": int(k_key),
                "num_examples": row["n_scored"],
                "mean_score": pytest.approx(2 * row["mean"]),
                "std_score": pytest.approx(2 * row["std"]),
                "min_score": pytest.approx(2 * row["min"]),
                "max_score": pytest.approx(2 * row["max"]),
            }
    table = pl.read_parquet(run / "downstream.parquet")
    assert set(table["source"]) == {"bon"}
    graded = {key for key, row in summary.items() if row["mean"] is not None}
    assert set(table.select("rm", "subset", "k").iter_rows()) == graded


def test_no_policy_or_rm_request_sees_the_rubric(chain) -> None:
    requests = chain["requests"]
    rubric = [t for p in QUESTIONS.values() for a in p.rubric_aspects for t in (a.aspect, a.reason)]
    others = [r for r in requests if not is_gold(r)]
    gold = [r for r in requests if is_gold(r)]
    assert others and gold
    for request in others:
        body = json.dumps(request.body, ensure_ascii=False)
        assert not [t for t in rubric if t in body]
    # The check can fail: the gold judge's requests do carry the aspects.
    assert any(t in r.prompt for r in gold for t in rubric)


def test_downstream_add_and_correlate(chain, tmp_path: Path) -> None:
    run = chain["run"]
    store = tmp_path / "downstream"
    prbj("downstream", "add", str(run), "--store", str(store))
    judged = tmp_path / "judge"
    prbj(
        "judge",
        "--no-progress",
        "--limit",
        str(LIMIT),
        "--out",
        str(judged),
        *(a for rm in OFFLINE_RMS for a in ("-p", rm)),
    )
    (judge_run,) = list(judged.iterdir())
    out = tmp_path / "corr"
    output = prbj(
        "correlate",
        "--run",
        str(judge_run),
        "--store",
        str(store),
        "--source",
        "bon",
        "--k",
        "all",
        "--resamples",
        "200",
        "--out",
        str(out),
    )
    assert "Spearman" in output or "ρ" in output
    report = json.loads((out / "correlation.json").read_text())
    tables = {(c["subset"], c["k"]) for c in report["comparisons"]}
    assert {("all", 1), ("all", 2)} <= tables
    compared = next(c for c in report["comparisons"] if (c["subset"], c["k"]) == ("all", 2))
    assert {r["rm"] for r in compared["rms"]} == set(OFFLINE_RMS)


def test_per_aspect_mode_grades_each_aspect_and_agrees(chain, tmp_path: Path) -> None:
    ws: Workspace = chain["ws"]
    run = chain["run"]
    per_answer = json.loads((run / "summary.json").read_text())["results"]
    before = ws.sent()
    prbj("bon", "evaluate", str(run), "--gold", "gold", "--gold-mode", "per-aspect", *ws.cache)
    picks = pl.read_parquet(run / "picks.parquet").filter(pl.col("sample_index").is_not_null())
    distinct = picks.select("pair_id", "sample_index").unique()
    aspects = sum(len(QUESTIONS[pair_id].rubric_aspects) for pair_id in distinct["pair_id"])
    assert ws.sent() - before == aspects
    per_aspect = json.loads((run / "summary.json").read_text())["results"]
    # The scripted grader gives each aspect the same score either way, so the curves agree.
    assert [(r["rm"], r["subset"], r["k"], r["mean"], r["n_scored"]) for r in per_aspect] == [
        (r["rm"], r["subset"], r["k"], r["mean"], r["n_scored"]) for r in per_answer
    ]
    assert json.loads((run / "run.json").read_text())["evaluate"]["gold"]["mode"] == "per-aspect"


def test_spend_is_recorded_and_a_rerun_spends_nothing(chain) -> None:
    history = json.loads((chain["run"] / "run.json").read_text())["history"]
    evaluations = [entry for entry in history if entry["step"] == "evaluate"][:2]
    (first,), (second,) = (entry["usage"] for entry in evaluations)
    assert first["provider"] == "gold" and first["cost_usd"] > 0 and first["cache_hits"] == 0
    assert second["requests_sent"] == 0 and second["cost_usd"] == 0
    assert second["saved_usd"] == pytest.approx(first["cost_usd"])


def test_dry_run_plans_only_the_missing_samples_and_writes_nothing(chain, tmp_path: Path) -> None:
    ws: Workspace = chain["ws"]
    before = ws.sent()
    output = prbj(
        "bon",
        "sample",
        "--policy",
        "openai-compatible",
        "--n",
        "8",
        "--limit",
        str(LIMIT),
        "--out",
        str(tmp_path / "dry"),
        "--dry-run",
        *ws.cache,
    )
    assert ws.sent() == before
    assert not (tmp_path / "dry").exists()
    assert "Plan (nothing sent)" in output
    row = next(line for line in output.splitlines() if line.startswith("openai-compa"))
    needed, cached = row.split()[1:3]
    assert (int(needed), int(cached)) == (4 * len(QUESTIONS), 4 * len(QUESTIONS))


def test_a_failed_evaluation_keeps_the_previous_good_outputs(chain, tmp_path: Path) -> None:
    """Issue 16: when every gold call fails, summary.json and downstream.parquet of the last good evaluation
    stay as they were; the failed grades go to gold.failed.parquet."""
    ws: Workspace = chain["ws"]
    run = tmp_path / "copy"
    shutil.copytree(chain["run"], run)
    before = {name: (run / name).read_bytes() for name in ("summary.json", "downstream.parquet")}
    args = ["--cache-dir", str(tmp_path / "empty-cache"), "--cache-only", *ws.cache[2:]]
    result = CliRunner().invoke(main, ["bon", "evaluate", str(run), "--gold", "gold", *args])
    assert result.exit_code == 1, result.output
    assert "kept the previous summary.json" in result.output
    assert {name: (run / name).read_bytes() for name in before} == before
    assert (run / "gold.failed.parquet").exists()


def test_run_directories_know_what_they_are(chain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26: `prbj report reports/*/` failed on a BoN run (`summary.json: field 'results[0].judge':
    missing`, exit 2). BoN now writes under reports/bon/; a BoN directory given to report, show, diff or check
    is named for what it is: skipped with a note in a glob, one line and exit 2 alone."""
    ws = chain["ws"]
    monkeypatch.chdir(tmp_path)
    before = ws.sent()
    prbj("bon", "sample", "--policy", "openai-compatible", "--n", "4", "--limit", str(LIMIT), *ws.cache)
    assert ws.sent() == before  # all cached
    (own,) = (tmp_path / "reports" / "bon").iterdir()
    assert own.name.startswith("bon-")
    assert CliRunner().invoke(main, ["judge", "--no-progress", "-p", "length", "--limit", "1"]).exit_code == 0
    # An evaluated BoN run where an older prbj wrote it, beside the judge runs.
    shutil.copytree(chain["run"], tmp_path / "reports" / "bon-old")
    folders = sorted(f"reports/{p.name}/" for p in (tmp_path / "reports").iterdir())
    glob = CliRunner(env={"COLUMNS": "300"}).invoke(main, ["report", *folders])
    assert glob.exit_code == 0, glob.output
    assert "skipped reports/bon-old: a best-of-N run directory (prbj bon), not a judge run" in glob.output
    assert "skipped reports/bon: not a run directory" in glob.output
    judge_run = next(p for p in (tmp_path / "reports").iterdir() if p.name[0].isdigit())
    for args in (
        ["report", "reports/bon-old"],
        ["show", "reports/bon-old"],
        ["diff", str(judge_run), "reports/bon-old"],
        ["check", "reports/bon-old", "--baseline", "base.json"],
        ["report", str(own)],
    ):
        alone = CliRunner().invoke(main, args)
        assert alone.exit_code == 2, (args, alone.output)
        lines = alone.output.strip().splitlines()
        assert len(lines) == 1 and "best-of-N run directory (prbj bon), not a judge run" in lines[0], lines


def test_an_in_process_policy_that_cannot_sample_is_refused_before_anything_loads(tmp_path: Path) -> None:
    # hf-local decodes greedily: N samples at a temperature would be one answer N times.
    command = ["bon", "sample", "--policy", "hf-local:Qwen/Qwen2.5-0.5B-Instruct", "--limit", "1"]
    command += ["--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")]
    refused = CliRunner().invoke(main, [*command, "--n", "4"])
    assert refused.exit_code == 2, refused.output
    (line,) = refused.output.strip().splitlines()
    assert line.startswith(
        "error: --policy hf-local:Qwen/Qwen2.5-0.5B-Instruct: in-process models decode greedily"
    )
    assert not (tmp_path / "out").exists()
    # One sample, or samples asked to be identical (temperature 0), are what greedy decoding gives: planned.
    for extra in (["--n", "1"], ["--n", "4", "--temperature", "0"]):
        planned = CliRunner().invoke(main, [*command, *extra, "--dry-run", "--no-progress"])
        assert planned.exit_code == 0, (extra, planned.output)


def test_a_profile_naming_an_in_process_model_is_refused_as_hf_local_is(tmp_path: Path) -> None:
    # Greedy decoding is the transport's, not the name's: a profile may name an in-process model.
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "my-qwen.toml").write_text(
        'model = "prbj-local/Qwen/Qwen2.5-0.5B-Instruct"\npaid = false\napi_key_required = false\n'
    )
    command = [
        "bon",
        "sample",
        "--policy",
        "my-qwen",
        "--providers-dir",
        str(profiles),
        "--limit",
        "1",
        "--n",
        "4",
    ]
    command += ["--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")]
    refused = CliRunner().invoke(main, command)
    assert refused.exit_code == 2, refused.output
    assert refused.output.startswith("error: --policy my-qwen: in-process models decode greedily")
    assert not (tmp_path / "out").exists()
