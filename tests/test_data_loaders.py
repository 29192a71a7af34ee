from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from importlib import resources
from pathlib import Path

import polars as pl
import pytest

from conftest import SUBSET_NAMES, make_record, write_jsonl
from prbj.data import Dataset, load_dataset
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


def test_the_fingerprint_hashes_the_bytes_read_once() -> None:
    """Run files, baselines and leaderboard groups record the fingerprint: the sha256 of the source files'
    bytes (each length-prefixed, in load order), computed while reading them, never by walking the pairs."""
    folder = resources.files("prbj.data") / "sample"
    digest = hashlib.sha256()
    for file in sorted((f for f in folder.iterdir() if f.name.endswith(".jsonl")), key=lambda f: f.name):
        data = file.read_bytes()
        digest.update(f"{len(data)}:".encode() + data)
    sample = load_dataset()
    assert sample.fingerprint() == digest.hexdigest()[:16]
    assert sample.fingerprint() is sample.fingerprint()  # remembered, not recomputed


def test_the_fingerprint_names_the_bytes_and_the_selection(tmp_path: Path) -> None:
    records = [make_record(i) for i in range(1, 4)]
    a = load_dataset(str(write_jsonl(tmp_path / "a.jsonl", records)))
    (tmp_path / "elsewhere").mkdir()
    same = load_dataset(str(write_jsonl(tmp_path / "elsewhere" / "b.jsonl", records)))
    assert a.fingerprint() == same.fingerprint()  # where the file lies does not matter, its bytes do
    reordered = load_dataset(str(write_jsonl(tmp_path / "c.jsonl", records[::-1])))
    changed = load_dataset(
        str(write_jsonl(tmp_path / "d.jsonl", [*records[:2], make_record(3, chosen="x y")]))
    )
    pl.DataFrame(records).write_parquet(tmp_path / "e.parquet")
    parquet = load_dataset(str(tmp_path / "e.parquet"))
    assert parquet.fingerprint() == load_dataset(str(tmp_path / "e.parquet")).fingerprint()
    assert len({a.fingerprint(), reordered.fingerprint(), changed.fingerprint(), parquet.fingerprint()}) == 4
    # A selection names its source and what it kept; selecting everything is the dataset itself.
    first = a.select(limit=1)
    assert first.fingerprint() == a.select(limit=1).fingerprint() != a.fingerprint()
    assert first.fingerprint() != same.select(limit=2).fingerprint()
    assert a.select(limit=10) is a


def test_pairs_made_in_memory_hash_their_fields() -> None:
    pairs = load_dataset().pairs
    made = Dataset("hand-made", pairs)
    assert made.fingerprint() == Dataset("other name", pairs[::-1]).fingerprint()
    moved = replace(pairs[0], profile=pairs[0].profile[1:] + pairs[0].profile[:1])
    assert Dataset("hand-made", (moved, *pairs[1:])).fingerprint() != made.fingerprint()


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


def test_a_json_error_is_a_whole_sentence(tmp_path: Path) -> None:
    """Issue 26: json's own message stops mid-sentence ("Unterminated string starting at"); the place ends it."""
    path = write_jsonl(tmp_path / "p.jsonl", [make_record(1), '{"id": "t-2", "question": "cut'])
    assert _error(path) == f"{path}:2: bad JSON: Unterminated string starting at column 27"


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
    assert _error(path).endswith("(and 2 more records with problems)")


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
