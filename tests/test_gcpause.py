"""``gc_paused`` restores the collector's state, also when pauses nest or overlap across
threads, and when the body raises."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from agent_session.session.json.gcpause import gc_paused


@pytest.fixture
def collector() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_pause_restores_an_enabled_collector_even_on_error(collector: None) -> None:
    gc.enable()
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_pause_leaves_a_disabled_collector_disabled(collector: None) -> None:
    gc.disable()
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_pauses_re_enable_only_after_the_last(collector: None) -> None:
    gc.enable()
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            inside.set()
            release.wait()

    thread = threading.Thread(target=other)
    thread.start()
    inside.wait()
    with gc_paused():
        pass
    assert not gc.isenabled()  # the other thread's pause is still on
    release.set()
    thread.join()
    assert gc.isenabled()
