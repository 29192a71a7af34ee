"""The cache folder's table of numbers (prbj.llm.score_table): the answers of reward models written in Python,
one entry per item, beside diskcache's index. What it promises: a value reads back exactly, a stored one is never
overwritten, failures and damaged rows are never served, two processes share it, and the folder's other users
(`prbj cache stats | prune | clear`, a read-only folder) see it as part of the cache."""

from __future__ import annotations

import math
import os
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from prbj.cli import main
from prbj.errors import ConfigError
from prbj.llm.cache import ResponseCache, cache_key
from prbj.llm.score_table import KEY_BYTES, PREFIX_BYTES, SCORES_FILE, item_keys

ROOT = Path(__file__).resolve().parents[1]
MODEL = bytes(range(32))
OTHER_MODEL = bytes(range(1, 33))


def keys(
    *texts: str, model: bytes = MODEL, shared: tuple[object, ...] = ("score", "u1")
) -> tuple[bytes, ...]:
    return item_keys(model, shared, [(text,) for text in texts])


def test_values_read_back_exactly_and_a_stored_one_is_never_overwritten(tmp_path: Path) -> None:
    one, two, three, absent = keys("one", "two", "three", "absent")
    exact = [math.pi, -1e-300, 2.0**60 + 0.5]
    with ResponseCache(tmp_path / "cache") as cache:
        cache.store_scores_soon([(one, exact[0]), (two, exact[1])])
        cache.store_scores_soon([(one, 9.0), (three, exact[2])])  # `one` keeps its first value
        # Before the commit, the rows wait on the writer thread; close() commits them.
    with ResponseCache(tmp_path / "cache") as cache:
        assert cache.get_scores([one, two, three, absent]) == dict(zip([one, two, three], exact, strict=True))
        assert cache.holds_scores_of(MODEL) and not cache.holds_scores_of(OTHER_MODEL)


def test_keys_name_everything_the_item_holds(tmp_path: Path) -> None:
    base = keys("an answer")[0]
    assert len(base) == KEY_BYTES and base[:PREFIX_BYTES] == MODEL[:PREFIX_BYTES]
    variants = [
        keys("an answer!")[0],
        keys("an answer", model=OTHER_MODEL)[0],
        keys("an answer", shared=("prefer", "u1"))[0],
        keys("an answer", shared=("score", "u2"))[0],
        keys("an answer", shared=("score", "u1", None))[0],
        keys("an answer", shared=("score", "u1", ""))[0],
        # Texts are framed by their lengths: moving a boundary is another key.
        keys("an answer", shared=("scor", "eu1"))[0],
        item_keys(MODEL, ("score", "u1"), [("an", " answer")])[0],
    ]
    assert len({base, *variants}) == len(variants) + 1
    assert keys("an answer")[0] == base  # and the same item is the same key, in any grouping
    assert keys("x", "an answer")[1] == base


def test_damaged_rows_are_read_as_absent_so_the_item_is_computed_again(tmp_path: Path) -> None:
    good, text, blob, infinite, null_value = keys("good", "text", "blob", "inf", "null")
    with ResponseCache(tmp_path / "cache") as cache:
        cache.store_scores_soon([(good, 0.25)])
    with sqlite3.connect(tmp_path / "cache" / SCORES_FILE) as db:
        # The folder is input: someone may have written anything into it (a NaN, bound, is NULL: refused).
        rows = [(text, "half"), (blob, b"\x00\x01"), (infinite, math.inf)]
        db.executemany("INSERT INTO scores VALUES (?, ?, 0)", rows)
        with pytest.raises(sqlite3.IntegrityError):
            db.execute("INSERT INTO scores VALUES (?, ?, 0)", (null_value, math.nan))
    with ResponseCache(tmp_path / "cache") as cache:
        assert cache.get_scores([good, text, blob, infinite, null_value]) == {good: 0.25}


@pytest.mark.parametrize("damage", ["garbage", "foreign-format"])
def test_a_damaged_score_file_is_one_line_naming_it(tmp_path: Path, damage: str) -> None:
    (one,) = keys("one")
    with ResponseCache(tmp_path / "cache") as cache:
        cache.store_scores_soon([(one, 0.5)])
    path = tmp_path / "cache" / SCORES_FILE
    if damage == "garbage":
        path.write_bytes(b"this is not an SQLite database" * 200)
    else:
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA user_version = 7")
    with ResponseCache(tmp_path / "cache") as cache, pytest.raises(ConfigError) as caught:
        cache.get_scores([one])
    message = str(caught.value)
    assert "\n" not in message and str(tmp_path / "cache") in message and SCORES_FILE in message
    assert "rebuild the cache" in message


def test_a_failed_write_is_raised_not_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from prbj.llm import score_table

    (one,) = keys("one")
    cache = ResponseCache(tmp_path / "cache")

    def broken(self: object, rows: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(score_table.ScoreTable, "_insert", broken)
    cache.store_scores_soon([(one, 0.5)])
    with pytest.raises(ConfigError, match="disk I/O error"):
        cache.close()


def test_stats_prune_and_clear_count_the_scores_with_the_rest(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    old, fresh = keys("old", "fresh")
    with ResponseCache(folder) as cache:
        cache.set(cache_key("llm", n=1), {"text": "an LLM reply"})
        cache.store_scores_soon([(old, 0.5)])
    time.sleep(1.2)
    with ResponseCache(folder) as cache:
        cache.store_scores_soon([(fresh, 0.75)])

    def command(*args: str) -> str:
        return (
            CliRunner()
            .invoke(main, ["cache", *args, "--cache-dir", str(folder)], catch_exceptions=False)
            .output
        )

    assert "3 entries (llm: 1, py-rm: 2)" in command("stats")
    assert "deleted 2 entries" in command("prune", "--older-than", "1s")
    with ResponseCache(folder) as cache:
        assert cache.get_scores([old, fresh]) == {fresh: 0.75}
    assert "deleted 1 entries" in command("clear", "--yes")
    assert "0 entries" in command("stats")


def test_a_read_only_folder_serves_its_scores_and_stores_none(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    stored, new = keys("stored", "new")
    with ResponseCache(folder) as cache:
        cache.store_scores_soon([(stored, 0.5)])
    probe = r"""
import sys
from prbj.llm.cache import ResponseCache
folder, stored, new = sys.argv[1], bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3])
with ResponseCache(folder) as cache:
    # A key starts with its model's prefix: the model whose items these are.
    print(cache.get_scores([stored, new]) == {stored: 0.5}, cache.holds_scores_of(stored))
    cache.store_scores_soon([(new, 1.0)])
with ResponseCache(folder) as cache:
    print(cache.get_scores([new]) == {})
"""
    modes = {path: path.stat().st_mode for path in [folder, *folder.iterdir()]}
    for path, mode in modes.items():
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        command = [sys.executable, "-c", probe, str(folder), stored.hex(), new.hex()]
        if os.geteuid() == 0:  # root writes anywhere unless its capabilities are dropped
            command = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", *command]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)}
        )
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"], done.stdout
    assert "read-only" in done.stderr


WRITER = r"""
import sys
from prbj.llm.cache import ResponseCache
from prbj.llm.score_table import item_keys
folder, first, count, value = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
every = item_keys(bytes(range(32)), ("score",), [(str(n),) for n in range(first, first + count)])
with ResponseCache(folder) as cache:
    for start in range(0, count, 700):
        chunk = every[start : start + 700]
        # Each writer reads what the other stored meanwhile, while it stores its own.
        seen = cache.get_scores(chunk)
        assert all(v in (1.0, 2.0) for v in seen.values()), seen
        cache.store_scores_soon([(key, value) for key in chunk])
print("ok")
"""


@pytest.mark.processes
def test_two_processes_share_one_score_table(tmp_path: Path) -> None:
    """Two writers at once, half their items in common: every item is stored once, with one writer's value, and
    neither process fails on the other's locks."""
    folder = tmp_path / "cache"
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(folder), first, "20000", value],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
        )
        for first, value in (("0", "1.0"), ("10000", "2.0"))
    ]
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0 and out.strip() == "ok", err
    every = item_keys(MODEL, ("score",), [(str(n),) for n in range(30_000)])
    with ResponseCache(folder) as cache:
        found = cache.get_scores(every)
        assert cache.stats().by_kind == {"py-rm": 30_000}
    assert len(found) == 30_000
    assert all(found[key] == 1.0 for key in every[:10_000])
    assert all(found[key] == 2.0 for key in every[20_000:])
    assert set(found[key] for key in every[10_000:20_000]) <= {1.0, 2.0}
