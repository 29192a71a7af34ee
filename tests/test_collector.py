"""The run's garbage-collector policy (runs.collector): what a run loads to keep (the dataset) is made with the
cyclic collector paused and then frozen out of it, and the collector comes back as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from prbj.runs.collector import kept_for_the_run


@pytest.fixture(autouse=True)
def collector_as_it_was() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()  # frozen objects go back to the oldest generation: nothing leaks into other tests
    if enabled:
        gc.enable()


def test_what_is_loaded_is_frozen_out_of_the_collector_and_the_collector_comes_back() -> None:
    gc.enable()
    gc.unfreeze()
    with kept_for_the_run():
        assert not gc.isenabled()  # no scan of the young objects while they are being made
        kept = [{"post": str(i)} for i in range(5000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(kept)
    # A frozen object is in no generation a collection walks.
    tracked = {id(obj) for obj in gc.get_objects()}
    assert not any(id(item) in tracked for item in kept)


def test_a_collector_switched_off_before_stays_off_even_when_loading_fails() -> None:
    gc.disable()
    with pytest.raises(ValueError), kept_for_the_run():
        raise ValueError("a bad dataset line")
    assert not gc.isenabled()
