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


def test_claims_and_writes_queued_together_are_committed_in_order(tmp_path) -> None:
    keys = [cache_key("llm", n=i) for i in range(50)]

    async def scenario(cache: ResponseCache) -> None:
        # Fifty claims asked at once share the worker's batches; each key is claimed by exactly one holder.
        first = await asyncio.gather(*(cache.aclaim_unless_stored(k, "me", 30) for k in keys))
        second = await asyncio.gather(*(cache.aclaim_unless_stored(k, "other", 30) for k in keys))
        assert all(claimed and hit is None for claimed, hit in first)
        assert not any(claimed for claimed, _ in second)
        for i, key in enumerate(keys):
            cache.store_soon(key, {"text": str(i)})
            cache.release_soon(key, "me")
        # Asked after the writes: every answer is there and every lease released.
        after = await asyncio.gather(*(cache.aclaim_unless_stored(k, "other", 30) for k in keys))
        assert after == [(True, {"text": str(i)}) for i in range(len(keys))]

    with ResponseCache(tmp_path / "cache") as cache:
        asyncio.run(scenario(cache))


def test_one_failed_write_in_a_batch_costs_only_itself(tmp_path, monkeypatch) -> None:
    cache = ResponseCache(tmp_path / "cache")
    cache.get(cache_key("llm", n=0))  # opens the folder
    real_set = cache.set

    def set_or_fail(key: str, value: dict) -> None:
        if value["text"] == "bad":
            raise ConfigError("cache folder: disk full")
        real_set(key, value)

    monkeypatch.setattr(cache, "set", set_or_fail)
    for n, text in enumerate(["good", "bad", "also good"]):
        cache.store_soon(cache_key("llm", n=n + 1), {"text": text})
    with pytest.raises(ConfigError, match="disk full"):
        cache.close()
    with ResponseCache(tmp_path / "cache") as reopened:
        assert reopened.get(cache_key("llm", n=1)) == {"text": "good"}
        assert reopened.get(cache_key("llm", n=3)) == {"text": "also good"}
        assert reopened.get(cache_key("llm", n=2)) is None
