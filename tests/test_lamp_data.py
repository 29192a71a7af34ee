"""LaMP-QA-format input of `prbj build`: files, folders, splits, subsets, and errors that name file:line:field."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from lamp_fixture import lamp_record, write_fixture

from prbj.data.lamp import load_lamp
from prbj.errors import DataError


def _error(spec: str, **kwargs) -> str:
    with pytest.raises(DataError) as info:
        load_lamp(spec, **kwargs)
    return str(info.value)


def test_reads_jsonl_json_and_parquet_alike(tmp_path: Path) -> None:
    jsonl = write_fixture(tmp_path / "lamp.jsonl")
    records = [lamp_record(r) for r in ("art-1", "soc-2")]
    (tmp_path / "lamp.json").write_text(json.dumps(records))
    pl.DataFrame(records).write_parquet(tmp_path / "lamp.parquet")
    from_jsonl = load_lamp(str(jsonl))
    assert len(from_jsonl.records) == 9 and len(from_jsonl.subsets) == 3
    from_json = load_lamp(str(tmp_path / "lamp.json"))
    from_parquet = load_lamp(str(tmp_path / "lamp.parquet"))
    assert from_json.fingerprint() == from_parquet.fingerprint()
    assert [r.id for r in from_parquet.records] == ["lamp-art-1", "lamp-soc-2"]
    assert from_parquet.records[0].rubric_aspects[0].aspect == "GOLD-ASPECT low budget"
    # Records hold no answers: that is what the build makes.
    assert not hasattr(from_jsonl.records[0], "chosen")


def test_errors_name_file_line_and_field(tmp_path: Path) -> None:
    broken = lamp_record("art-1")
    broken["profile"][1] = {"id": "x", "category": "c"}
    path = tmp_path / "lamp.jsonl"
    path.write_text(json.dumps(lamp_record("art-2")) + "\n" + json.dumps(broken) + "\n")
    assert _error(str(path)) == f"{path}:2: field 'profile[1]': field 'text': missing"
    no_rubric = {k: v for k, v in lamp_record("art-1").items() if k != "rubric_aspects"}
    path.write_text(json.dumps(no_rubric) + "\n")
    assert _error(str(path)) == f"{path}:1: field 'rubric_aspects': missing"
    twice = json.dumps(lamp_record("art-1"))
    path.write_text(twice + "\n" + twice + "\n")
    assert "field 'id': duplicate id 'lamp-art-1' (first seen at" in _error(str(path))


def test_category_comes_from_the_record_the_folder_or_a_single_subset(tmp_path: Path) -> None:
    bare = {k: v for k, v in lamp_record("art-1").items() if k != "category"}
    loose = tmp_path / "loose.jsonl"
    loose.write_text(json.dumps(bare) + "\n")
    message = _error(str(loose))
    assert message == f"{loose}:1: field 'category': missing (or name the subset with --subset)"
    assert load_lamp(str(loose), subsets=["society"]).records[0].category == "Society_and_Culture"
    # The hub layout: <subset>/<split>-*.parquet; the split picks the files, the folder names the subset.
    for split in ("test", "validation"):
        folder = tmp_path / "hub" / "Lifestyle_and_Personal_Development"
        folder.mkdir(parents=True, exist_ok=True)
        record = {**bare, "id": f"{split}-1"}
        pl.DataFrame([record]).write_parquet(folder / f"{split}-00000-of-00001.parquet")
    test = load_lamp(str(tmp_path / "hub"))
    assert [(r.id, r.category) for r in test.records] == [("test-1", "Lifestyle_and_Personal_Development")]
    validation = load_lamp(str(tmp_path / "hub"), split="validation")
    assert [r.id for r in validation.records] == ["validation-1"]
    assert "--split train: no such split" in _error(str(tmp_path / "hub"), split="train")


def test_subset_selection_and_limit(tmp_path: Path) -> None:
    lamp = load_lamp(str(write_fixture(tmp_path / "lamp.jsonl")))
    assert [r.id for r in lamp.select(["art"], limit=2).records] == ["lamp-art-1", "lamp-art-2"]
    assert len(lamp.select(limit=1).records) == 3
    with pytest.raises(DataError, match="--subset 'music': not in this dataset"):
        lamp.select(["music"])


def test_hub_unreachable_names_the_cause(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    message = _error("hf:alireza7/LaMP-QA", subsets=["art"])
    assert message.startswith("--input hf:alireza7/LaMP-QA: could not fetch it from the Hugging Face hub (")
    assert "pass their folder or a file with --input" in message
    assert (
        _error(str(tmp_path / "nothing.jsonl"))
        == f"--input {tmp_path / 'nothing.jsonl'}: no such file or folder"
    )
