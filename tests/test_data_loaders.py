from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import polars as pl
import pytest

from conftest import SUBSET_NAMES, make_record, write_jsonl
from prbj.data import load_dataset
from prbj.errors import DataError


def test_jsonl_round_trip(small_dataset: Path) -> None:
    data = load_dataset(str(small_dataset))
    assert [p.id for p in data.pairs] == [f"t-{i:03d}" for i in range(1, 7)]
    first = data.pairs[0]
    assert first.category == "Art_and_Entertainment"
    assert first.profile[1].text == "Developing my own rolls at home lately."
    assert first.rubric_aspects[1].aspect == "film development"
    assert data.subsets == sorted(SUBSET_NAMES)


def test_parquet_folder_as_published_on_the_hub(tmp_path: Path) -> None:
    for n, subset in enumerate(SUBSET_NAMES):
        folder = tmp_path / "hub" / subset
        folder.mkdir(parents=True)
        records = [make_record(10 * n + i, subset) for i in range(3)]
        pl.DataFrame(records).write_parquet(folder / "test-00000-of-00001.parquet")
    # A train split lying beside the test split must not be read as benchmark data.
    pl.DataFrame([make_record(99)]).write_parquet(tmp_path / "hub" / SUBSET_NAMES[0] / "train-0.parquet")
    data = load_dataset(str(tmp_path / "hub"))
    assert len(data.pairs) == 9
    assert "t-099" not in {p.id for p in data.pairs}
    assert {p.category for p in data.pairs} == set(SUBSET_NAMES)
    assert data.pairs[0].profile[0].category == "photo"


def test_integer_ids_become_strings(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [make_record(1, id=7)])
    assert load_dataset(str(path)).pairs[0].id == "7"


def test_json_array_file(tmp_path: Path) -> None:
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps([make_record(1), make_record(2)]), encoding="utf-8")
    assert len(load_dataset(str(path)).pairs) == 2


def test_fingerprint_keeps_its_recorded_definition() -> None:
    """Run files and CI baselines record the fingerprint: it stays the sha256 of each pair's asdict JSON in id
    order (computed without asdict's deep copies, and once per dataset)."""
    sample = load_dataset()
    digest = hashlib.sha256()
    for pair in sorted(sample.pairs, key=lambda p: p.id):
        digest.update(json.dumps(asdict(pair), sort_keys=True, ensure_ascii=False).encode())
    assert sample.fingerprint() == digest.hexdigest()[:16] == "e672406f2368fc07"
    assert sample.fingerprint() is sample.fingerprint()  # remembered, not recomputed


def test_fingerprint_ignores_order_and_format(tmp_path: Path) -> None:
    records = [make_record(i) for i in range(1, 4)]
    a = load_dataset(str(write_jsonl(tmp_path / "a.jsonl", records)))
    b = load_dataset(str(write_jsonl(tmp_path / "b.jsonl", records[::-1])))
    pl.DataFrame(records).write_parquet(tmp_path / "c.parquet")
    c = load_dataset(str(tmp_path / "c.parquet"))
    assert a.fingerprint() == b.fingerprint() == c.fingerprint()
    changed = load_dataset(
        str(write_jsonl(tmp_path / "d.jsonl", [*records[:2], make_record(3, chosen="x y")]))
    )
    assert changed.fingerprint() != a.fingerprint()


def test_select_subset_by_prefix_and_limit(small_dataset: Path) -> None:
    data = load_dataset(str(small_dataset))
    assert {p.category for p in data.select(["society"]).pairs} == {"Society_and_Culture"}
    assert len(data.select(limit=1).pairs) == 3
    with pytest.raises(DataError, match="--subset 'cooking'"):
        data.select(["cooking"])


def _error(path: Path) -> str:
    with pytest.raises(DataError) as info:
        load_dataset(str(path))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_missing_field_names_file_line_and_field(tmp_path: Path) -> None:
    bad = make_record(2)
    del bad["question"]
    path = write_jsonl(tmp_path / "p.jsonl", [make_record(1), bad])
    assert _error(path) == f"{path}:2: field 'question': missing"


def test_wrong_type(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [make_record(1, profile="not a list")])
    assert _error(path) == f"{path}:1: field 'profile': expected a list, got str"


def test_wrong_type_inside_a_profile_post(tmp_path: Path) -> None:
    record = make_record(1)
    record["profile"][1]["text"] = 42
    path = write_jsonl(tmp_path / "p.jsonl", [record])
    assert _error(path) == f"{path}:1: field 'profile[1]': field 'text': expected a string, got int"


def test_bad_json_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [make_record(1), '{"id": "t-2", "question": ', make_record(3)])
    message = _error(path)
    assert message.startswith(f"{path}:2: bad JSON")


def test_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    good = json.dumps(make_record(1)).encode()
    path.write_bytes(
        good + b"\n" + json.dumps(make_record(2)).encode().replace(b"street", b"str\xe9et") + b"\n"
    )
    message = _error(path)
    assert message.startswith(f"{path}:2: not valid UTF-8 (byte 0xe9")


def test_duplicate_id_names_both_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [make_record(1), make_record(2), make_record(1)])
    assert _error(path) == f"{path}:3: field 'id': duplicate id 't-001' (first seen at {path}:1)"


def test_identical_answers(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [make_record(1, rejected=make_record(1)["chosen"] + "  ")])
    assert "field 'rejected': is identical to 'chosen'" in _error(path)


def test_empty_answer(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [make_record(1, chosen="   ")])
    assert _error(path) == f"{path}:1: field 'chosen': is empty"


def test_parquet_row_errors_name_the_row(tmp_path: Path) -> None:
    records = [make_record(1), make_record(2, chosen="")]
    pl.DataFrame(records).write_parquet(tmp_path / "p.parquet")
    assert _error(tmp_path / "p.parquet") == f"{tmp_path / 'p.parquet'} row 2: field 'chosen': is empty"


def test_several_problems_are_counted(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "p.jsonl",
        [make_record(1, chosen=""), make_record(2, rejected=""), make_record(3, id=None)],
    )
    assert _error(path).endswith("(and 2 more problems)")


def test_missing_path() -> None:
    with pytest.raises(DataError, match="no such file or folder"):
        load_dataset("/nonexistent/pairs.jsonl")


def test_hub_unreachable_gives_a_clear_cause(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(DataError) as info:
        load_dataset("hf:QiyaoMa/Personalized-RewardBench")
    message = str(info.value)
    assert "could not fetch it from the Hugging Face hub" in message
    assert "--dataset <folder>" in message
