"""A long log adds no tracked object per event or run: a loaded log's events, runs of deltas
(with their builders and columns) and parts are out of the cyclic collector's view, as a live
log's are. (Without this, every full pass walks every packed row of every loaded session.)"""

from __future__ import annotations

import gc

from agent_session.session import Runtime, Session
from agent_session.stores import open_store


def write_steps(session: Session, steps: int) -> None:
    session.append("turn/start", {"turn": 1})
    for number in range(1, steps + 1):
        session.append("step/start", {"turn": 1, "step": number})
        for i in range(20):
            session.append_delta(1, number, f"t{i} ")
        session.append("step/end", {"turn": 1, "step": number})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})


async def test_a_loaded_log_leaves_nothing_for_the_collector_to_traverse(store: str) -> None:
    async with Runtime() as runtime:
        runtime.install(open_store(store))
        for id, steps in (("short", 5), ("long", 300)):
            write_steps(runtime.sessions.create(id), steps)
        for session in runtime.sessions.list():
            await runtime.sessions.flush(session)
    async with Runtime() as runtime:
        runtime.install(open_store(store))
        short = await runtime.sessions.resume("short")  # (what any load sets up, once)
        await runtime.sessions.flush(short)
        gc.collect()
        before = len(gc.get_objects())
        loaded = await runtime.sessions.resume("long")
        await runtime.sessions.flush(loaded)  # (its binding, which reads the log, is over)
        gc.collect()
        added = len(gc.get_objects()) - before
        assert len(loaded.events) >= 2 + 300 * 22  # (and what resuming appends)
        assert added < 100  # 300 packed rows: 1,500 objects if tracked
        assert loaded.events[5].data["chunk"]["text"] == "t3 "  # (still readable)
