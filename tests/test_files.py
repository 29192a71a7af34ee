"""The one write-then-rename helper and the one JSON reader every package's files go through."""

from __future__ import annotations

import threading
from pathlib import Path

import polars as pl
import pytest

from prbj.data.files import read_json, write_atomic, write_json, write_parquet
from prbj.errors import DataError


def test_json_is_written_whole_with_the_shared_layout(tmp_path: Path) -> None:
    path = write_json(tmp_path / "x.json", {"name": "é", "n": [1, 2]})
    assert path.read_text(encoding="utf-8") == '{\n  "name": "é",\n  "n": [\n    1,\n    2\n  ]\n}\n'
    assert read_json(path) == {"name": "é", "n": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = write_json(tmp_path / "x.json", {"version": 1})

    def broken(tmp: Path) -> None:
        tmp.write_text("half a fi", encoding="utf-8")
        raise OSError("disk full")

    with pytest.raises(OSError):
        write_atomic(path, broken)
    assert read_json(path) == {"version": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_two_writers_of_one_file_at_once_both_finish(tmp_path: Path) -> None:
    """A second writer (another thread here; another `prbj report` of the same run in real use) writes the same
    file while the first is half way: each renames its own whole file, neither finds its temporary gone."""
    path = tmp_path / "report.html"
    errors: list[BaseException] = []

    def second() -> None:
        try:
            write_atomic(path, lambda tmp: tmp.write_text("second", encoding="utf-8"))
        except BaseException as err:  # handed back to the test's thread
            errors.append(err)

    def first(tmp: Path) -> None:
        tmp.write_text("fir", encoding="utf-8")
        other = threading.Thread(target=second)
        other.start()
        other.join()
        with tmp.open("a", encoding="utf-8") as rest:
            rest.write("st")

    write_atomic(path, first)
    assert errors == []
    assert path.read_text(encoding="utf-8") == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_parquet_goes_through_the_same_rename(tmp_path: Path) -> None:
    frame = pl.DataFrame({"a": [1, 2]})
    path = write_parquet(tmp_path / "t.parquet", frame)
    assert pl.read_parquet(path).equals(frame)
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


def test_read_json_names_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n  "a": 1,\n}\n', encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{path}:3: invalid JSON: "):
        read_json(path)
    with pytest.raises(DataError, match="file not found"):
        read_json(tmp_path / "missing.json")
