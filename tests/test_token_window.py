"""The tokens-per-minute window keeps a running total that always equals the sum of what it holds."""

from __future__ import annotations

import asyncio

from prbj.llm import limits
from prbj.llm.limits import TokenWindow


def test_running_total_follows_acquire_correct_and_expiry(monkeypatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(limits.time, "monotonic", lambda: clock[0])
    window = TokenWindow(tpm=1_000, window=60.0)

    async def scenario() -> None:
        first = await window.acquire(300)
        clock[0] += 10
        second = await window.acquire(200)
        window.correct(second, 50)  # the provider reported fewer tokens than estimated
        assert window._used(clock[0]) == 350 == sum(t for _, t in window._spent)
        clock[0] += 55  # the first call leaves the window
        assert window._used(clock[0]) == 50 == sum(t for _, t in window._spent)
        window.correct(first, 0)  # a correction after its call left the window changes nothing
        assert window._used(clock[0]) == 50
        await window.acquire(950)  # fits only because the total dropped
        assert window._used(clock[0]) == 1_000
        window.tpm = 2_000  # a provider stated a higher limit: room at once
        await window.acquire(900)
        assert window._used(clock[0]) == 1_900

    asyncio.run(scenario())
