"""`prbj cache stats | prune | clear` on a real cache folder."""

from __future__ import annotations

import time
from pathlib import Path

from click.testing import CliRunner

from prbj.cli import main
from prbj.llm.cache import ResponseCache, cache_key


def _fill(folder: Path) -> None:
    with ResponseCache(folder) as cache:
        cache.set(cache_key("llm", n=1), {"text": "old"})
        cache.set(cache_key("llm", n=2), {"text": "old too"})
        cache.set(cache_key("scalar", n=3), {"score": 0.5})


def _cache(*args: str) -> object:
    return CliRunner().invoke(main, ["cache", *args], catch_exceptions=False)


def test_stats_counts_entries_by_kind(tmp_path: Path) -> None:
    _fill(tmp_path / "c")
    result = _cache("stats", "--cache-dir", str(tmp_path / "c"))
    assert result.exit_code == 0
    assert "3 entries (llm: 2, scalar: 1)" in result.output


def test_prune_drops_only_old_entries(tmp_path: Path) -> None:
    _fill(tmp_path / "c")
    time.sleep(1.2)
    with ResponseCache(tmp_path / "c") as cache:
        cache.set(cache_key("llm", n=4), {"text": "fresh"})
    result = _cache("prune", "--cache-dir", str(tmp_path / "c"), "--older-than", "1s")
    assert result.exit_code == 0 and "deleted 3 entries" in result.output
    with ResponseCache(tmp_path / "c") as cache:
        assert cache.get(cache_key("llm", n=4)) == {"text": "fresh"}
        assert cache.get(cache_key("llm", n=1)) is None


def test_prune_rejects_a_bad_age(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["cache", "prune", "--cache-dir", str(tmp_path), "--older-than", "soon"]
    )
    assert result.exit_code == 2
    assert "use a number with s, m, h, d or w" in result.output


def test_clear_asks_first_and_then_empties(tmp_path: Path) -> None:
    _fill(tmp_path / "c")
    refused = CliRunner().invoke(main, ["cache", "clear", "--cache-dir", str(tmp_path / "c")], input="n\n")
    assert refused.exit_code == 1
    assert _cache("clear", "--cache-dir", str(tmp_path / "c"), "--yes").output.strip() == "deleted 3 entries"
    assert "0 entries" in _cache("stats", "--cache-dir", str(tmp_path / "c")).output
