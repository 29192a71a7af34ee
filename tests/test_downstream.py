"""`prbj downstream add/show`: ingest official BoN summaries, PPO tables and prbj downstream tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from prbj.analysis.downstream import SCHEMA, read_outcomes, read_store
from prbj.cli import main
from prbj.errors import DataError


def _summary(base: float) -> dict[str, Any]:
    """An official evaluation_summary.json: k keys are strings, as json.dump writes int keys."""
    return {
        subset: {
            str(k): {
                "k": k,
                "num_examples": 20 + s,
                "mean_score": base + 0.1 * s + 0.01 * k,
                "std_score": 0.25,
                "min_score": 0.0,
                "max_score": 2.0,
            }
            for k in (1, 2, 4)
        }
        for s, subset in enumerate(("Art_and_Entertainment", "Society_and_Culture"))
    }


def _add(*args: str) -> Any:
    return CliRunner().invoke(main, ["downstream", "add", *args])


def _one_line_error(result: Any) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1, result.output
    return lines[0]


def test_official_summary_becomes_one_row_per_subset_and_k(tmp_path: Path) -> None:
    path = tmp_path / "evaluation_summary.json"
    path.write_text(json.dumps(_summary(1.0)))
    store = tmp_path / "store"
    result = _add(str(path), "--rm", "RM-A", "--store", str(store))
    assert result.exit_code == 0, result.output
    assert "6 row(s) added" in result.output
    table = read_store(store)
    assert table.schema == pl.Schema(SCHEMA)
    row = table.filter(pl.col("subset") == "Society_and_Culture", pl.col("k") == 4).row(0, named=True)
    assert row["rm"] == "RM-A" and row["source"] == "bon"
    # The official file is on the 0-2 scale; the store holds every score on 0-1, converted with a note.
    assert row["score"] == pytest.approx((1.0 + 0.1 + 0.04) / 2)
    assert row["n"] == 21 and row["std"] == 0.125
    assert row["scale"] == 1.0 and row["original_scale"] == 2.0
    assert row["origin"] == str(path)
    assert "0-2 scale divided by 2" in result.output


def test_adding_again_replaces_rows_with_the_same_key(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(_summary(1.0)))
    second.write_text(json.dumps(_summary(1.5)))
    assert _add(str(first), "--rm", "RM-A", "--store", str(store)).exit_code == 0
    assert _add(str(first), "--rm", "RM-B", "--store", str(store)).exit_code == 0
    result = _add(str(second), "--rm", "RM-A", "--store", str(store))
    assert "0 row(s) added, 6 replaced" in result.output
    table = read_store(store)
    assert table.height == 12
    a = table.filter(pl.col("rm") == "RM-A", pl.col("k") == 1, pl.col("subset") == "Art_and_Entertainment")
    assert a["score"].to_list() == [pytest.approx(1.51 / 2)]
    b = table.filter(pl.col("rm") == "RM-B", pl.col("k") == 1, pl.col("subset") == "Art_and_Entertainment")
    assert b["score"].to_list() == [pytest.approx(1.01 / 2)]


def test_ppo_csv_and_json_records(tmp_path: Path) -> None:
    csv_path = tmp_path / "ppo.csv"
    csv_path.write_text("rm,subset,score\nRM-A,Art_and_Entertainment,0.61\nRM-B,Art_and_Entertainment,0.55\n")
    json_path = tmp_path / "ppo.json"
    json_path.write_text(
        json.dumps([{"rm": "RM-C", "subset": "Art_and_Entertainment", "score": 0.7, "n": 90}])
    )
    store = tmp_path / "store"
    assert _add(str(csv_path), str(json_path), "--store", str(store)).exit_code == 0
    table = read_store(store).sort("rm")
    assert table.select("rm", "source", "k", "score", "n").rows() == [
        ("RM-A", "ppo", None, 0.61, None),
        ("RM-B", "ppo", None, 0.55, None),
        ("RM-C", "ppo", None, 0.7, 90),
    ]


def test_rm_option_fills_a_missing_rm_column_and_source_overrides(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"subset": "all", "score": 3.5}) + "\n")
    (outcome,) = read_outcomes(path, rm="RM-Z", source="ppo-7b")
    assert (outcome.rm, outcome.source, outcome.subset, outcome.score) == ("RM-Z", "ppo-7b", "all", 3.5)


def test_a_bon_run_folder_with_a_downstream_table_is_ingested(tmp_path: Path) -> None:
    """The contract a prbj BoN run fulfils: a downstream.parquet with the store's columns in its folder."""
    run = tmp_path / "bon-run"
    run.mkdir()
    pl.DataFrame(
        {
            "rm": ["RM-A", "RM-A", "RM-B"],
            "source": ["bon", "bon", "bon"],
            "subset": ["Society_and_Culture"] * 3,
            "k": [1, 16, 16],
            "score": [0.8, 1.1, 0.9],
            "n": [30, 30, 30],
            "std": [0.2, 0.2, 0.3],
        }
    ).write_parquet(run / "downstream.parquet")
    store = tmp_path / "store"
    result = _add(str(run), "--store", str(store))
    assert result.exit_code == 0, result.output
    table = read_store(store)
    assert table.filter(pl.col("rm") == "RM-A", pl.col("k") == 16)["score"].to_list() == [1.1]
    assert set(table["origin"]) == {str(run / "downstream.parquet")}


def test_show_lists_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "evaluation_summary.json"
    path.write_text(json.dumps(_summary(1.0)))
    store = tmp_path / "store"
    _add(str(path), "--rm", "RM-A", "--store", str(store))
    result = CliRunner().invoke(main, ["downstream", "show", "--store", str(store)], terminal_width=160)
    assert result.exit_code == 0
    assert "6 rows" in result.output and "RM-A" in result.output and "0.5700" in result.output


def test_show_without_a_store_is_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["downstream", "show", "--store", str(tmp_path / "none")])
    assert "no downstream table yet" in _one_line_error(result)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (
            lambda d: d["Society_and_Culture"]["2"].update(mean_score="high"),
            "'Society_and_Culture.2.mean_score'",
        ),
        (lambda d: d["Art_and_Entertainment"]["4"].pop("mean_score"), "'Art_and_Entertainment.4.mean_score'"),
        (lambda d: d["Art_and_Entertainment"]["1"].update(k=2), "'Art_and_Entertainment.1.k'"),
        (lambda d: d["Art_and_Entertainment"].update(best={"mean_score": 1}), "'Art_and_Entertainment.best'"),
        (
            lambda d: d["Society_and_Culture"]["1"].update(num_examples=2.5),
            "'Society_and_Culture.1.num_examples'",
        ),
    ],
)
def test_bad_summary_is_one_line_naming_file_and_field(tmp_path: Path, mutate: Any, field: str) -> None:
    document = _summary(1.0)
    mutate(document)
    path = tmp_path / "evaluation_summary.json"
    path.write_text(json.dumps(document))
    store = tmp_path / "store"
    line = _one_line_error(_add(str(path), "--rm", "RM-A", "--store", str(store)))
    assert line.startswith(f"error: {path}: field {field}")
    assert not store.exists()


def test_bad_csv_row_names_the_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "ppo.csv"
    path.write_text("rm,subset,score\nRM-A,Art_and_Entertainment,0.61\nRM-B,Art_and_Entertainment,n/a\n")
    line = _one_line_error(_add(str(path), "--store", str(tmp_path / "s")))
    assert line == f"error: {path}:3: field 'score': expected a number, got 'n/a'"


def test_missing_field_in_json_records_names_the_record(tmp_path: Path) -> None:
    path = tmp_path / "ppo.json"
    path.write_text(json.dumps([{"rm": "A", "subset": "x", "score": 1}, {"rm": "B", "score": 2}]))
    line = _one_line_error(_add(str(path), "--store", str(tmp_path / "s")))
    assert line == f"error: {path} record 2: field 'subset': missing"


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "evaluation_summary.json"
    path.write_text('{\n  "Art": {\n    "1": {"mean_score": 0.5,}\n  }\n}\n')
    line = _one_line_error(_add(str(path), "--rm", "A", "--store", str(tmp_path / "s")))
    assert line.startswith(f"error: {path}:3: invalid JSON")


def test_summary_without_rm_name_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "evaluation_summary.json"
    path.write_text(json.dumps(_summary(1.0)))
    assert "--rm NAME" in _one_line_error(_add(str(path), "--store", str(tmp_path / "s")))


def test_rm_option_conflicting_with_an_rm_column_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "ppo.csv"
    path.write_text("rm,subset,score\nRM-A,all,0.61\n")
    assert "drop one of them" in _one_line_error(_add(str(path), "--rm", "X", "--store", str(tmp_path / "s")))


def test_duplicate_keys_in_one_input_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "ppo.csv"
    path.write_text("rm,subset,score\nRM-A,all,0.61\nRM-A,all,0.62\n")
    assert "appears twice" in _one_line_error(_add(str(path), "--store", str(tmp_path / "s")))


def test_an_official_file_and_a_prbj_run_correlate_as_on_one_scale(tmp_path: Path) -> None:
    """The official file (0-2) and a prbj BoN run (0-1) describe the same curves; in one store they must be
    the same numbers, so correlations across the two kinds see one scale."""
    from scipy import stats

    from prbj.analysis.downstream import UNIT_SCALE, Outcome, add_outcomes

    unit = {("Art_and_Entertainment", k): 0.2 + 0.1 * i for i, k in enumerate((1, 2, 4))}
    official = {
        "Art_and_Entertainment": {str(k): {"k": k, "mean_score": 2 * v} for (_, k), v in unit.items()}
    }
    path = tmp_path / "evaluation_summary.json"
    path.write_text(json.dumps(official))
    store = tmp_path / "store"
    assert _add(str(path), "--rm", "official-rm", "--store", str(store)).exit_code == 0
    prbj_rows = [Outcome("prbj-rm", "bon", s, k, v, None, None, "run") for (s, k), v in unit.items()]
    add_outcomes(store, prbj_rows)
    table = read_store(store)
    assert set(table["scale"]) == {UNIT_SCALE}
    scores = {
        rm: table.filter(pl.col("rm") == rm).sort("k")["score"].to_list() for rm in ("official-rm", "prbj-rm")
    }
    assert scores["official-rm"] == pytest.approx(scores["prbj-rm"])
    # Across both kinds one scale: the pooled Pearson equals the one on the true [0, 1] values.
    pooled = scores["official-rm"] + scores["prbj-rm"]
    truth = list(unit.values()) * 2
    assert stats.pearsonr(pooled, [k for k in (1, 2, 4)] * 2)[0] == pytest.approx(
        stats.pearsonr(truth, [1, 2, 4] * 2)[0]
    )
    with pytest.raises(DataError, match="must be converted"):
        add_outcomes(store, [Outcome("x", "bon", "Art", 1, 1.5, None, None, "raw", scale=2.0)])
