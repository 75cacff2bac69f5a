"""``EventLog`` and ``LazyRun``: a stored log whose packed deltas are built on first read behaves
exactly like the tuple of its events, and nothing that does not read the deltas builds them."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.session import Runtime, Session, SessionEvent
from agent_session.session.events.eventlog import EventLog, LazyRun, iter_parts
from agent_session.session.events.livelog import LiveLog
from tests.sweeps import examples


def flat_events(count: int) -> list[SessionEvent]:
    session = Session.create("log", clock=lambda: 5)
    return [session.append("plugin/note", {"n": n}) for n in range(count)]


def as_run(events: list[SessionEvent], built: list[int]) -> LazyRun:
    """A run over ``events`` that counts its builds in ``built``."""

    def build() -> list[SessionEvent]:
        built.append(1)
        return list(events)

    return LazyRun(events[0].type, events[0].seq, len(events), build)


def split(events: list[SessionEvent], cuts: list[int], lazy: list[bool], built: list[int]) -> Any:
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    parts: list[Any] = []
    for number, (start, end) in enumerate(itertools.pairwise(bounds)):
        chunk = events[start:end]
        parts.append(as_run(chunk, built) if lazy[number % len(lazy)] else tuple(chunk))
    return parts


@settings(max_examples=examples(200), deadline=None)
@given(
    st.integers(0, 30),
    st.lists(st.integers(0, 30), max_size=5),
    st.lists(st.booleans(), min_size=1, max_size=6),
    st.data(),
)
def test_a_log_reads_like_the_tuple_of_its_events(
    count: int, cuts: list[int], lazy: list[bool], data: st.DataObject
) -> None:
    events = flat_events(count)
    built: list[int] = []
    log = EventLog(split(events, cuts, lazy, built))
    flat = tuple(events)
    assert len(log) == len(flat)
    assert log == flat
    assert flat == log
    assert log == list(flat)
    for index in range(-len(flat), len(flat)):
        assert log[index] is flat[index]
    for bad in (len(flat), -len(flat) - 1):
        with pytest.raises(IndexError):
            log[bad]
    start = data.draw(st.integers(-35, 35))
    stop = data.draw(st.integers(-35, 35))
    step = data.draw(st.sampled_from([1, 1, 2, -1]))
    assert list(log[start:stop:step]) == list(flat[start:stop:step])
    window, expected = log[start:stop], flat[start:stop]
    assert all(len(part) for part in window.parts)  # never an empty part
    assert [window[i] for i in range(len(window))] == list(expected)
    inner = data.draw(st.integers(-10, 10))
    assert list(window[inner:]) == list(expected[inner:])  # a slice of a slice
    assert list(log.joined(flat[:3])) == list(flat) + list(flat[:3])
    live = LiveLog(log)
    for event in flat[:2]:
        live.append(event)
    assert list(live.view()) == list(flat) + list(flat[:2]) == list(live)
    assert [live[i] for i in range(len(live))] == list(live)
    assert [live[i] for i in range(-len(live), 0)] == list(live)
    assert list(live[start:stop]) == (list(flat) + list(flat[:2]))[start:stop]
    assert list(log) == list(flat)
    assert list(log + flat) == list(flat + flat)
    assert list(flat + log) == list(flat + flat)
    runs = sum(isinstance(part, LazyRun) for part in log.parts)
    assert len(built) == runs  # every run was read, and built exactly once


def test_a_run_is_built_once_on_first_read_and_whole_slices_keep_it_unbuilt() -> None:
    events = flat_events(6)
    built: list[int] = []
    run = as_run(events[2:], built)
    log = EventLog([tuple(events[:2]), run, ()])
    assert len(log.parts) == 2  # empty parts are dropped
    assert len(log) == 6
    assert log[:2] == events[:2]
    assert log[2:].parts == (run,)
    assert built == []
    assert [type(item) for item in iter_parts(log)] == [SessionEvent, SessionEvent, LazyRun]
    first = log[3]
    assert built == [1]
    assert first is log[3]
    assert log[2:] == events[2:]
    assert built == [1]
    assert [type(item) for item in iter_parts(log)] == [SessionEvent] * 6
    assert log != events[:5]
    assert log != "not a log"
    assert log != 6


def test_a_run_that_builds_other_events_than_announced_is_a_bug_not_a_silent_change() -> None:
    events = flat_events(3)
    with pytest.raises(AssertionError, match="other events than it announced"):
        LazyRun(events[0].type, 0, 3, lambda: events[:2]).events()
    with pytest.raises(AssertionError, match="other events than it announced"):
        LazyRun(events[0].type, 1, 3, lambda: events).events()


def stream(session: Session, step: int, chunks: int) -> None:
    session.append("step/start", {"turn": 1, "step": step})
    for i in range(chunks):
        session.append(
            "assistant/chunk",
            {"turn": 1, "step": step, "chunk": {"type": "text-delta", "index": 0, "text": f"t{i}"}},
        )


async def test_inspect_builds_no_delta_until_one_is_read(tmp_path: Path) -> None:
    """A stream cut by a crash in its second step: inspect returns the log and its closers
    building only the last run (the closers reuse the last event's time); reading the others
    gives exactly the written events."""
    runtime = Runtime()
    backend = JsonlPersistence(tmp_path)
    runtime.install(backend)
    session = runtime.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    stream(session, 1, 500)
    session.append("step/end", {"turn": 1, "step": 1})
    stream(session, 2, 300)
    await runtime.sessions.flush(session)
    written = session.events
    await backend.aclose()

    cold = JsonlPersistence(tmp_path)
    inspected = await cold.inspect("s")
    assert isinstance(inspected.events, EventLog)
    runs = [p for p in inspected.events.parts if isinstance(p, LazyRun)]
    assert [len(r) for r in runs] == [500, 300]
    assert [r.built for r in runs] == [False, True]
    closers = inspected.events[len(written) :]
    assert [e.type for e in closers] == ["step/end", "turn/end"]
    assert closers[0].time == written[-1].time
    assert not runs[0].built
    assert inspected.events[: len(written)] == written
    assert runs[0].built
    from_seq = await cold.read_from("s", 2)
    assert [e.to_json() for e in from_seq] == [e.to_json() for e in written[2:]]
    resumed = Runtime()
    resumed.install(cold)
    live = await resumed.sessions.resume("s")
    assert live.events[: len(written)] == written
    assert isinstance(live.events, EventLog)
    await cold.aclose()


async def test_a_resumed_session_keeps_its_runs_unbuilt(tmp_path: Path) -> None:
    """Resume (load, repair, publish live, bind the writer) reads no delta: a new process
    resumes a long streamed answer at the cost of parsing it."""
    runtime = Runtime()
    backend = JsonlPersistence(tmp_path)
    runtime.install(backend)
    session = runtime.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    stream(session, 1, 200)
    session.append("step/end", {"turn": 1, "step": 1})  # the log does not end in the run
    await runtime.sessions.flush(session)
    await backend.aclose()

    resumed = Runtime()
    cold = JsonlPersistence(tmp_path)
    resumed.install(cold)
    live = await resumed.sessions.resume("s")
    runs = [p for p in live.events.parts if isinstance(p, LazyRun)]
    assert [len(r) for r in runs] == [200]
    assert [e.type for e in live.events[202:]] == ["step/end", "turn/end", "session/end-seed"]
    assert live.events[203].data["reason"] == {"kind": "interrupted"}
    live.append("turn/start", {"turn": 2})
    await resumed.sessions.flush(live)
    assert not runs[0].built  # repaired, bound and appended to without reading a delta
    assert live.events[2].data["chunk"]["text"] == "t0"
    assert runs[0].built
    await cold.aclose()


def test_a_run_is_built_with_the_cyclic_gc_paused() -> None:
    """Building a long run makes many acyclic objects: the collector waits until it is done."""
    import gc

    events = flat_events(3)
    during: list[bool] = []

    def build() -> list[SessionEvent]:
        during.append(gc.isenabled())
        return list(events)

    enabled = gc.isenabled()
    gc.enable()
    try:
        LazyRun(events[0].type, 0, 3, build).events()
        assert during == [False]
        assert gc.isenabled()
    finally:
        if not enabled:
            gc.disable()
