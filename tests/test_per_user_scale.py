"""A big per-user file (issue 41 item 6; figures in bench/bench_per_user.py): a dry run plans and runs no offline
judge, the file is read as a stream (never whole, its records never all at once) with the fingerprint a whole
read gives, and the ids prbj makes are checked without a table of them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import write_jsonl
from prbj.cli import main
from prbj.data import load_dataset, streaming
from prbj.data.dataset import blobs_hash, file_blobs
from prbj.errors import DataError
from prbj.judges.baselines import BASELINES


def _rows(users: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for user in range(users):
        for split in ("train", "test"):
            rows.append(
                {
                    "user_id": f"u{user}",
                    "context": [
                        {"role": "user", "content": f"hello from {user}"},
                        {"role": "model", "content": "hi, how can I help?"},
                        {"role": "user", "content": f"which lens for portraits, {split}?"},
                    ],
                    "chosen": {"role": "model", "content": f"a bright prime lens for {user}"},
                    "rejected": {"role": "model", "content": f"a long zoom for {user}"},
                    "split": split,
                }
            )
    return rows


def test_a_dry_run_runs_no_offline_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The offline judges send nothing and cost nothing: a dry run (a plan) has nothing to ask for them, and on a
    big file running them took minutes."""
    path = write_jsonl(tmp_path / "users.jsonl", _rows(3))

    async def refuse(*_: object) -> list[float]:
        raise AssertionError("an offline judge ran in a dry run")

    for judge in BASELINES.values():
        monkeypatch.setattr(judge, "score", refuse)
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        main, ["judge", "--dataset", str(path), "--dry-run", "--no-progress", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.output
    assert (
        "offline judges: 0 calls, $0 (random, length, bm25-profile, embed-profile): would judge 3 pairs (one per "
        "user)" in result.output
    )
    assert (
        "benchmark per-user (version 1): 3 pairs (one per user) to judge, 3 earlier choices as history"
        in result.output
    )
    assert not (tmp_path / "out").exists()


def test_a_per_user_file_is_read_as_a_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_jsonl(tmp_path / "users.jsonl", _rows(20))
    whole = load_dataset(str(path))
    # Chunks far smaller than a line: every line spans chunks, and the pairs and fingerprint are the same.
    monkeypatch.setattr(streaming, "CHUNK_BYTES", 37)

    def no_whole_read(self: Path) -> bytes:
        raise AssertionError(f"{self} was read whole")

    monkeypatch.setattr(Path, "read_bytes", no_whole_read)
    streamed = load_dataset(str(path))
    monkeypatch.undo()
    assert streamed.pairs == whole.pairs and streamed.fingerprint() == whole.fingerprint()
    # The fingerprint is the one a whole read of the file's bytes takes (as runs and baselines recorded it).
    assert streamed.content_hash == blobs_hash(file_blobs([path]))


def test_a_file_without_a_last_newline_keeps_its_last_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "users.jsonl", _rows(2))
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    digest = hashlib.sha256()
    lines = list(streaming.file_lines(path, digest))
    assert len(lines) == 4 and lines[-1][1].endswith(b"}")
    assert len(load_dataset(str(path)).pairs) == 2


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ([None, None, "u1:1"], ":3: field 'id': duplicate id 'u1:1' (the id of user 'u1''s record number 1"),
        (["u1:2", None, None], ":3: field 'id': duplicate id 'u1:2' (first seen at"),
        (["x", None, "x"], ":3: field 'id': duplicate id 'x' (first seen at"),
    ],
)
def test_ids_made_by_prbj_and_given_ids_never_collide(
    tmp_path: Path, ids: list[str | None], message: str
) -> None:
    rows = [{"user_id": "u1", "prompt": f"q{n}", "chosen": "a", "rejected": "b"} for n in range(3)]
    for row, given in zip(rows, ids, strict=True):
        if given is not None:
            row["id"] = given
    path = write_jsonl(tmp_path / "users.jsonl", rows)
    with pytest.raises(DataError) as caught:
        load_dataset(str(path))
    assert str(caught.value).startswith(f"{path}{message}")
