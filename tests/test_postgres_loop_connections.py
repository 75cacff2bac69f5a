"""The PostgreSQL connections that run checkpoints on the event loop, against the test
server: bounded, FIFO when busy, a failed connection replaced, durability checked."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg
import pytest

from persistence_postgres import PostgresPersistence
from persistence_postgres.loop_connections import LoopConnection, LoopConnections
from session import Runtime, SessionDurabilityError
from tests.backends import fresh_database

SETTINGS: dict[str, Any] = {"autocommit": True, "options": "-c synchronous_commit=on"}


async def backend_pid(db: LoopConnection) -> int:
    row = await (await db.execute("SELECT pg_backend_pid()")).fetchone()
    assert row is not None
    return int(row[0])


async def test_at_most_size_connections_and_callers_wait_their_turn() -> None:
    connections = LoopConnections(fresh_database(), SETTINGS, 2)
    gate = asyncio.get_running_loop().create_future()
    both_busy = asyncio.Event()
    order: list[str] = []

    async def hold(name: str) -> int:
        async def work(db: LoopConnection) -> int:
            order.append(name)
            if name in ("a", "b"):
                if len(order) == 2:
                    both_busy.set()
                await gate
            return await backend_pid(db)

        return await connections.run(work)

    tasks = [asyncio.create_task(hold(name)) for name in ("a", "b", "c", "d")]
    await asyncio.wait_for(both_busy.wait(), 30)
    assert sorted(order) == ["a", "b"]  # c and d wait for a connection
    gate.set_result(None)
    pids = await asyncio.gather(*tasks)
    assert order[2:] == ["c", "d"]  # in the order they asked
    assert len(set(pids)) == 2  # c and d reused a's and b's connections
    await connections.close()
    assert not connections.usable()


async def test_a_connection_that_failed_is_replaced_not_reused() -> None:
    dsn = fresh_database()
    connections = LoopConnections(dsn, SETTINGS, 1)
    first = await connections.run(backend_pid)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (first,))
    with pytest.raises(psycopg.OperationalError):
        await connections.run(backend_pid)
    second = await connections.run(backend_pid)
    assert second != first
    await connections.close()


async def test_a_connection_that_failed_is_not_reused_even_when_the_work_handled_it() -> None:
    """The append's own handling (a reconciliation) returns normally after the failure."""
    dsn = fresh_database()
    connections = LoopConnections(dsn, SETTINGS, 1)
    first = await connections.run(backend_pid)

    async def survive(db: LoopConnection) -> str:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (first,))
        try:
            await db.execute("SELECT 1")
        except psycopg.OperationalError:
            return "handled"
        return "not failed"

    assert await connections.run(survive) == "handled"
    assert await connections.run(backend_pid) != first
    await connections.close()


async def test_a_connection_whose_commits_are_not_durable_is_refused() -> None:
    unsafe = {"autocommit": True, "options": "-c synchronous_commit=off"}
    connections = LoopConnections(fresh_database(), unsafe, 1)
    with pytest.raises(SessionDurabilityError, match="synchronous_commit"):
        await connections.run(backend_pid)
    await connections.close()


def test_the_set_belongs_to_the_loop_it_first_ran_on() -> None:
    connections = LoopConnections(fresh_database(), SETTINGS, 1)
    assert not connections.usable()  # no loop running

    async def first() -> bool:
        await connections.run(backend_pid)
        return connections.usable()

    assert asyncio.run(first())
    seen: list[bool] = []

    async def other() -> None:
        seen.append(connections.usable())

    thread = threading.Thread(target=lambda: asyncio.run(other()))
    thread.start()
    thread.join()
    assert seen == [False]


async def test_checkpoints_of_live_sessions_run_on_the_loop_connections() -> None:
    """The first (materializing) append runs on a worker thread; every later checkpoint is a
    statement of the loop's one connection."""
    backend = PostgresPersistence(fresh_database())
    on_loop = backend.postgres._on_loop
    runtime = Runtime()
    runtime.install(backend)
    session = runtime.sessions.create("s")
    session.append("turn/start", {"turn": 1})
    await runtime.sessions.flush(session)
    assert on_loop._open == 0
    pids = set()
    for step in range(1, 4):
        session.append("step/start", {"turn": 1, "step": step})
        session.append("step/end", {"turn": 1, "step": step})
        await runtime.sessions.flush(session)
        assert on_loop._open == 1
        pids.add(await on_loop.run(backend_pid))
    assert len(pids) == 1
    stored = await backend.read_from("s", 0)
    assert [e.encode() for e in stored] == [e.encode() for e in session.events]
    await runtime.sessions.dispose(session)
    await backend.aclose()
    assert on_loop._open == 0
    assert not on_loop.usable()


async def test_a_connection_whose_work_was_cancelled_is_not_reused() -> None:
    connections = LoopConnections(fresh_database(), SETTINGS, 1)
    first = await connections.run(backend_pid)
    started = asyncio.Event()

    async def long(db: LoopConnection) -> None:
        started.set()
        await db.execute("SELECT pg_sleep(30)")

    task = asyncio.create_task(connections.run(long))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await connections.run(backend_pid) != first
    await connections.close()
