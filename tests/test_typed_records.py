"""The typed pass over clean .jsonl files (prbj.data.typed_records) reads exactly what the field-by-field
reading (prbj.data.validate) reads, or steps aside: every variant below loads to the same pairs and
fingerprint, or fails with the same message, whichever path reads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import make_record
from prbj.data import loaders
from prbj.data.dataset import file_blobs
from prbj.data.loaders import load_dataset
from prbj.data.typed_records import typed_pairs
from prbj.errors import DataError


def _lines(records: list[Any]) -> bytes:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records).encode()


def _with(index: int, **changes: Any) -> dict[str, Any]:
    return make_record(index, **changes)


def _post_changed(index: int, **changes: Any) -> dict[str, Any]:
    record = make_record(index)
    record["profile"][1] = {**record["profile"][1], **changes}
    return record


def _aspect_without(index: int, field: str) -> dict[str, Any]:
    record = make_record(index)
    del record["rubric_aspects"][0][field]
    return record


CLEAN = [make_record(1), make_record(2, "Society_and_Culture")]
# name -> (file bytes, whether the typed pass takes it as it stands)
VARIANTS: dict[str, tuple[bytes, bool]] = {
    "clean": (_lines(CLEAN), True),
    "extra fields": (_lines([_with(1, source="forum", score=3), make_record(2)]), True),
    "blank lines and CRLF": (_lines(CLEAN).replace(b"\n", b"\r\n") + b"\n   \n", True),
    "a key written twice": (
        _lines([make_record(1)]).replace(b'{"id": "t-001"', b'{"id": "first", "id": "t-001"'),
        True,
    ),
    "empty narrative": (_lines([_with(1, narrative="")]), True),
    "an id written as a number": (_lines([_with(1, id=7)]), False),
    "a post id written as a number": (_lines([_post_changed(1, id=12)]), False),
    "a post without category": (_lines([_post_changed(1, category=None)]), False),
    "an aspect without evidence": (_lines([_aspect_without(1, "evidence")]), False),
    "a blank post text": (_lines([_post_changed(1, text="  \n ")]), False),
    "a blank question": (_lines([_with(1, question="\u3000")]), False),
    "the same answer twice": (_lines([_with(1, rejected=make_record(1)["chosen"] + "  ")]), False),
    "a duplicate id": (_lines([make_record(1), make_record(1)]), False),
    # The scoring standard is optional (issue 45 item 8): left out, both readings take the pair without it.
    "no narrative": (_lines([{k: v for k, v in make_record(1).items() if k != "narrative"}]), True),
    "no rubric aspects": (_lines([{k: v for k, v in make_record(1).items() if k != "rubric_aspects"}]), True),
    "a null narrative": (_lines([_with(1, narrative=None)]), False),
    "a post that is text": (_lines([_with(1, profile=["I shoot film"])]), False),
    "a line that is not JSON": (_lines([make_record(1), "{not json"]), False),
    "bytes that are not UTF-8": (_lines([make_record(1)]).replace(b"budget", b"budg\xff"), False),
    "a record that names its user": (_lines([_with(1, user_id="u1")]), False),
}


def _field_by_field(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as patched:
        patched.setattr(loaders, "typed_pairs", lambda blobs: None)
        return _outcome(path)


def _outcome(path: Path) -> Any:
    try:
        dataset = load_dataset(str(path))
    except DataError as err:
        return ("error", str(err))
    return ("pairs", dataset.pairs, dataset.fingerprint())


@pytest.mark.parametrize("name", list(VARIANTS))
def test_both_readings_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    data, taken = VARIANTS[name]
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(data)
    assert (typed_pairs(file_blobs([path])) is not None) is taken
    assert _outcome(path) == _field_by_field(path, monkeypatch)


def test_a_clean_file_is_read_without_the_field_by_field_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The speed is not silently lost: a clean file never reaches validate.parse_pair."""
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(VARIANTS["clean"][0])

    def refuse(record: Any) -> Any:
        raise AssertionError("read field by field")

    monkeypatch.setattr("prbj.data.validate.parse_pair", refuse)
    dataset = load_dataset(str(path))
    assert [p.id for p in dataset.pairs] == ["t-001", "t-002"]
    assert dataset.pairs[0].profile[0].text == "I shoot black and white film on a budget."


def test_a_folder_with_another_kind_of_file_is_read_field_by_field(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(_lines([make_record(1)]))
    (tmp_path / "b.json").write_text(json.dumps([make_record(2)]), encoding="utf-8")
    assert typed_pairs(file_blobs([tmp_path / "a.jsonl", tmp_path / "b.json"])) is None
    assert {p.id for p in load_dataset(str(tmp_path)).pairs} == {"t-001", "t-002"}
