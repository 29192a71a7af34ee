"""The Gateway owns its cache: leaving its `with` / `async with` block, or calling close(), closes the cache,
also when the block raises, so no command has to close it by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from prbj.llm.cache import ResponseCache, cache_key
from prbj.llm.gateway import Gateway


def _is_open(cache: ResponseCache) -> bool:
    return cache._opened is not None


def _opened_gateway(tmp_path: Path) -> tuple[Gateway, ResponseCache]:
    cache = ResponseCache(tmp_path / "cache")
    cache.set(cache_key("llm", n=1), {"text": "stored"})  # the cache opens on first use
    assert _is_open(cache)
    return Gateway(cache), cache


def test_leaving_the_with_block_closes_the_cache(tmp_path: Path) -> None:
    gateway, cache = _opened_gateway(tmp_path)
    with gateway as entered:
        assert entered is gateway and _is_open(cache)
    assert not _is_open(cache)


def test_the_cache_is_closed_when_the_body_raises(tmp_path: Path) -> None:
    gateway, cache = _opened_gateway(tmp_path)
    with pytest.raises(RuntimeError, match="boom"), gateway:
        raise RuntimeError("boom")
    assert not _is_open(cache)


async def test_async_with_closes_the_cache_also_on_error(tmp_path: Path) -> None:
    gateway, cache = _opened_gateway(tmp_path)
    async with gateway as entered:
        assert entered is gateway
    assert not _is_open(cache)

    gateway, cache = _opened_gateway(tmp_path / "second")
    with pytest.raises(KeyError):
        async with gateway:
            raise KeyError("missing")
    assert not _is_open(cache)


def test_close_is_idempotent_and_a_cacheless_gateway_closes_too(tmp_path: Path) -> None:
    gateway, cache = _opened_gateway(tmp_path)
    gateway.close()
    gateway.close()
    assert not _is_open(cache)
    # Answers stored before closing are still there when the folder is opened again.
    with ResponseCache(tmp_path / "cache") as reopened:
        assert reopened.get(cache_key("llm", n=1)) == {"text": "stored"}
    with Gateway(None):
        pass
