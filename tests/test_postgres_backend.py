"""The PostgreSQL backend against a real server (``scripts/with-postgres``; these tests fail,
never skip, without one): the corpus copied in and out byte for byte; writers in two
processes; a connection cut during a commit, reconciled; the server killed and restarted under
a checkpointing agent; the schema and durability refusals."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from agent_session.cli.copy import copy_session
from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_postgres import PostgresPersistence
from agent_session.persistence_postgres.lines import batch_lines
from agent_session.persistence_postgres.schema import MIGRATIONS, SCHEMA_VERSION, check_durability
from agent_session.persistence_sqlite import SqlitePersistence
from agent_session.session import (
    Runtime,
    Session,
    SessionCollisionError,
    SessionDurabilityError,
    SessionEvent,
    SessionFormatUnsupportedError,
    SessionHeader,
    register_event_type,
)
from agent_session.session.events.header import header_line
from agent_session.session.persistence.service import SessionPersistence
from tests.backends import fresh_database
from tests.corpus import case_bytes, cases
from tests.pg_server import CuttingProxy, OwnServer
from tests.test_writer_lock import writer

register_event_type("plugin/write")
HEADER = {"version": 0, "createdAt": 1, "delegationDepth": 0}


def turn(id: str, first: int = 1) -> Session:
    session = Session.create(id, clock=lambda: 5)
    session.append("turn/start", {"turn": first})
    session.append("step/start", {"turn": first, "step": 1})
    session.append("step/end", {"turn": first, "step": 1})
    session.append("turn/end", {"turn": first, "reason": {"kind": "completed"}})
    return session


def live_session(dsn: str, id: str) -> tuple[Runtime, PostgresPersistence, Session]:
    """A runtime with a PostgreSQL backend on ``dsn`` and a new live session ``id``."""
    runtime = Runtime()
    backend = PostgresPersistence(dsn)
    runtime.install(backend)
    return runtime, backend, runtime.sessions.create(id)


async def stored(dsn: str, id: str, first: int = 0) -> list[SessionEvent]:
    """What a fresh backend on ``dsn`` reads of ``id`` from seq ``first`` on."""
    check = PostgresPersistence(dsn)
    try:
        return list(await check.read_from(id, first))
    finally:
        await check.aclose()


@pytest.mark.slow
async def test_every_corpus_log_goes_in_and_comes_back_the_same_file(tmp_path: Path) -> None:
    """Every log of the plain corpus that loads (as the reference left it after its load):
    copied into PostgreSQL it reads back as the same events, and copied back out it is the
    same file, byte for byte."""
    database = PostgresPersistence(fresh_database())
    checked = 0
    for n, case in enumerate(cases()):
        if "error" in case["load"] or not case["load"]["events"]:
            continue
        original = case_bytes(case, "file_after_load_b64")
        source_root, back_root = tmp_path / f"in-{n}", tmp_path / f"out-{n}"
        (source_root / case["path"]).parent.mkdir(parents=True)
        (source_root / case["path"]).write_bytes(original)
        source, back = JsonlPersistence(source_root), JsonlPersistence(back_root)
        id = case["session_id"]
        await copy_session(source, database, id)
        stored = [e.encode() for e in await source.read_from(id, 0)]
        assert [e.encode() for e in await database.read_from(id, 0)] == stored, case["case"]
        await copy_session(database, back, id)
        assert (back_root / case["path"]).read_bytes() == original, case["case"]
        await database.delete(id)
        await source.aclose()
        await back.aclose()
        checked += 1
    await database.aclose()
    assert checked > 150


@pytest.mark.slow
async def test_the_compressed_and_sqlite_corpora_go_in_and_come_back_the_same_events(
    tmp_path: Path,
) -> None:
    database = PostgresPersistence(fresh_database())
    checked = 0
    sources: list[tuple[str, SessionPersistence]] = []
    for n, case in enumerate(cases("upstream-v0-zstd")):
        if "error" in case["load"] or not case["load"]["events"]:
            continue
        root = tmp_path / f"z-{n}"
        (root / case["path"]).parent.mkdir(parents=True)
        (root / case["path"]).write_bytes(case_bytes(case, "file_after_load_b64"))
        sources.append((case["session_id"], JsonlPersistence(root)))
    for n, case in enumerate(cases("upstream-sqlite-v0")):
        if "error" in case["load"]:
            continue
        path = tmp_path / f"s-{n}.db"
        path.write_bytes(case_bytes(case, "db_b64"))
        sources.append((case["session_id"], SqlitePersistence(path)))
    for id, source in sources:
        await copy_session(source, database, id)
        expected = [e.to_json() for e in await source.read_from(id, 0)]
        assert [e.to_json() for e in await database.read_from(id, 0)] == expected
        await database.delete(id)
        await source.aclose()
        checked += 1
    await database.aclose()
    assert checked > 90  # every case of the two corpora that loads


@pytest.mark.process
def test_a_second_writer_process_is_refused_naming_the_owner(tmp_path: Path) -> None:
    store = fresh_database()
    go = tmp_path / "go"
    go.touch()
    holder = writer(store, "held", 1, go, "--hold")
    assert holder.stdout is not None
    assert holder.stdout.readline().startswith("acked 0")
    assert holder.stdout.readline().strip() == "holding"
    second = writer(store, "held", 5, go)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert out.startswith("refused ")
    assert f"pid={holder.pid}" in out  # its application_name: host and pid
    holder.kill()
    holder.wait(timeout=30)
    again = writer(store, "held", 3, go)  # the server freed the dead holder's lock
    out, err = again.communicate(timeout=60)
    assert [line for line in out.splitlines() if line.startswith("acked")] == [
        "acked 1",
        "acked 2",
        "acked 3",
    ], err
    with psycopg.connect(store) as db:
        seqs = [r[0] for r in db.execute("SELECT seq FROM agent_session_event ORDER BY seq")]
    assert seqs == [0, 1, 2, 3]


async def test_a_stale_writer_is_refused_and_splices_nothing() -> None:
    dsn = fresh_database()
    first = PostgresPersistence(dsn)
    await first.create({**HEADER, "id": "s"})
    await first.append("s", turn("s").events)
    await first.aclose()
    stale = PostgresPersistence(dsn)
    await stale.load("s")
    other = PostgresPersistence(dsn)
    await other.append("s", [{"type": "plugin/write", "seq": 4, "time": 6, "data": {"by": 2}}])
    await other.aclose()
    with pytest.raises(SessionCollisionError, match="changed by another writer"):
        await stale.append("s", [{"type": "plugin/write", "seq": 4, "time": 6, "data": {}}])
    await stale.aclose()
    assert [e.data.get("by") for e in await stored(dsn, "s", 4)] == [2]


async def test_a_live_checkpoint_behind_another_writer_is_refused_on_the_loop() -> None:
    """The compare-and-set of a statement sent on the event loop's connection: a session
    row moved by someone else refuses the batch, and nothing of it is stored."""
    dsn = fresh_database()
    runtime, backend, session = live_session(dsn, "s")
    session.append("turn/start", {"turn": 1})
    await runtime.sessions.flush(session)  # materialized (a worker thread)
    for step in (1, 2):  # the loop's connection, its statement prepared
        session.append("step/start", {"turn": 1, "step": step})
        await runtime.sessions.flush(session)
    assert backend.postgres._on_loop._open == 1
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute("UPDATE agent_session SET next_seq = next_seq + 1 WHERE id = 's'")
    session.append("step/start", {"turn": 1, "step": 3})
    with pytest.raises(SessionCollisionError, match="changed by another writer"):
        await runtime.sessions.flush(session)
    with psycopg.connect(dsn, autocommit=True) as db:
        rows = db.execute("SELECT count(*) FROM agent_session_event WHERE session_id = 's'")
        assert rows.fetchone() == (3,)
    with pytest.raises(SessionCollisionError):  # closing still refuses the kept batch
        await backend.aclose()


async def test_a_commit_whose_acknowledgement_is_lost_is_reconciled(
    proxy: tuple[CuttingProxy, str],
) -> None:
    cutter, dsn = proxy
    backend = PostgresPersistence(cutter.dsn(dsn))
    await backend.create({**HEADER, "id": "s"})
    events = turn("s").events
    await backend.append("s", events[:2])
    cutter.cut = "after_send"  # the append commits; its answer never arrives
    await backend.append("s", events[2:])  # reconciled: the batch is there, exactly
    assert cutter.cuts == 1
    await backend.aclose()
    assert [e.encode() for e in await stored(dsn, "s")] == [e.encode() for e in events]


async def test_a_live_checkpoint_whose_acknowledgement_is_lost_is_reconciled_on_the_loop(
    proxy: tuple[CuttingProxy, str],
) -> None:
    """The same on a live session's checkpoint (a statement of the event loop's connection):
    the flush succeeds, and the next checkpoint runs on a new connection."""
    cutter, dsn = proxy
    runtime, backend, session = live_session(cutter.dsn(dsn), "s")
    session.append("turn/start", {"turn": 1})
    await runtime.sessions.flush(session)
    for step in (1, 2, 3):
        if step == 2:
            cutter.cut = "after_send"
        session.append("step/start", {"turn": 1, "step": step})
        session.append("step/end", {"turn": 1, "step": step})
        await runtime.sessions.flush(session)
    assert cutter.cuts == 1
    assert backend.postgres._on_loop._open == 1  # the cut connection was replaced
    await runtime.sessions.dispose(session)
    await backend.aclose()
    assert [e.encode() for e in await stored(dsn, "s")] == [e.encode() for e in session.events]


async def test_a_commit_that_never_reached_the_server_is_an_error_and_retried_once(
    proxy: tuple[CuttingProxy, str],
) -> None:
    cutter, dsn = proxy
    runtime, backend, session = live_session(cutter.dsn(dsn), "s")
    session.append("turn/start", {"turn": 1})
    await runtime.sessions.flush(session)
    for step in (1, 2):  # cut at the statement's preparation, then at its execution
        cutter.cut = "before_send"
        session.append("step/start", {"turn": 1, "step": step})
        with pytest.raises(OSError, match="the batch (of .s. )?is not stored"):
            await runtime.sessions.flush(session)
        assert cutter.cuts == step
        await runtime.sessions.flush(session)  # the kept batch goes in now, once
    await runtime.sessions.dispose(session)
    await backend.aclose()
    assert [e.type for e in await stored(dsn, "s")] == ["turn/start", "step/start", "step/start"]


@pytest.mark.process
async def test_the_server_killed_and_restarted_under_a_checkpointing_agent() -> None:
    server = OwnServer()
    try:
        await kill_and_restart(server)
    finally:
        server.remove()


async def kill_and_restart(server: OwnServer) -> None:
    runtime, backend, session = live_session(server.dsn, "k")
    session.append("turn/start", {"turn": 1})
    for step in range(1, 6):  # checkpoints the server acknowledged
        session.append("step/start", {"turn": 1, "step": step})
        session.append("step/end", {"turn": 1, "step": step})
        await runtime.sessions.flush(session)
    acknowledged = len(session.events)
    server.kill()
    try:
        session.append("step/start", {"turn": 1, "step": 6})
        with pytest.raises(OSError):  # a clear error, not a hang
            await asyncio.wait_for(runtime.sessions.flush(session), 60)
    finally:
        server.start()
    await runtime.sessions.flush(session)  # the kept batch, once the server is back
    await runtime.sessions.dispose(session)
    await backend.aclose()
    after = PostgresPersistence(server.dsn)
    stored = await after.read_from("k", 0)
    assert len(stored) == acknowledged + 1
    assert [e.encode() for e in stored] == [e.encode() for e in session.events]
    resumed = await after.load("k")  # the open turn is closed
    assert [e.type for e in resumed.events[-2:]] == ["step/end", "turn/end"]
    await after.aclose()


async def test_a_newer_schema_is_refused() -> None:
    dsn = fresh_database()
    backend = PostgresPersistence(dsn)
    await backend.list_headers()  # creates the schema
    await backend.aclose()
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute("UPDATE agent_session_schema SET version = 99")
    newer = PostgresPersistence(dsn)
    with pytest.raises(SessionFormatUnsupportedError, match="schema version 99, newer than"):
        await newer.list_headers()
    await newer.aclose()


async def test_a_version_1_database_is_upgraded_in_place() -> None:
    """Migration 2 drops the lines' foreign key: what version 1 stored reads back the same,
    and a delete still leaves no line of the session behind."""
    dsn = fresh_database()
    with psycopg.connect(dsn, autocommit=True) as db:  # version 1, written as it wrote
        db.execute(MIGRATIONS[0].encode())
        db.execute(
            "CREATE TABLE agent_session_schema (singleton int PRIMARY KEY "
            "CHECK (singleton = 1), version int NOT NULL)"
        )
        db.execute("INSERT INTO agent_session_schema VALUES (1, 1)")
        for id in ("kept", "gone"):
            events = turn(id).events
            db.execute(
                "INSERT INTO agent_session VALUES (%s, %s, 1, %s, 1, gen_random_uuid())",
                (id, header_line(SessionHeader(id=id, created_at=1)).decode(), len(events)),
            )
            for line in batch_lines(events):
                db.execute(
                    "INSERT INTO agent_session_event VALUES (%s, %s, %s, %s, %s)",
                    (id, line.seq, line.n, line.type, line.text),
                )
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            db.execute("INSERT INTO agent_session_event VALUES ('x', 0, 1, 't', '{}')")
    upgraded = PostgresPersistence(dsn)
    await upgraded.delete("gone")
    await upgraded.aclose()
    with psycopg.connect(dsn, autocommit=True) as db:
        version = db.execute("SELECT version FROM agent_session_schema").fetchone()
        keys = db.execute(
            "SELECT count(*) FROM pg_constraint WHERE conrelid = 'agent_session_event'::regclass "
            "AND contype = 'f'"
        ).fetchone()
        left = db.execute(
            "SELECT session_id, sum(n) FROM agent_session_event GROUP BY session_id"
        ).fetchall()
    assert version == (SCHEMA_VERSION,)
    assert SCHEMA_VERSION == 2
    assert keys == (0,)
    assert left == [("kept", len(turn("kept").events))]
    assert [e.encode() for e in await stored(dsn, "kept")] == [
        e.encode() for e in turn("kept").events
    ]


def test_asynchronous_commits_are_refused() -> None:
    with psycopg.connect(fresh_database(), autocommit=True) as db:
        check_durability(db)  # the test server: fsync on, synchronous_commit on
        db.execute("SET synchronous_commit = off")
        with pytest.raises(SessionDurabilityError, match="synchronous_commit is 'off'"):
            check_durability(db)
        db.execute("SET synchronous_commit = local")
        with pytest.raises(SessionDurabilityError, match="'local'"):
            check_durability(db)


async def test_many_sessions_at_once_on_a_fresh_backend() -> None:
    """The first calls of several workers open the pool and migrate once (they raced)."""
    backend = PostgresPersistence(fresh_database())

    async def one(id: str) -> None:
        await backend.create({**HEADER, "id": id})
        await backend.append(id, turn(id).events)

    await asyncio.gather(*(one(f"c{n}") for n in range(16)))
    assert len(await backend.list_headers()) == 16
    await backend.aclose()


async def test_a_pool_of_yours() -> None:
    """Its connections (not autocommit, as a pool's are by default) are switched to
    autocommit and synchronous commits when first used: what an append returned is
    committed, and the pool stays open for its owner."""
    dsn = fresh_database()
    pool: ConnectionPool[Any] = ConnectionPool(dsn, min_size=1, max_size=2, open=True)
    backend = PostgresPersistence(pool)
    await backend.create({**HEADER, "id": "p"})
    await backend.append("p", turn("p").events)
    await backend.aclose()
    assert not pool.closed
    with pool.connection() as db:
        assert db.execute("SHOW synchronous_commit").fetchone() == ("on",)
    pool.close()
    with psycopg.connect(dsn) as db:  # committed: another connection sees it
        assert db.execute("SELECT count(*) FROM agent_session_event").fetchone() == (4,)


async def test_a_writer_of_one_id_in_another_database_is_not_this_store_s_writer() -> None:
    """Advisory locks are per database: a live writer of session "chat" in one database of a
    server is no writer of the "chat" of another database on it (``diagnose`` and ``ls``)."""
    from agent_session.persistence_postgres.survey import survey

    busy, idle = fresh_database(), fresh_database()
    async with Runtime() as stopped:
        stopped.install(PostgresPersistence(idle))
        session = stopped.sessions.create("chat")
        session.append("turn/start", {"turn": 1})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    async with Runtime() as live:
        live.install(PostgresPersistence(busy))
        session = live.sessions.create("chat")
        session.append("turn/start", {"turn": 1})
        await live.sessions.flush(session)  # (its writer lock is held from here)
        looking = PostgresPersistence(idle)
        try:
            assert not (await looking.diagnose("chat")).writer_elsewhere
        finally:
            await looking.aclose()
        [row] = survey(idle)
        assert not row.writer_active
        other = PostgresPersistence(busy)
        try:
            assert (await other.diagnose("chat")).writer_elsewhere  # (its own database's)
        finally:
            await other.aclose()
