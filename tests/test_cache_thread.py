"""The cache's worker thread: writes leave the event loop, keep their order, and never fail silently."""

from __future__ import annotations

import asyncio

import pytest

from prbj.errors import ConfigError
from prbj.llm.cache import ResponseCache, cache_key


def test_a_queued_store_comes_before_the_lease_release_and_any_later_lookup(tmp_path) -> None:
    key = cache_key("llm", n=1)

    async def scenario(cache: ResponseCache) -> None:
        claimed, hit = await cache.aclaim_unless_stored(key, "me", 30)
        assert claimed and hit is None
        cache.store_soon(key, {"text": "bought"})
        cache.release_soon(key, "me")
        # Another holder asking now finds the lease released and the answer stored (work runs in order).
        claimed, hit = await cache.aclaim_unless_stored(key, "other", 30)
        assert claimed and hit == {"text": "bought"}
        await cache.arelease(key, "other")
        assert await cache.aget(key) == {"text": "bought"}

    with ResponseCache(tmp_path / "cache") as cache:
        asyncio.run(scenario(cache))
    with ResponseCache(tmp_path / "cache") as reopened:
        assert reopened.get(key) == {"text": "bought"}
        assert not reopened.leased(key)


def test_a_failed_queued_write_is_raised_not_lost(tmp_path, monkeypatch) -> None:
    cache = ResponseCache(tmp_path / "cache")
    cache.get(cache_key("llm", n=0))  # opens the folder

    def broken(key: str, value: dict) -> None:
        raise ConfigError("cache folder: disk full")

    monkeypatch.setattr(cache, "set", broken)
    cache.store_soon(cache_key("llm", n=1), {"text": "x"})
    with pytest.raises(ConfigError, match="disk full"):
        cache.close()
