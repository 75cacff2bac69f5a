"""The PostgreSQL backend when the server fails under a live writer: a commit whose answer
is lost while reconnects are refused, restarts (``pg_ctl -m immediate``) under a flushing
writer, the writer lock's connection ended by a restart or by ``idle_session_timeout``, and a
server that refuses writes. Against real servers; these tests fail, never skip, without
one."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import os
import select
import socket
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest

from agent_session.persistence_postgres import PostgresPersistence
from agent_session.session import Runtime, Session, SessionCollisionError
from tests.backends import fresh_database
from tests.forkserver import run_cli
from tests.pg_server import CuttingProxy, OwnServer, PgBouncer
from tests.test_postgres_backend import live_session, stored

# --- a lost commit answer whose reconciliation cannot connect either ----------------------


async def test_a_lost_answer_with_reconnects_refused_is_settled_by_the_retry(
    proxy: tuple[CuttingProxy, str],
) -> None:
    """The commit happens, its answer is lost and the reconciling connection is refused: the
    flush fails (the batch kept). Once the server can be reached, the retry finds the batch
    stored (with what was appended since after it) and does not call the writer's own
    commit another writer's; every later flush works; each event is stored once."""
    cutter, dsn = proxy
    runtime, backend, session = live_session(cutter.dsn(dsn), "s")
    session.append("turn/start", {"turn": 1})
    await runtime.sessions.flush(session)  # (a worker's connection: creates the row)
    session.append("step/start", {"turn": 1, "step": 0})
    await runtime.sessions.flush(session)  # (the loop's connection: the cut one)
    cutter.cut, cutter.refusing = "after_send", True
    session.append("step/start", {"turn": 1, "step": 1})
    with pytest.raises(OSError):
        await runtime.sessions.flush(session)
    assert cutter.cuts == 1
    session.append("step/end", {"turn": 1, "step": 1})  # joins the kept batch
    cutter.refusing = False
    await runtime.sessions.flush(session)
    for step in (2, 3):
        session.append("step/start", {"turn": 1, "step": step})
        await runtime.sessions.flush(session)
    await runtime.sessions.dispose(session)
    await backend.aclose()
    assert [e.encode() for e in await stored(dsn, "s")] == [e.encode() for e in session.events]


async def test_a_lost_answer_of_a_cold_append_is_settled_by_the_retry(
    proxy: tuple[CuttingProxy, str],
) -> None:
    """The same through ``append`` (a worker thread's connection), the retry being the same
    batch."""
    cutter, dsn = proxy
    backend = PostgresPersistence(cutter.dsn(dsn))
    await backend.create({"version": 0, "createdAt": 1, "delegationDepth": 0, "id": "c"})
    events = Session.create("c", clock=lambda: 5)
    events.append("turn/start", {"turn": 1})
    events.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    await backend.append("c", events.events[:1])
    cutter.cut, cutter.refusing = "after_send", True
    with pytest.raises(OSError):
        await backend.append("c", events.events[1:])
    cutter.refusing = False
    await backend.append("c", events.events[1:])
    await backend.aclose()
    assert [e.encode() for e in await stored(dsn, "c")] == [e.encode() for e in events.events]


@pytest.mark.process
async def test_restarts_under_a_flushing_writer_lose_and_duplicate_nothing() -> None:
    """A writer flushing after every event while its server is killed (``-m immediate``) and
    started again, three times: each failed flush keeps its batch and says at once that the
    server refused the connection (not that the pool's wait ran out), the writer goes on by
    itself once the server is back, and the stored log is its events exactly."""
    server = OwnServer()
    try:
        runtime, backend, session = live_session(server.dsn, "r")
        session.append("turn/start", {"turn": 1})
        await runtime.sessions.flush(session)
        step = 0
        refusals: list[OSError] = []
        for _ in range(3):
            server.kill()
            failed = 0
            while failed == 0 or step % 5:  # flushes while it is down
                step += 1
                session.append("step/start", {"turn": 1, "step": step})
                try:
                    await runtime.sessions.flush(session)
                except OSError as e:
                    refusals.append(e)
                    failed += 1
                if failed >= 2:
                    break
            server.start()
            await runtime.sessions.flush(session)  # back: the kept batches go in, once
            step += 1
            session.append("step/start", {"turn": 1, "step": step})
            await runtime.sessions.flush(session)
        await runtime.sessions.dispose(session)
        await backend.aclose()
        stored_events = await stored(server.dsn, "r")
        assert [e.encode() for e in stored_events] == [e.encode() for e in session.events]
        assert refusals
        assert all(isinstance(e, ConnectionRefusedError) for e in refusals), refusals
    finally:
        server.remove()


# --- the writer lock's connection ------------------------------------------------------------


def _holding(dsn: str, id: str, pid: int) -> psycopg.Connection[tuple[object, ...]]:
    """A connection holding ``id``'s writer lock, named as this library names the lock
    connection of process ``pid`` of this host."""
    from agent_session.persistence_postgres.locks import KEY

    name = f"agent-session host={socket.gethostname()} pid={pid}"
    holder = psycopg.connect(dsn, autocommit=True, application_name=name)
    assert holder.execute(f"SELECT pg_try_advisory_lock({KEY})", (id,)).fetchone() == (True,)
    return holder


def test_a_lock_whose_holder_died_on_this_host_is_waited_for_not_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writer killed here holds its lock until the server notices that its connection
    closed: the next writer waits for that (it saw the holder), and then takes the lock; a
    holder that is alive is refused at once. (The wait's bound is raised, so that a busy
    machine's slowness cannot end it before the test lets the holder go.)"""
    from agent_session.persistence_postgres import locks as module
    from agent_session.persistence_postgres.locks import AdvisoryLocks, writer_name

    monkeypatch.setattr(module, "DEAD_OWNER_WAIT_S", 300.0)

    dsn = fresh_database()
    locks = AdvisoryLocks(lambda: psycopg.connect(dsn, autocommit=True, application_name="w"))
    alive = _holding(dsn, "live", os.getpid())
    with pytest.raises(SessionCollisionError, match=f"pid={os.getpid()}, server pid"):
        locks.take("live")
    alive.close()
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dead = _holding(dsn, "dead", int(gone.stdout))
    taken: list[bool] = []
    taker = threading.Thread(target=lambda: taken.append(locks.take("dead")))
    taker.start()
    with psycopg.connect(dsn, autocommit=True) as watch:
        while not watch.execute(  # (the taker asked who holds it)
            "SELECT 1 FROM pg_stat_activity WHERE application_name = 'w' AND query LIKE "
            "'%pg_stat_activity%'"
        ).fetchone():
            assert taker.is_alive(), "the taker gave up while the holder was still there"
    assert taker.is_alive()  # waiting, not refused
    dead.close()  # (as the server does once it notices the killed writer's socket closed)
    taker.join(timeout=30)
    assert taken == [True]
    locks.close()
    assert writer_name().startswith(f"agent-session host={socket.gethostname()} pid=")


def _lock_holders(dsn: str, id: str) -> list[int]:
    from agent_session.persistence_postgres.locks import KEY

    with psycopg.connect(dsn, autocommit=True) as db:
        rows = db.execute(
            f"SELECT l.pid FROM pg_locks l, (SELECT {KEY} AS k) key WHERE l.locktype = "
            "'advisory' AND l.granted AND l.objsubid = 1 AND l.classid = "
            "((key.k >> 32) & 4294967295)::oid AND l.objid = (key.k & 4294967295)::oid",
            (id,),
        ).fetchall()
    return [int(row[0]) for row in rows]


@pytest.mark.process
async def test_a_restart_ends_the_lock_connection_and_the_next_write_takes_it_again() -> None:
    server = OwnServer()
    try:
        runtime, backend, session = live_session(server.dsn, "held")
        session.append("turn/start", {"turn": 1})
        await runtime.sessions.flush(session)
        assert len(_lock_holders(server.dsn, "held")) == 1
        server.restart()
        assert _lock_holders(server.dsn, "held") == []  # the server freed it
        session.append("step/start", {"turn": 1, "step": 1})
        while True:  # the pool's old connections fail once each; then it is taken again
            try:
                await runtime.sessions.flush(session)
                break
            except OSError:
                continue
        assert len(_lock_holders(server.dsn, "held")) == 1
        other = PostgresPersistence(server.dsn)
        with pytest.raises(SessionCollisionError, match="another writer"):
            await other.postgres.acquire("held")  # what recover and a second host meet
        await other.aclose()
        await runtime.sessions.dispose(session)
        await backend.aclose()
    finally:
        server.remove()


@pytest.mark.process
async def test_a_lock_taken_elsewhere_after_a_restart_refuses_every_later_write() -> None:
    """Between the restart and the writer's next write, another writer took the lock (an
    operator's recover, a second host): the writer's flushes are refused, every one, and
    nothing of its batch is stored while the other holds it."""
    server = OwnServer()
    try:
        runtime, backend, session = live_session(server.dsn, "taken")
        session.append("turn/start", {"turn": 1})
        await runtime.sessions.flush(session)
        server.restart()
        other = PostgresPersistence(server.dsn)
        assert await other.postgres.acquire("taken")
        session.append("step/start", {"turn": 1, "step": 1})
        for _ in range(3):
            with pytest.raises((SessionCollisionError, OSError)) as refused:
                await runtime.sessions.flush(session)
            if isinstance(refused.value, SessionCollisionError):
                break
        assert "lock" in str(refused.value)
        with pytest.raises(SessionCollisionError):
            await runtime.sessions.flush(session)
        assert [e.type for e in await stored(server.dsn, "taken")] == ["turn/start"]
        await other.aclose()  # it let go having written nothing: the writer may go on
        while _lock_holders(server.dsn, "taken"):  # the fact: the server freed its lock
            await asyncio.sleep(0.01)
        await runtime.sessions.dispose(session)
        await backend.aclose()
        assert [e.type for e in await stored(server.dsn, "taken")] == ["turn/start", "step/start"]
    finally:
        server.remove()


async def test_idle_session_timeout_does_not_end_the_lock_connection() -> None:
    """``idle_session_timeout`` set on the database ends idle connections; the lock
    connection, idle while its session is, keeps its lock (it runs with the timeout off)."""
    dsn = fresh_database()
    name = dsn.rsplit("/", 1)[1]
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(f"ALTER DATABASE {name} SET idle_session_timeout = '300ms'")
    runtime, backend, session = live_session(dsn, "idle")
    session.append("turn/start", {"turn": 1})
    await runtime.sessions.flush(session)
    holders = _lock_holders(dsn, "idle")
    assert len(holders) == 1
    witness = psycopg.connect(dsn, autocommit=True)  # opened after: ended before the lock's
    # wait for the fact: the server spoke on the idle witness (its FATAL) and closed it
    while not select.select([witness.pgconn.socket], [], [], 0)[0]:
        await asyncio.sleep(0.05)  # (staying idle is what is tested)
    with pytest.raises(psycopg.OperationalError):
        witness.execute("SELECT 1")
    assert _lock_holders(dsn, "idle") == holders
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    while True:  # the pool's idle connections were ended too: each fails once
        try:
            await runtime.sessions.flush(session)
            break
        except OSError:
            continue
    await runtime.sessions.dispose(session)
    await backend.aclose()
    assert len(await stored(dsn, "idle")) == 2


# --- a server that refuses writes ------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={k: v for k, v in os.environ.items() if k != "AGENT_SESSION_STORE"})


@pytest.mark.process
async def test_a_read_only_database_serves_reads_and_refuses_writes_clearly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dsn = fresh_database()
    runtime, backend, session = live_session(dsn, "ro")
    session.append("turn/start", {"turn": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    await runtime.sessions.flush(session)
    await runtime.sessions.dispose(session)
    await backend.aclose()
    name = dsn.rsplit("/", 1)[1]
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
    for command in (["ls", dsn], ["verify", dsn], ["verify", dsn, "ro"], ["show", dsn, "ro"]):
        done = _cli(*command)
        assert done.returncode == 0, (command, done.stderr)
        assert "ro" in done.stdout or "turn 1" in done.stdout
    for command in (["rm", dsn, "ro"], ["recover", dsn, "ro"]):
        done = _cli(*command)
        assert "Traceback" not in done.stderr, done.stderr
        if done.returncode != 0:  # (recover has nothing to write: it may succeed)
            assert done.returncode == 5, done.stderr
            assert len(done.stderr.strip().splitlines()) == 1
            assert "refuses writes" in done.stderr
    runtime = Runtime()
    backend = PostgresPersistence(dsn)
    runtime.install(backend)
    fresh = runtime.sessions.create("new")
    fresh.append("turn/start", {"turn": 1})
    with pytest.raises(OSError) as refused:
        await runtime.sessions.flush(fresh)
    assert refused.value.errno == errno.EROFS, refused.value
    with pytest.raises(OSError):  # its batch is still kept: closing says it is not stored
        await backend.aclose()
    with caplog.at_level(logging.WARNING, logger="session.persistence"):
        del runtime, backend, fresh, refused
        gc.collect()  # and what it could not store is named as lost
    (warning,) = [r.getMessage() for r in caplog.records if "were not durable" in r.getMessage()]
    assert 'session(s) "new" (1 event(s)) were not durable' in warning


# --- a transaction-mode pooler -------------------------------------------------------------


@pytest.mark.process
async def test_behind_pgbouncer_in_transaction_mode() -> None:
    """A real PgBouncer in transaction mode: the default backend is refused at once with the
    cause named; with ``transaction_pooler=True`` a live session checkpoints through it, a
    second writer is refused by the compare-and-set (nothing spliced), and the log reads back
    exactly."""
    dsn = fresh_database()
    bouncer = PgBouncer(dsn)
    try:
        runtime, backend, session = live_session(bouncer.dsn, "p")
        session.append("turn/start", {"turn": 1})
        with pytest.raises(OSError, match="transaction_pooler=True"):
            await runtime.sessions.flush(session)
        with pytest.raises(OSError):
            await backend.aclose()  # (the batch could not be stored)

        runtime = Runtime()
        backend = PostgresPersistence(bouncer.dsn, transaction_pooler=True)
        runtime.install(backend)
        session = runtime.sessions.create("p")
        session.append("turn/start", {"turn": 1})
        for step in range(1, 8):
            session.append("step/start", {"turn": 1, "step": step})
            await runtime.sessions.flush(session)
        other_runtime = Runtime()
        other = PostgresPersistence(bouncer.dsn, transaction_pooler=True)
        other_runtime.install(other)
        second = await other_runtime.sessions.resume("p")
        second.append("step/end", {"turn": 1, "step": 7})
        await other_runtime.sessions.flush(second)  # no lock to refuse it: it writes first
        session.append("step/end", {"turn": 1, "step": 7})
        with pytest.raises(SessionCollisionError, match="another writer"):
            await runtime.sessions.flush(session)
        await other_runtime.sessions.dispose(second)
        await other.aclose()
        with contextlib.suppress(SessionCollisionError):
            await backend.aclose()
        assert [e.encode() for e in await stored(dsn, "p")] == [e.encode() for e in second.events]
        with psycopg.connect(dsn, autocommit=True) as db:  # nothing session-level was left
            assert db.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (0,)
    finally:
        bouncer.stop()


# --- the command line ----------------------------------------------------------------------


@pytest.mark.process
async def test_ls_shows_a_session_whose_writer_holds_its_lock_as_open() -> None:
    dsn = fresh_database()
    runtime, backend, session = live_session(dsn, "live")
    session.append("turn/start", {"turn": 1})
    await runtime.sessions.flush(session)  # the writer holds the lock, its turn open
    listed = _cli("ls", dsn, "--json")
    assert listed.returncode == 0, listed.stderr
    assert '"state":"open"' in listed.stdout
    await runtime.sessions.dispose(session)
    await backend.aclose()
    listed = _cli("ls", dsn, "--json")  # the writer is gone: it needs recovery
    assert '"state":"interrupted"' in listed.stdout


@pytest.mark.process
def test_every_command_without_the_postgres_extra_prints_the_install_hint() -> None:
    store = "postgresql://u@127.0.0.1:1/x"
    for command in (["ls", store], ["verify", store], ["show", store, "x"], ["rm", store, "x"]):
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; sys.modules['psycopg_pool'] = None\n"
                "from agent_session.cli import main\n"
                "sys.exit(main(sys.argv[1:]))",
                *command,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 4, (command, done.stderr)
        assert "pip install 'agent-session-runtime[postgres]'" in done.stderr
        assert "Traceback" not in done.stderr
