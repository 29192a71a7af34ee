"""Issue 12 items 3 and 9: a cache folder is inert data; a damaged or read-only one is one line, not a traceback."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import diskcache
import pytest
from click.testing import CliRunner
from loopback import ProviderServer

from prbj.cli import main
from prbj.errors import ConfigError
from prbj.llm.cache import FORMAT_FILE, ResponseCache, cache_key

KEY = "sk-CANARY-never-write-me-0123456789"
WORKTREE = Path(__file__).resolve().parents[1]


class _Payload:
    """Unpickling this creates the file named in it: proof that code ran."""

    def __init__(self, target: Path) -> None:
        self.target = str(target)

    def __reduce__(self):
        return (os.system, (f"touch {self.target}",))


@pytest.fixture(scope="module")
def server():
    with ProviderServer(reply=lambda request: "Thinking.\nResult: A") as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server, monkeypatch):
    server.reset()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def _judge(server: ProviderServer, cache: Path, out: Path):
    command = ["judge", "--no-progress", "-p", "gpt-5.1", "--api-base", server.url, "--context", "none"]
    return CliRunner().invoke(main, [*command, "--cache-dir", str(cache), "--out", str(out)])


def _one_line_error(output: str, folder: Path, cause: str) -> None:
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if str(folder) in line]
    assert len(lines) == 1 and cause in lines[0], output


def test_a_planted_pickle_is_refused_as_corrupt_not_run(tmp_path: Path) -> None:
    folder, proof = tmp_path / "cache", tmp_path / "pwned"
    key = cache_key("llm", n=1)
    with ResponseCache(folder) as cache:
        cache.set(key, {"text": "honest"})
        assert cache.get(key) == {"text": "honest"}
    with diskcache.Cache(str(folder)) as raw:  # diskcache's default disk pickles
        raw.set(key, _Payload(proof))
    with ResponseCache(folder) as cache, pytest.raises(ConfigError, match="corrupt"):
        cache.get(key)
    assert not proof.exists()


def test_values_are_stored_as_json(tmp_path: Path) -> None:
    with ResponseCache(tmp_path) as cache:
        cache.set(cache_key("llm", n=1), {"text": "é", "cost_usd": 0.5, "tokens": [1, 2]})
        assert cache.get(cache_key("llm", n=1)) == {"text": "é", "cost_usd": 0.5, "tokens": [1, 2]}
        assert cache_key("llm", n=1) in cache and list(cache.keys()) == [cache_key("llm", n=1)]
    with diskcache.Cache(str(tmp_path)) as raw:
        row = raw._sql("SELECT mode, value FROM Cache").fetchone()
    assert row[0] == diskcache.core.MODE_RAW and bytes(row[1]).startswith(b'{"value":{"text":"\xc3\xa9"')


@pytest.mark.processes
def test_cli_refuses_a_planted_pickle_with_one_line(server, tmp_path: Path) -> None:
    cache, proof = tmp_path / "cache", tmp_path / "pwned"
    assert _judge(server, cache, tmp_path / "out").exit_code == 0
    sent = server.count()
    with diskcache.Cache(str(cache)) as raw:
        for key in list(raw.iterkeys()):
            raw.set(key, _Payload(proof))
    result = _judge(server, cache, tmp_path / "out")
    assert result.exit_code == 2
    _one_line_error(result.output, cache, "corrupt")
    assert not proof.exists() and server.count() == sent


def test_cli_refuses_a_cache_from_an_older_prbj(server, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with diskcache.Cache(str(cache)) as raw:  # the old layout: pickled dicts, no format marker
        raw.set(cache_key("llm", n=1), {"value": {"text": "old"}, "stored_at": 1.0})
    result = _judge(server, cache, tmp_path / "out")
    assert result.exit_code == 2
    _one_line_error(result.output, cache, "rebuild the cache")
    assert server.count() == 0


@pytest.mark.processes
@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_cli_names_a_corrupt_cache_folder(server, tmp_path: Path, damage: str) -> None:
    cache = tmp_path / "cache"
    assert _judge(server, cache, tmp_path / "out").exit_code == 0
    db = cache / "cache.db"
    if damage == "truncate":
        with db.open("r+b") as handle:
            handle.truncate(db.stat().st_size // 3)
    else:
        db.write_bytes(b"this is not an SQLite database" * 100)
    for leftover in cache.glob("cache.db-*"):
        leftover.unlink()
    result = _judge(server, cache, tmp_path / "out")
    assert result.exit_code == 2
    _one_line_error(result.output, cache, "corrupt")


def test_a_cache_folder_that_cannot_be_made_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with ResponseCache(tmp_path / "file" / "cache") as cache, pytest.raises(ConfigError) as caught:
        cache.get(cache_key("llm", n=1))
    assert str(tmp_path / "file" / "cache") in str(caught.value) and "cannot use it" in str(caught.value)


@pytest.mark.processes
def test_a_read_only_cache_serves_its_hits_and_says_once_it_stores_nothing(server, tmp_path: Path) -> None:
    # Root ignores file modes only through its capabilities (CAP_DAC_OVERRIDE and kin): as root, the second run keeps
    # uid 0 (so it can still read a venv in a private folder, as CI's is) but drops every capability, so the
    # read-only modes bind it as they bind any user.
    shared = Path(tempfile.mkdtemp(prefix="prbj-ro-"))
    try:
        cache, out = shared / "cache", shared / "out"
        assert _judge(server, cache, tmp_path / "out").exit_code == 0
        sent = server.count()
        out.mkdir()
        for path in [cache, *cache.rglob("*")]:
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        command = [sys.executable, "-m", "prbj", "judge", "--no-progress", "-p", "gpt-5.1"]
        command += [
            "--api-base",
            server.url,
            "--context",
            "none",
            "--cache-dir",
            str(cache),
            "--out",
            str(out),
        ]
        environment = {
            **os.environ,
            "OPENAI_API_KEY": KEY,
            "PYTHONPATH": str(WORKTREE),
            "HOME": str(out),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        if os.geteuid() == 0:
            command = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=180, env=environment, cwd=out)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stderr.count("read-only") == 1 and str(cache) in done.stderr
        assert server.count() == sent  # every answer came from the cache
    finally:
        for path in [shared, *shared.rglob("*")]:
            path.chmod(0o755)
        shutil.rmtree(shared)


def test_the_format_marker_is_written_with_a_new_folder(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "c") as cache:
        cache.set(cache_key("llm", n=1), {"text": "x"})
    assert (tmp_path / "c" / FORMAT_FILE).exists()
