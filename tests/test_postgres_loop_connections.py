"""The PostgreSQL connections that run checkpoints on the event loop, speaking the protocol
directly, against the test server: bounded, FIFO when busy, statements prepared once, a
failed connection replaced, a connection idle again only once its answer is read whole,
durability checked."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg
import pytest

from agent_session.persistence_postgres import PostgresPersistence
from agent_session.persistence_postgres.loop_connections import (
    PREPARED_PER_CONNECTION,
    LoopConnections,
)
from agent_session.session import Runtime, SessionDurabilityError
from tests.backends import fresh_database

SETTINGS: dict[str, Any] = {"autocommit": True, "options": "-c synchronous_commit=on"}
ONE = b"SELECT 1"
GATE = b"SELECT pg_advisory_xact_lock(4242)"
"""Blocks on the server while a test's admin connection holds advisory lock 4242."""


def idle_pids(connections: LoopConnections) -> list[int]:
    return [link.connection.info.backend_pid for link in connections._idle]


async def until(condition: Any, what: str) -> None:
    """Wait (up to 30 s, polling the loop) for ``condition()`` to hold."""
    for _ in range(3000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_at_most_size_connections_and_callers_wait_their_turn() -> None:
    dsn = fresh_database()
    connections = LoopConnections(dsn, SETTINGS, 2)
    order: list[str] = []
    pids: dict[str, int] = {}

    async def run(name: str, query: bytes) -> int:
        link = await connections.ready(query)
        order.append(name)
        pids[name] = link.connection.info.backend_pid
        return await connections.send(link, query, [])

    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_advisory_lock(4242)")
        tasks = [asyncio.create_task(run(name, GATE)) for name in ("a", "b")]
        await until(lambda: len(order) == 2, "a and b to get connections")
        # (the same statement, prepared on both connections: each gets its connection in one
        # step, so the order recorded is the order they got them, not of two preparations)
        tasks += [asyncio.create_task(run(name, GATE)) for name in ("c", "d")]
        await until(lambda: len(connections._waiters) == 2, "c and d to queue")
        assert connections._open == 2
        assert sorted(order) == ["a", "b"]
        admin.execute("SELECT pg_advisory_unlock(4242)")
        assert await asyncio.gather(*tasks) == [1, 1, 1, 1]
    assert order[2:] == ["c", "d"]  # in the order they asked
    assert {pids["c"], pids["d"]} <= {pids["a"], pids["b"]}  # reused, not opened
    await connections.close()
    assert not connections.usable()


async def test_a_statement_is_prepared_once_per_connection_and_ready_now_finds_it() -> None:
    connections = LoopConnections(fresh_database(), SETTINGS, 1)
    assert connections.ready_now(ONE) is None  # nothing open yet
    assert await connections.execute(ONE, []) == 1
    link = connections.ready_now(ONE)
    assert link is not None
    assert list(link.prepared) == [ONE]
    assert await connections.send(link, ONE, []) == 1
    assert connections.ready_now(b"SELECT 2") is None  # not prepared there
    assert await connections.execute(b"SELECT $1::int", [b"7"]) == 1
    assert len(connections._idle[0].prepared) == 2
    await connections.close()


async def test_past_the_prepared_limit_statements_are_sent_with_their_text() -> None:
    connections = LoopConnections(fresh_database(), SETTINGS, 1)
    for n in range(PREPARED_PER_CONNECTION + 3):
        assert await connections.execute(b"SELECT %d" % n, []) == 1
    assert len(connections._idle[0].prepared) == PREPARED_PER_CONNECTION
    await connections.close()


async def test_a_connection_that_failed_is_replaced_not_reused() -> None:
    dsn = fresh_database()
    connections = LoopConnections(dsn, SETTINGS, 1)
    await connections.execute(ONE, [])
    [first] = idle_pids(connections)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (first,))
    with pytest.raises(psycopg.OperationalError):
        await connections.execute(ONE, [])
    assert connections._open == 0
    assert not connections._idle
    await connections.execute(ONE, [])
    assert idle_pids(connections) != [first]
    await connections.close()


async def test_an_idle_connection_the_server_ended_leaves_the_set_unused() -> None:
    """Its one reader sees the end (as when the server restarts) while it is idle: the next
    statement runs on a new connection, with no error."""
    dsn = fresh_database()
    connections = LoopConnections(dsn, SETTINGS, 1)
    await connections.execute(ONE, [])
    [first] = idle_pids(connections)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (first,))
    await until(lambda: not connections._idle, "the ended connection to leave the set")
    assert connections._open == 0
    assert await connections.execute(ONE, []) == 1
    assert idle_pids(connections) != [first]
    await connections.close()


async def test_an_error_the_server_answers_keeps_the_connection() -> None:
    connections = LoopConnections(fresh_database(), SETTINGS, 1)
    await connections.execute(ONE, [])
    first = idle_pids(connections)
    with pytest.raises(psycopg.errors.DivisionByZero, match="division by zero"):
        await connections.execute(b"SELECT 1 / $1::int", [b"0"])
    assert idle_pids(connections) == first
    await connections.close()


async def test_a_caller_that_stops_waiting_leaves_no_statement_on_an_idle_connection() -> None:
    """The connection is busy until the answer is read whole; the next caller then reuses it."""
    dsn = fresh_database()
    connections = LoopConnections(dsn, SETTINGS, 1)
    await connections.execute(ONE, [])
    first = idle_pids(connections)
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_advisory_lock(4242)")
        gated = asyncio.create_task(connections.execute(GATE, []))
        await until(lambda: not connections._idle, "the gated statement to be sent")
        gated.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gated
        after = asyncio.create_task(connections.execute(ONE, []))
        await until(lambda: len(connections._waiters) == 1, "the next caller to queue")
        assert not connections._idle
        admin.execute("SELECT pg_advisory_unlock(4242)")
        assert await after == 1
    assert idle_pids(connections) == first
    await connections.close()


async def test_a_statement_larger_than_the_socket_buffers_goes_out_whole() -> None:
    connections = LoopConnections(fresh_database(), SETTINGS, 1)
    big = b"x" * (16 << 20)
    assert await connections.execute(b"SELECT length($1::text)", [big]) == 1
    await connections.close()


async def test_a_connection_whose_commits_are_not_durable_is_refused() -> None:
    unsafe = {"autocommit": True, "options": "-c synchronous_commit=off"}
    connections = LoopConnections(fresh_database(), unsafe, 1)
    with pytest.raises(SessionDurabilityError, match="synchronous_commit"):
        await connections.execute(ONE, [])
    assert connections._open == 0
    await connections.close()


def test_the_set_belongs_to_the_loop_it_first_ran_on() -> None:
    connections = LoopConnections(fresh_database(), SETTINGS, 1)
    assert not connections.usable()  # no loop running

    async def first() -> bool:
        await connections.execute(ONE, [])
        usable = connections.usable()
        await connections.close()
        return usable

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
        pids.update(idle_pids(on_loop))
    assert len(pids) == 1
    assert len(on_loop._idle[0].prepared) == 1  # each checkpoint: the same two rows
    stored = await backend.read_from("s", 0)
    assert [e.encode() for e in stored] == [e.encode() for e in session.events]
    await runtime.sessions.dispose(session)
    await backend.aclose()
    assert on_loop._open == 0
    assert not on_loop.usable()
