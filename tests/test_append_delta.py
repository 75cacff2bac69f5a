"""``Session.append_delta``: a streamed delta kept as a column of its run is the event
``append`` would have made, with the same checks, the same observers' view and the same bytes
on disk; a run is built only when read, once."""

from __future__ import annotations

import asyncio
import gc
import itertools
import math
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent_session.agent_loop import AgentRuntime
from agent_session.agent_loop.scripted import ScriptedModel
from agent_session.checkpoints.policy import checkpoint_policy
from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.session import Runtime, Session, SessionDataError, SessionReentrancyError
from agent_session.session.events.eventlog import LazyRun
from agent_session.session.live.hooks import SESSION_EVENT, SESSION_VALIDATE
from tests.agents import SYSTEM, corpus_script


def chunk(turn: Any, step: Any, text: Any, index: Any = 0, kind: str = "text-delta") -> Any:
    return {"turn": turn, "step": step, "chunk": {"type": kind, "index": index, "text": text}}


def test_deltas_read_as_the_events_append_makes() -> None:
    fast = Session.create("s", clock=lambda: 7)
    slow = Session.create("s", clock=lambda: 7)
    plan = [(1, 1, "a", 0, "text-delta")] * 4 + [(1, 1, "b", 1, "reasoning-delta")] * 2
    plan += [(1, 2, "c", 0, "text-delta"), (2, 2, "é ✓", 0, "text-delta")]
    for turn, step, text, index, kind in plan:
        seq = fast.append_delta(turn, step, text, index=index, kind=kind)
        assert seq == slow.append("assistant/chunk", chunk(turn, step, text, index, kind)).seq
    fast.append("step/end", {"turn": 2, "step": 2})
    slow.append("step/end", {"turn": 2, "step": 2})
    assert [e.encode() for e in fast.events] == [e.encode() for e in slow.events]
    assert fast.events == slow.events
    assert fast.events[3] is fast.events[3] is list(fast.events)[3]  # built once


def test_a_run_stays_unbuilt_until_read() -> None:
    session = Session.create("s")
    for i in range(100):
        session.append_delta(1, 1, f"t{i}")
    session.append("step/end", {"turn": 1, "step": 1})
    runs = [p for p in session.events.parts if isinstance(p, LazyRun)]
    assert [len(r) for r in runs] == [100]
    assert not runs[0].built
    assert session.events[50].data["chunk"]["text"] == "t50"
    assert runs[0].built


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ((1.5, 1, "x", 0), None),  # a float turn: a valid JSON value, as append takes it
        ((1, 1, "bad \ud800", 0), SessionDataError),
        ((1, 1, "x", math.nan), SessionDataError),
        ((1, 1, 3, 0), None),  # a number as text: append's event
        ((2**60, 1, "x", 0), SessionDataError),
    ],
)
def test_other_values_are_exactly_append(values: tuple[Any, ...], error: Any) -> None:
    turn, step, text, index = values
    fast, slow = Session.create("s", clock=lambda: 1), Session.create("s", clock=lambda: 1)
    if error is not None:
        with pytest.raises(error):
            fast.append_delta(turn, step, text, index=index)
        with pytest.raises(error):
            slow.append("assistant/chunk", chunk(turn, step, text, index))
        assert len(fast.events) == 0
        return
    fast.append_delta(turn, step, text, index=index)
    slow.append("assistant/chunk", chunk(turn, step, text, index))
    assert [e.encode() for e in fast.events] == [e.encode() for e in slow.events]


def test_an_observer_of_events_gets_every_delta_as_an_event() -> None:
    runtime = Runtime()
    seen: list[Any] = []
    runtime.hooks.observe(SESSION_EVENT, lambda session, event: seen.append(event))
    session = runtime.sessions.create("s")
    for i in range(5):
        session.append_delta(1, 1, f"t{i}")
    assert [e.data["chunk"]["text"] for e in seen] == [f"t{i}" for i in range(5)]
    assert list(session.events) == seen


def test_a_validator_sees_every_delta_and_can_refuse_one() -> None:
    runtime = Runtime()

    def refuse(session: Session, event: Any) -> None:
        if event.data["chunk"]["text"] == "no":
            raise ValueError("refused")

    runtime.hooks.observe(SESSION_VALIDATE, refuse)
    session = runtime.sessions.create("s")
    session.append_delta(1, 1, "yes")
    with pytest.raises(ValueError, match="refused"):
        session.append_delta(1, 1, "no")
    assert [e.data["chunk"]["text"] for e in session.events] == ["yes"]


@pytest.mark.parametrize("hook", [SESSION_VALIDATE, SESSION_EVENT])
def test_a_hook_installed_inside_a_run_gets_the_deltas_after_it(hook: str) -> None:
    runtime = Runtime()
    session = runtime.sessions.create("s")
    for i in range(3):
        session.append_delta(1, 1, f"t{i}")
    seen: list[Any] = []
    runtime.hooks.observe(hook, lambda s, event: seen.append(event))
    for i in range(3, 6):
        session.append_delta(1, 1, f"t{i}")
    assert [e.data["chunk"]["text"] for e in seen] == ["t3", "t4", "t5"]
    assert [e.data["chunk"]["text"] for e in session.events] == [f"t{i}" for i in range(6)]


def test_a_long_live_log_leaves_nothing_for_the_collector_to_traverse() -> None:
    """The events, the runs of deltas and the closed parts of a live log hold no cycle and
    are untracked: a long log adds no tracked object per event or run."""
    session = Session.create("s")

    def steps(first: int, count: int) -> None:
        for step in range(first, first + count):
            session.append("step/start", {"turn": 1, "step": step})
            for i in range(20):
                session.append_delta(1, step, f"t{i} ")
            session.append("step/end", {"turn": 1, "step": step})

    steps(1, 10)
    gc.collect()
    before = len(gc.get_objects())
    steps(11, 300)
    gc.collect()
    assert len(gc.get_objects()) - before < 30  # 300 steps: 1,800 objects if tracked
    assert len(session.events) == 310 * 22


def test_a_delta_from_an_observer_is_refused_as_reentrant() -> None:
    runtime = Runtime()
    session = runtime.sessions.create("s")
    errors: list[Exception] = []

    def reenter(s: Session, event: Any) -> None:
        try:
            s.append_delta(1, 1, "again")
        except SessionReentrancyError as e:
            errors.append(e)

    runtime.hooks.observe(SESSION_EVENT, reenter)
    session.append("turn/start", {"turn": 1})
    assert len(errors) == 1
    assert len(session.events) == 1


async def corpus_run(root: Path, observe_events: bool) -> bytes:
    """The corpus's ``complete:2`` run through the agent loop, on a fixed clock, with
    checkpoints; with ``observe_events``, an observer of events makes every delta an event
    appended one by one (the path every delta took before runs of columns)."""
    runtime = AgentRuntime(clock=lambda: 1_700_000_000_000)
    runtime.models.register("scripted", ScriptedModel(corpus_script()))
    runtime.install(checkpoint_policy)
    backend = JsonlPersistence(root)
    runtime.install(backend)
    if observe_events:
        runtime.hooks.observe(SESSION_EVENT, lambda session, event: None)

    async def tool(args: Any, call: Any) -> str:
        return f"ok {args['path']}"

    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    runtime.tools.register("read_file", "read_file", schema, tool)
    runtime.tools.register("write_file", "write_file", schema, tool, exclusive=True)
    session = runtime.sessions.create("agent")
    agent = runtime.agent(session, model="scripted/scripted-1", system=SYSTEM)
    for prompt in ("one", "two"):
        await agent.run_turn(prompt)
    await backend.aclose()
    (log,) = root.rglob("session.jsonl")
    return log.read_bytes()


def test_the_bytes_written_are_the_ones_events_one_by_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run(name: str, observe_events: bool) -> bytes:
        ids = itertools.count()  # message ids: the same in both runs
        monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=next(ids)))
        return asyncio.run(corpus_run(tmp_path / name, observe_events))

    columns, events = run("columns", False), run("events", True)
    assert columns == events
    assert b'"type":"text-chunks"' in columns
    assert b'"type":"reasoning-chunks"' in columns


@pytest.mark.parametrize("where", ["live", "jsonl", "sqlite"])
async def test_a_run_s_first_time_is_read_without_building_it(tmp_path: Path, where: str) -> None:
    from agent_session.persistence_sqlite import SqlitePersistence

    ticks = itertools.count(1_000, 7)
    session = Session.create("s", clock=lambda: next(ticks))
    for step in (1, 2):
        session.append("step/start", {"turn": 1, "step": step})
        for i in range(5):
            session.append_delta(1, step, f"t{i}")
        session.append("step/end", {"turn": 1, "step": step})
    events: Any = session.events
    if where != "live":
        backend: Any = (
            JsonlPersistence(tmp_path / "j")
            if where == "jsonl"
            else SqlitePersistence(tmp_path / "s.db")
        )
        runtime = Runtime()
        runtime.install(backend)
        runtime.sessions.create("s", seed=list(session.events))
        await runtime.sessions.flush(runtime.sessions.get("s"))
        await backend.aclose()
        backend = type(backend)(tmp_path / ("j" if where == "jsonl" else "s.db"))
        events = (await backend.load("s")).events
        await backend.aclose()
    runs = [p for p in events.parts if isinstance(p, LazyRun)]
    assert len(runs) == 2
    firsts = [run.time0 for run in runs]
    assert not any(run.built for run in runs)
    assert firsts == [run[0].time for run in runs]
    assert firsts == [e.time for e in events if e.type == "assistant/chunk"][::5]
