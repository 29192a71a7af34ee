"""`prbj export`: a real run (a loopback LLM judge that quotes the profile back, and offline judges) exported to
Every Eval Ever, Inspect, CSV and Parquet; every format read back by its own reader where one runs here
(inspect-ai in this venv; Every Eval Ever's validator and converter on Python >= 3.12: the `readers` tests)."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from export_runs import MARKER, UNREADABLE, judged_run

from prbj.cli import main
from prbj.data.csv_cells import neutralise_frame, write_frame
from prbj.experiments.manifest import Manifest, StageRecord
from prbj.export.table import TABLE_COLUMNS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return judged_run(tmp_path_factory.mktemp("judged"))


@pytest.fixture(scope="module")
def judgments(run_dir: Path) -> pl.DataFrame:
    return pl.read_parquet(run_dir / "judgments.parquet")


def export(*args: str | Path) -> str:
    result = CliRunner().invoke(main, ["export", *map(str, args)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def exported_bytes(folder: Path) -> Iterator[tuple[Path, bytes]]:
    """Every byte written under `folder`, with compressed containers opened: the members of an Inspect .eval
    (a zip) and the cells of a Parquet file."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        yield path, data
        if path.suffix == ".eval":
            with zipfile.ZipFile(path) as archive:
                for member in archive.namelist():
                    yield path / member, archive.read(member)
        if path.suffix == ".parquet":
            yield path, pl.read_parquet(path).write_csv().encode()


def eee_python() -> str:
    """The Python (>= 3.12) with every-eval-ever installed: .ci/run makes it and names it in PRBJ_EEE_PYTHON."""
    python = os.environ.get("PRBJ_EEE_PYTHON")
    if not python:
        if os.environ.get("CI"):
            pytest.fail("PRBJ_EEE_PYTHON is not set: .ci/run makes the Python 3.12 env with every-eval-ever")
        pytest.skip("PRBJ_EEE_PYTHON is not set (a Python >= 3.12 with every-eval-ever[inspect])")
    return python


def every_eval_ever(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [eee_python(), "-m", "every_eval_ever", *map(str, args)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


# --- the flat table -------------------------------------------------------------------------------------------


def documented_columns() -> list[str]:
    """The columns docs/export.md lists, in its table of the flat export."""
    text = (ROOT / "docs" / "export.md").read_text(encoding="utf-8")
    section = text.split("## The flat table", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE)


def test_csv_and_parquet_hold_one_row_per_judgment_in_the_documented_columns(
    run_dir: Path, judgments: pl.DataFrame, tmp_path: Path
) -> None:
    export(run_dir, "--format", "csv", "--out", tmp_path / "j.csv")
    export(run_dir, "--format", "parquet", "--out", tmp_path / "out")
    table = pl.read_parquet(tmp_path / "out" / "judgments.parquet")
    assert table.columns == list(TABLE_COLUMNS) == documented_columns()[: len(TABLE_COLUMNS)]
    assert table.height == judgments.height
    with (tmp_path / "j.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == judgments.height and list(rows[0]) == list(TABLE_COLUMNS)
    # The figures are the run's: same outcome per judgment, the texts joined in, the judge's model named.
    joined = table.join(judgments.select("pair_id", "judge", "context", "correct", "status"),
                        on=["pair_id", "judge", "context"], suffix="_run")  # fmt: skip
    assert joined.height == judgments.height
    assert (joined["correct"] == joined["correct_run"]).all() and (
        joined["status"] == joined["status_run"]
    ).all()
    llm = table.filter(pl.col("judge") == "gemini-3-flash")
    assert set(llm["model"]) == {"gemini/gemini-3-flash-preview"} and set(llm["order"]) <= {"A", "B"}
    assert llm.filter(pl.col("pair_id") == f"t-{UNREADABLE:03d}")["status"].to_list() == ["parse_error"] * 2
    assert all(q.startswith("Which film camera") for q in table["question"])
    assert all(a.startswith("CHOSEN-") for a in table["chosen_answer"])


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised(tmp_path: Path) -> None:
    frame = pl.DataFrame({
        "text": ["=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd", "plain", "a=b"],
        "number": [-1.5, 2.0, -3.0, 0.0, 1.0, 1.0, 1.0, 1.0],
    })  # fmt: skip
    write_frame(tmp_path / "t.csv", frame)
    with (tmp_path / "t.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["text"] for r in rows] == [
        "'=HYPERLINK(\"http://x\")", "'+1+1", "'-2+3", "'@SUM(A1)", "'\tcmd", "'\rcmd", "plain", "a=b",
    ]  # fmt: skip
    assert rows[0]["number"] == "-1.5"  # a negative number stays a number
    assert neutralise_frame(frame)["number"].to_list() == frame["number"].to_list()


# --- privacy ---------------------------------------------------------------------------------------------------


def test_no_profile_text_in_any_export_unless_asked(
    run_dir: Path, judgments: pl.DataFrame, tmp_path: Path
) -> None:
    # The run itself holds it: the judge quoted the profile, and the context block is what it was shown.
    assert (
        judgments["reply"].str.contains(MARKER).any()
        and judgments["context_block"].str.contains(MARKER).any()
    )
    for fmt in ("eee", "inspect", "csv", "parquet"):
        export(run_dir, "--format", fmt, "--out", tmp_path / "plain" / fmt)
        export(run_dir, "--format", fmt, "--out", tmp_path / "with" / fmt, "--include-profiles")
        leaks = [str(p) for p, data in exported_bytes(tmp_path / "plain" / fmt) if MARKER.encode() in data]
        assert not leaks, leaks
        assert any(MARKER.encode() in data for _, data in exported_bytes(tmp_path / "with" / fmt)), fmt
    # The quote was cut, the rest of the reply kept.
    table = pl.read_parquet(tmp_path / "plain" / "parquet" / "judgments.parquet")
    quoted = table.filter((pl.col("context") == "profile") & (pl.col("judge") == "gemini-3-flash"))["reply"]
    assert all("[profile text removed]" in r and "Result:" in r for r in quoted if "cannot choose" not in r)
    # sample_hash hashes ids only (benchmark, pair id): the same pair hashes the same in every run and model.
    slug = table["benchmark"][0]
    for row in table.iter_rows(named=True):
        assert row["sample_hash"] == hashlib.sha256(json.dumps([slug, row["pair_id"]]).encode()).hexdigest()


def test_without_the_pairs_replies_are_left_out_rather_than_exported_unchecked(
    run_dir: Path, tmp_path: Path
) -> None:
    copy = shutil.copytree(run_dir, tmp_path / "moved" / run_dir.name)
    for name in ("run.json", "summary.json"):  # the dataset it names is gone
        document = json.loads((copy / name).read_text())
        document["dataset"]["source"] = str(tmp_path / "gone.jsonl")
        (copy / name).write_text(json.dumps(document))
    result = CliRunner().invoke(
        main, ["export", str(copy), "--format", "parquet", "--out", str(tmp_path / "t")]
    )
    assert result.exit_code == 0, result.output
    assert "replies and error messages are left out" in result.output
    table = pl.read_parquet(tmp_path / "t" / "judgments.parquet")
    assert table["reply"].null_count() == table["error"].null_count() == table.height
    assert table["question"].null_count() == table.height


# --- Every Eval Ever -----------------------------------------------------------------------------------------


def eee_documents(folder: Path) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    out = []
    for aggregate in sorted(folder.glob("data/*/*/*/*.json")):
        samples = aggregate.with_name(aggregate.stem + "_samples.jsonl")
        lines = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]
        out.append((json.loads(aggregate.read_text(encoding="utf-8")), lines))
    return out


def test_eee_export_holds_the_run_s_figures_and_one_line_per_judgment(
    run_dir: Path, judgments: pl.DataFrame, tmp_path: Path
) -> None:
    export(run_dir, "--format", "eee", "--out", tmp_path)
    documents = eee_documents(tmp_path)
    assert {doc["model_info"]["name"] for doc, _ in documents} == {"gemini-3-flash", "length", "bm25-profile"}
    assert sum(len(lines) for _, lines in documents) == judgments.height
    summary = json.loads((run_dir / "summary.json").read_text())["results"]
    for doc, lines in documents:
        judge = doc["model_info"]["name"]
        assert len(lines) == judgments.filter(pl.col("judge") == judge).height
        assert doc["detailed_evaluation_results"]["total_rows"] == len(lines)
        for result in doc["evaluation_results"]:
            details = result["metric_config"]["additional_details"]
            context, subset = details["prbj.context"], details["prbj.subset"]
            (expected,) = [
                r for r in summary if (r["judge"], r["context"], r["subset"]) == (judge, context, subset)
            ]
            details = result["score_details"]
            assert details["score"] == expected["accuracy"]
            assert details["uncertainty"]["num_samples"] == expected["n_ok"]
            interval = details["uncertainty"]["confidence_interval"]
            assert (interval["lower"], interval["upper"]) == (expected["ci_low"], expected["ci_high"])
        # A user's own file is not a public dataset.
        assert doc["evaluation_results"][0]["source_data"]["additional_details"]["public"] == "false"
    (llm, lines) = next(d for d in documents if d[0]["model_info"]["name"] == "gemini-3-flash")
    # Issue 45 item 6: the id names the developer (Google), the platform the route prbj called it by.
    assert llm["model_info"]["id"] == "google/gemini-3-flash-preview"
    assert llm["model_info"]["developer"] == "google" and llm["model_info"]["inference_platform"] == "gemini"
    assert llm["model_info"]["additional_details"]["prbj.model"] == "gemini/gemini-3-flash-preview"
    assert llm["evaluation_results"][0]["generation_config"]["generation_args"]["max_tokens"] == 5120
    failed = [line for line in lines if line["metadata"]["status"] != "ok"]
    assert len(failed) == 2 and all(not line["evaluation"]["is_correct"] and line["error"] for line in failed)
    shown_b = next(line for line in lines if line["metadata"]["order"] == "B")
    assert (
        shown_b["input"]["choices"][1] == shown_b["input"]["reference"][0]
    )  # the chosen answer, shown second


def length_run(card: str, out: Path, cache: Path) -> Path:
    """The `length` judge's run on a benchmark card's sample, in `out`."""
    result = CliRunner().invoke(
        main,
        [
            "judge",
            "--no-progress",
            "--benchmark",
            card,
            "-p",
            "length",
            "--out",
            str(out),
            "--cache-dir",
            str(cache),
        ],
    )
    assert result.exit_code == 0, result.output
    (run,) = out.iterdir()
    return run


def test_a_card_run_is_exported_as_its_benchmark_and_a_users_card_as_private_pairs(tmp_path: Path) -> None:
    """A run on a shipped card's sample is that benchmark's demo sample (not Personalized RewardBench's), on a card
    of the user's own (whose sample is theirs) private pairs: in the flat table, EEE's source and its folder."""
    exported = {}
    for card in ("personamem", str(ROOT / "examples" / "benchmarks" / "inhouse.toml")):
        out = tmp_path / Path(card).stem
        run = length_run(card, out / "runs", tmp_path / "cache")
        export(run, "--format", "csv", "--out", out / "csv")
        export(run, "--format", "eee", "--out", out / "eee")
        (doc, _), *_ = eee_documents(out / "eee")
        source = doc["evaluation_results"][0]["source_data"]
        table = pl.read_csv(out / "csv" / "judgments.csv")
        exported[Path(card).stem] = (
            set(table["benchmark"]),
            source["dataset_name"],
            source["additional_details"],
        )
        assert [p.name for p in (out / "eee" / "data").iterdir()] == [source["dataset_name"]]
    benchmark, dataset_name, details = exported["personamem"]
    assert benchmark == {"personamem-sample"} and dataset_name == "personamem-sample"
    assert details["public"] == "true"
    benchmark, dataset_name, details = exported["inhouse"]
    assert benchmark == {"private-pairs"} and dataset_name == "private-pairs"
    assert details["public"] == "false"


def test_a_best_of_k_item_is_exported_with_every_candidate(tmp_path: Path) -> None:
    """PersonaMem's items of four options: the flat table's other_answers, EEE's choices and the Inspect sample's
    choices hold all four, the preferred one first."""
    from inspect_ai.log import read_eval_log

    from prbj.data import load_dataset

    run = length_run("personamem", tmp_path / "runs", tmp_path / "cache")
    items = {p.id: list(p.candidates) for p in load_dataset(benchmark="personamem").pairs}
    assert {len(c) for c in items.values()} == {4}
    export(run, "--format", "parquet", "--out", tmp_path / "table")
    table = pl.read_parquet(tmp_path / "table" / "judgments.parquet")
    for row in table.iter_rows(named=True):
        exported = [row["chosen_answer"], row["rejected_answer"], *json.loads(row["other_answers"])]
        assert exported == items[row["pair_id"]]
    export(run, "--format", "eee", "--out", tmp_path / "eee")
    ((_, lines),) = eee_documents(tmp_path / "eee")
    assert {line["sample_id"]: line["input"]["choices"] for line in lines} == items
    # Read back beside its instance file, the EEE record shows every candidate again.
    (record,) = (tmp_path / "eee").glob("data/*/*/*/*.json")
    shown = CliRunner().invoke(main, ["show", str(record), "--pair", "32k-q-101"], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    assert all(text in shown.output for text in items["32k-q-101"]) and "Answer 4 (other)" in shown.output
    export(run, "--format", "inspect", "--out", tmp_path / "inspect")
    (log_file,) = (tmp_path / "inspect").glob("*.eval")
    samples = read_eval_log(str(log_file)).samples or []
    assert {str(sample.id): sample.choices for sample in samples} == items


def test_eee_claims_bootstrap_resamples_only_where_an_interval_drew_them(tmp_path: Path) -> None:
    """PRB's sample (60 independent pairs, the length judge at 50%): the percentile bootstrap, 2,000 resamples.
    PersonalRewardBench's (users repeat): every interval is over users (Korn–Graubard, Clopper–Pearson at the
    edges), which draws none, so no result claims a resample count."""
    counts = {}
    for card in ("prb", "personal-reward-bench"):
        out = tmp_path / card
        run = length_run(card, out / "runs", tmp_path / "cache")
        export(run, "--format", "eee", "--out", out / "eee")
        ((doc, _),) = eee_documents(out / "eee")
        counts[card] = {
            r["evaluation_result_id"].split(":")[0]: r["score_details"]["uncertainty"].get(
                "num_bootstrap_samples"
            )
            for r in doc["evaluation_results"]
            if r["evaluation_result_id"].endswith(":all")
        }
    assert counts["prb"] == {"accuracy": 2000}
    assert set(counts["personal-reward-bench"].values()) == {None}
    assert {"accuracy", "prbj.user_accuracy", "prbj.headline"} <= set(counts["personal-reward-bench"])


@pytest.mark.readers
def test_every_eval_ever_s_validator_accepts_the_export(run_dir: Path, tmp_path: Path) -> None:
    export(run_dir, "--format", "eee", "--out", tmp_path)
    files = sorted(str(p) for p in tmp_path.glob("data/*/*/*/*"))
    assert len(files) == 6
    checked = every_eval_ever("validate", "--format", "json", *files)
    # 0: clean; 1 would be errors, 2 warnings only.
    assert checked.returncode == 0, checked.stdout + checked.stderr
    reports = json.loads(checked.stdout)
    assert len(reports) == 6 and all(r["valid"] and not r["warnings"] for r in reports)
    assert sorted(r["line_count"] for r in reports if r["file_type"] == "instance") == [9, 9, 18]


# --- Inspect -------------------------------------------------------------------------------------------------


def test_inspect_reads_every_judgment_as_a_scored_sample(
    run_dir: Path, judgments: pl.DataFrame, tmp_path: Path
) -> None:
    from inspect_ai.log import read_eval_log

    export(run_dir, "--format", "inspect", "--out", tmp_path)
    logs = {path.name: read_eval_log(str(path)) for path in sorted(tmp_path.glob("*.eval"))}
    assert len(logs) == 4  # gemini-3-flash × {profile, none}, length, bm25-profile
    assert sum(len(log.samples or []) for log in logs.values()) == judgments.height
    for log in logs.values():
        assert log.status == "success"
        judge, context = log.eval.task_display_name.split(" · ")[1], log.eval.task_args["context"]
        expected = judgments.filter((pl.col("judge") == judge) & (pl.col("context") == context))
        samples = log.samples or []
        values = [s.scores["prbj_verdict"].value for s in samples if s.scores]
        assert len(values) == len(samples) == expected.height
        ok = expected.filter(pl.col("status") == "ok")
        assert values.count("C") == ok["correct"].sum() and values.count("N") == expected.height - ok.height
        tokens = int(expected["prompt_tokens"].fill_null(0).sum())
        assert log.stats.model_usage[log.eval.model].input_tokens == tokens
        for sample in samples:
            assert {"pair_id", "subset", "context", "order", "status", "cause", "cost_usd"} <= set(
                sample.metadata
            )
            if sample.metadata["order"] == "B":  # the answers in the order shown: the chosen one second
                assert sample.target == "B" and sample.choices and sample.choices[1].startswith("CHOSEN-")
    llm = logs[next(name for name in logs if "gemini-3-flash_profile" in name)]
    assert llm.eval.model == "google/gemini-3-flash-preview"
    assert llm.results is not None and llm.results.scores[0].metrics["accuracy"].value == pytest.approx(6 / 8)
    assert llm.eval.dataset.sample_ids == [f"t-{i:03d}" for i in range(1, 10)]


@pytest.mark.readers
def test_every_eval_ever_converts_the_inspect_export(run_dir: Path, tmp_path: Path) -> None:
    export(run_dir, "--format", "inspect", "--out", tmp_path / "logs")
    (log,) = tmp_path.glob("logs/*_gemini-3-flash_profile.eval")
    converted = every_eval_ever("convert", "inspect", "--log_path", log, "--output_dir", tmp_path / "data")
    assert converted.returncode == 0, converted.stdout + converted.stderr
    (aggregate,) = tmp_path.glob("data/*/*/*/*.json")
    document = json.loads(aggregate.read_text())
    assert document["model_info"]["id"] == "google/gemini-3-flash-preview"
    (accuracy,) = [r for r in document["evaluation_results"] if r["metric_config"]["metric_id"] == "accuracy"]
    assert accuracy["score_details"]["score"] == pytest.approx(6 / 8)
    # A private dataset stays one through Inspect: EEE files it as `other`, not as a Hugging Face dataset.
    assert accuracy["source_data"]["source_type"] == "other"
    samples = aggregate.with_name(aggregate.stem + "_samples.jsonl").read_text().splitlines()
    assert len(samples) == 9
    checked = every_eval_ever("validate", *sorted(str(p) for p in tmp_path.glob("data/*/*/*/*")))
    assert checked.returncode == 0, checked.stdout + checked.stderr


# --- experiments ---------------------------------------------------------------------------------------------


def test_an_experiment_folder_exports_every_judge_run(
    run_dir: Path, judgments: pl.DataFrame, tmp_path: Path
) -> None:
    study = tmp_path / "study"
    for name in ("a", "b"):
        shutil.copytree(run_dir, study / "runs" / name)
    manifest = Manifest(study / "manifest.json", {"name": "study"})
    manifest.stages = {
        "judge-a": StageRecord("done", "x", run_dirs=["runs/a"]),
        "judge-b": StageRecord("done", "y", run_dirs=["runs/b"]),
    }
    manifest.save()
    export(study, "--format", "csv", "--out", tmp_path / "study.csv")
    table = pl.read_csv(tmp_path / "study.csv", infer_schema=False)
    assert table.height == 2 * judgments.height


# --- round trip: an EEE file read as a run -------------------------------------------------------------------

THIRD_PARTY = {
    "schema_version": "0.3.0",
    "evaluation_id": "personalized-rewardbench/acme_rm-7b/1790000000",
    "retrieved_timestamp": "1790000000",
    "source_metadata": {"source_type": "evaluation_run", "source_organization_name": "Acme",
                        "evaluator_relationship": "first_party"},
    "eval_library": {"name": "their-harness", "version": "1.0"},
    "model_info": {"name": "acme/rm-7b", "id": "acme/rm-7b",
                   "additional_details": {"deployment_type": "self_deployed", "model_availability": "open_weights"}},
    "evaluation_results": [{
        "evaluation_name": "Personalized RewardBench",
        "source_data": {"dataset_name": "personalized-rewardbench", "source_type": "hf_dataset",
                        "hf_repo": "QiyaoMa/Personalized-RewardBench"},
        "metric_config": {"metric_id": "accuracy", "lower_is_better": False, "score_type": "continuous",
                          "min_score": 0, "max_score": 1},
        "score_details": {"score": 0.71, "uncertainty": {"num_samples": 300,
                          "confidence_interval": {"lower": 0.62, "upper": 0.79, "confidence_level": 0.95}}},
    }],
}  # fmt: skip


def third_party_file(folder: Path, document: dict[str, Any]) -> Path:
    path = (
        folder
        / "data"
        / "personalized-rewardbench"
        / "acme"
        / "rm-7b"
        / "0b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b.json"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_report_and_show_read_an_eee_file_beside_a_prbj_run(run_dir: Path, tmp_path: Path) -> None:
    theirs = third_party_file(tmp_path, THIRD_PARTY)
    result = CliRunner().invoke(
        main,
        ["report", str(run_dir), str(theirs), "--mix-datasets", "--out", str(tmp_path / "board"), "--quiet"],
    )
    assert result.exit_code == 0, result.output
    board = (tmp_path / "board" / "report.md").read_text(encoding="utf-8")
    assert "acme/rm-7b" in board and "71.0" in board and "gemini-3-flash" in board
    # Our own export read back: the same figures, and prbj show finds the texts in its instance file.
    export(run_dir, "--format", "eee", "--out", tmp_path / "ours")
    (ours,) = tmp_path.glob("ours/data/*/google/*/*[0-9a-f].json")
    shown = CliRunner().invoke(main, ["show", str(ours), "--pair", "t-001", "--context", "none"])
    assert shown.exit_code == 0, shown.output
    assert "CHOSEN-001" in shown.output and "Result:" in shown.output


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            lambda d: d["evaluation_results"][0]["score_details"].update(score="high"),
            "evaluation_results[0].score_details.score",
        ),
        (
            lambda d: d["evaluation_results"][0]["score_details"].update(score=7.1),
            "evaluation_results[0].score_details.score",
        ),
        (lambda d: d.update(model_info="acme"), "model_info"),
        (lambda d: d.update(evaluation_results=[]), "evaluation_results"),
    ],
)
def test_a_malformed_eee_file_is_one_line_naming_file_and_field(
    tmp_path: Path, change: Any, field: str
) -> None:
    document = json.loads(json.dumps(THIRD_PARTY))
    change(document)
    path = third_party_file(tmp_path, document)
    result = CliRunner().invoke(main, ["report", str(path), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    (line,) = [line for line in result.output.splitlines() if line.strip()]
    assert line.startswith("error: ") and str(path) in line and f"field '{field}'" in line
