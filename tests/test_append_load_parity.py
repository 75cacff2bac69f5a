"""What ``append`` accepts always loads again (the adversary's D11, the newcomer's first
finding): generated sequences of appends, valid and invalid shapes of every kind of event, with
and without surface ops, some across a resume; for every append that succeeded, a cold load in
a fresh runtime returns the same events (plus the closers of an open last turn)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_sqlite import SqlitePersistence
from agent_session.recovery import closers
from agent_session.session import Runtime, SessionError
from agent_session.session.persistence.memory import MemoryPersistence, MemoryStore
from tests.builders import assistant, tool_result, user
from tests.sweeps import examples

SOURCE = {"kind": "model", "provider": "p", "model": "m"}
SHAPES: dict[str, list[Any]] = {
    "user/message": [user(), {"anything": True}, {**user(), "id": ""}, {**user(), "role": "x"}],
    "assistant/message": [
        {"turn": 1, "step": 1, "message": assistant(calls=("c1",))},
        {"turn": 1, "step": 1, "message": {**assistant(), "source": {"kind": "user"}}},
        {"turn": 1, "step": 1, "message": "text"},
        {"turn": 1, "step": 1},
    ],
    "tool/result": [
        {"turn": 1, "step": 1, "message": tool_result("c1")},
        {"turn": 1, "step": 1, "message": {**tool_result("c1"), "source": {"kind": "tool"}}},
        {"turn": 1, "step": 1, "message": tool_result("c1", id="")},
    ],
    "tool/call": [
        {"turn": 1, "step": 1, "callId": "c1", "name": "t", "arguments": "{}"},
        {"turn": 1, "step": 1, "call_id": "c1", "name": "t", "arguments": "{}"},
        {"turn": 1, "step": 1, "callId": "", "name": "t", "arguments": "{}"},
    ],
    "turn/start": [{"turn": 1}],
    "turn/end": [{"turn": 1, "reason": {"kind": "completed"}}],
    "step/start": [{"turn": 1, "step": 1}],
    "step/end": [{"turn": 1, "step": 1}],
    "request/header": [
        {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"},
        {"header": {"config": {}}, "reason": "initial"},
    ],
    "plugin/note": [{"n": 1}, [1, 2], "x"],
    "myapp/unregistered": [{"x": 1}],
    "request/header-delta": [{}],
    "delta": [
        (1, 1, "a", 0, "text-delta"),
        (1, 1, "b", 0, "reasoning-delta"),
        (1, 2, "c", 1, "text-delta"),
        (1, 1, "\ud800", 0, "text-delta"),
    ],
    "assistant/chunk": [
        {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "a"}},
        {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "é\n"}},
        {"turn": 1, "step": 1, "chunk": {"type": "reasoning-delta", "index": 0, "text": "r"}},
        {
            "turn": 1,
            "step": 1,
            "chunk": {"text": "keys in another order", "index": 0, "type": "text-delta"},
        },
    ],
}

action = st.tuples(
    st.sampled_from(sorted(SHAPES)),
    st.integers(min_value=0, max_value=3),
    st.sampled_from([None, "append"]),
    st.booleans(),  # resume before this append
)


async def run(actions: list[tuple[str, int, str | None, bool]], backend_for: Any) -> None:
    runtime = Runtime()
    backend = backend_for()
    runtime.install(backend)
    session = runtime.sessions.create("s")
    for kind, shape, op, resume in actions:
        if resume and session.events:
            await runtime.sessions.flush(session)
            await backend.aclose()
            runtime, backend = Runtime(), backend_for()
            runtime.install(backend)
            session = await runtime.sessions.resume("s")
        shapes = SHAPES[kind]
        with contextlib.suppress(SessionError, TypeError):  # refused: nothing committed
            if kind == "delta":  # a streamed delta, kept as a column of its run
                turn, step, text, index, delta = shapes[shape % len(shapes)]
                session.append_delta(turn, step, text, index=index, kind=delta)
            else:
                session.append(kind, shapes[shape % len(shapes)], surface_op=op)
    await runtime.sessions.flush(session)
    written = [e.encode() for e in session.events]
    await backend.aclose()
    if not written:
        return
    fresh = backend_for()
    loaded = [e.encode() for e in (await fresh.load("s")).events]
    await fresh.aclose()
    assert loaded[: len(written)] == written
    # (closers come back in the key order the medium keeps: compared as values)
    repaired = [json.loads(e.encode()) for e in closers(session.events)]
    assert [json.loads(line) for line in loaded[len(written) :]] == repaired


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(action, max_size=14))
def test_every_accepted_append_loads_again_from_jsonl(
    actions: list[tuple[str, int, str | None, bool]],
) -> None:
    with tempfile.TemporaryDirectory() as root:
        asyncio.run(run(actions, lambda: JsonlPersistence(root)))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(action, max_size=14))
def test_every_accepted_append_loads_again_from_sqlite(
    actions: list[tuple[str, int, str | None, bool]],
) -> None:
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "sessions.db")
        asyncio.run(run(actions, lambda: SqlitePersistence(path)))


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(action, max_size=14))
def test_every_accepted_append_loads_again_from_memory(
    actions: list[tuple[str, int, str | None, bool]],
) -> None:
    store = MemoryStore()
    asyncio.run(run(actions, lambda: MemoryPersistence(store, repair=closers)))
