"""The SQLite backend beyond the shared contract: its durability settings, file modes and
thread discipline; writers of one session in two processes (never interleaved, never
duplicated); a busy database; a stale writer; hostile databases refused clearly (by the
backend and by the CLI) and left untouched."""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_session.persistence_sqlite import APPLICATION_ID, SCHEMA_VERSION, SqlitePersistence
from agent_session.session import (
    Session,
    SessionCollisionError,
    SessionError,
    SessionFormatUnsupportedError,
    SessionPersistenceCorruptionError,
    register_event_type,
)
from agent_session.session.events.eventlog import LazyRun
from tests.forkserver import run_cli
from tests.sweeps import examples
from tests.test_writer_lock import writer

REPO = Path(__file__).resolve().parents[1]
register_event_type("plugin/write")
HEADER = {"version": 0, "createdAt": 1, "delegationDepth": 0}


def turn(id: str = "s") -> Session:
    session = Session.create(id, clock=lambda: 5)
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return session


async def test_connection_settings_file_modes_and_identity(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "sessions.db"
    backend = SqlitePersistence(path)
    await backend.create({**HEADER, "id": "s"})
    await backend.append("s", turn().events)
    pragmas = await backend.sqlite._run(
        lambda db: [
            db.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("synchronous", "journal_mode", "busy_timeout", "foreign_keys")
        ]
    )
    assert pragmas == [2, b"wal", 5000, 1]  # FULL: durable when a commit returns
    await backend.aclose()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID == 0x44534850
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 14
        assert db.execute("SELECT revision FROM sessions").fetchone()[0] == 1


async def test_every_sqlite_call_runs_off_the_event_loop(tmp_path: Path) -> None:
    backend = SqlitePersistence(tmp_path / "s.db")
    threads: set[int] = set()
    await backend.sqlite._run(
        lambda db: db.set_trace_callback(lambda _: threads.add(threading.get_ident()))
    )
    await backend.create({**HEADER, "id": "s"})
    await backend.append("s", turn().events)
    await backend.load("s")
    await backend.list_snapshots()
    await backend.read_raw("s")
    await backend.delete("s")
    await backend.aclose()
    assert threads  # the statements were seen
    assert threading.get_ident() not in threads
    assert len(threads) == 1  # one worker thread per database


async def test_in_memory_database(tmp_path: Path) -> None:
    backend = SqlitePersistence(":memory:")
    await backend.create({**HEADER, "id": "m"})
    await backend.append("m", turn("m").events)
    assert len((await backend.load("m")).events) == 4
    await backend.aclose()
    assert list(tmp_path.iterdir()) == []


async def test_a_second_writer_is_refused_until_the_first_lets_go(tmp_path: Path) -> None:
    """While one storage holds a session, another (same process, same file) cannot load it
    for writing, and sees that a writer holds it; once the first lets go, it can."""
    first, second = SqlitePersistence(tmp_path / "s.db"), SqlitePersistence(tmp_path / "s.db")
    await first.create({**HEADER, "id": "s"})
    await first.append("s", turn().events)
    await second.load("s")  # reading takes no lock
    more = [{"type": "plugin/write", "seq": 4, "time": 6, "data": {"by": "second"}}]
    with pytest.raises(SessionCollisionError, match="being written by another writer"):
        await second.append("s", more)
    assert (await second.diagnose("s")).writer_elsewhere
    await first.aclose()  # releases the writer lock
    assert not (await second.diagnose("s")).writer_elsewhere
    await second.append("s", more)
    events = await second.read_from("s", 0)
    assert [e.data.get("by") for e in events[4:]] == ["second"]
    await second.aclose()


async def test_a_busy_database_is_waited_for_then_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    backend = SqlitePersistence(path, busy_timeout_ms=100)
    await backend.create({**HEADER, "id": "s"})
    await backend.append("s", turn().events[:1])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer's transaction that does not end
    with pytest.raises(SessionCollisionError, match="stayed locked by another writer for 100 ms"):
        await backend.append("s", turn().events[1:2])
    holder.execute("ROLLBACK")
    holder.close()
    await backend.append("s", turn().events[1:2])  # nothing of the refused batch was kept
    assert [e.seq for e in await backend.read_from("s", 0)] == [0, 1]
    await backend.aclose()


@pytest.mark.process
@pytest.mark.parametrize("round_", range(3))
def test_two_processes_appending_to_one_session_never_interleave(
    tmp_path: Path, round_: int
) -> None:
    store = f"sqlite:///{tmp_path}/sessions.db"
    go = tmp_path / "go"
    first = writer(store, "shared", 100, go)
    second = writer(store, "shared", 100, go)
    go.touch()
    outputs = [p.communicate(timeout=120) for p in (first, second)]
    for process, (_, err) in zip((first, second), outputs, strict=True):
        assert process.returncode == 0, err
    acked = [
        int(line.split()[1]) for out, _ in outputs for line in out.splitlines() if "acked" in line
    ]
    refused = [
        line for out, _ in outputs for line in out.splitlines() if line.startswith("refused")
    ]
    with sqlite3.connect(tmp_path / "sessions.db") as db:
        rows = db.execute("SELECT seq, data FROM events ORDER BY seq").fetchall()
    seqs = [seq for seq, _ in rows]
    assert seqs == list(range(len(seqs)))  # contiguous: nothing spliced or duplicated
    assert sorted(acked) == seqs  # every acknowledged event, once
    pids = [int(data.split('"pid":')[1].split(",")[0]) for _, data in rows]
    runs = [p for i, p in enumerate(pids) if i == 0 or pids[i - 1] != p]
    assert len(runs) == len(set(runs)) <= 2  # never interleaved: one run per writer
    assert refused or len(runs) == 2, "a writer that could not write must be told why"
    assert all(
        "another writer" in line
        or "already" in line
        or "refusing to materialize" in line
        or "seq mismatch" in line  # it read the log, then saw it had moved on
        for line in refused
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=60)


def _database(path: Path, *pragmas: str, tables: str = "") -> None:
    with sqlite3.connect(path) as db:
        for pragma in pragmas:
            db.execute(f"PRAGMA {pragma}")
        if tables:
            db.execute(tables)


HOSTILE = {
    "newer schema": (
        lambda p: _database(p, "application_id = 1146308688", "user_version = 15"),
        SessionFormatUnsupportedError,
        "has schema version 15, incompatible with this build (14)",
    ),
    "foreign application id": (
        lambda p: _database(p, "application_id = 7", "user_version = 14"),
        SessionFormatUnsupportedError,
        "has application id 7, expected 1146308688",
    ),
    "another program's database": (
        lambda p: _database(p, tables="CREATE TABLE notes (body TEXT)"),
        SessionFormatUnsupportedError,
        "has an unversioned schema or application identity",
    ),
    "not a database": (
        lambda p: p.write_bytes(b"just some text, not SQLite\n" * 200),
        SessionFormatUnsupportedError,
        "cannot be read as a SQLite database: file is not a database",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
async def test_hostile_databases_are_refused_and_left_untouched(case: str, tmp_path: Path) -> None:
    make, kind, message = HOSTILE[case]
    path = tmp_path / "s.db"
    make(path)
    before = path.read_bytes()
    backend = SqlitePersistence(path)
    with pytest.raises(kind, match=re.escape(message)) as raised:
        await backend.list_headers()
    assert str(path) in str(raised.value)
    with pytest.raises(kind, match=re.escape(message)):
        await backend.create({**HEADER, "id": "s"})
    await backend.aclose()
    assert path.read_bytes() == before
    for command in ("ls", "verify"):
        result = _cli(command, f"sqlite:///{path}")
        assert result.returncode == 2, result.stderr
        assert message in result.stderr
        assert "Traceback" not in result.stderr
    assert path.read_bytes() == before


async def test_invalid_json_in_the_committed_region_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    backend = SqlitePersistence(path)
    await backend.create({**HEADER, "id": "s"})
    await backend.append("s", turn().events)
    await backend.aclose()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE events SET data = '{\"turn\":' WHERE seq = 1")
    again = SqlitePersistence(path)
    with pytest.raises(
        SessionPersistenceCorruptionError,
        match=r'unparsable committed event at seq 1 \(session "s", database ".*s\.db"\)',
    ):
        await again.load("s")
    await again.aclose()
    result = _cli("verify", f"sqlite:///{path}")
    assert result.returncode == 2
    assert "s: corrupt — corrupt session log: unparsable committed event at seq 1" in result.stdout


async def test_a_truncated_database_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    backend = SqlitePersistence(path, journal_mode="delete")
    for n in range(40):  # enough rows for several pages
        await backend.create({**HEADER, "id": f"s{n}"})
        await backend.append(f"s{n}", turn(f"s{n}").events)
    await backend.aclose()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    damaged = SqlitePersistence(path)
    with pytest.raises(SessionError, match=str(path)):
        for n in range(40):
            await damaged.load(f"s{n}")
    await damaged.aclose()


async def test_delete_cascades_to_the_event_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    backend = SqlitePersistence(path)
    for id in ("a", "b"):
        await backend.create({**HEADER, "id": id})
        await backend.append(id, turn(id).events)
    await backend.delete("a")
    await backend.aclose()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT DISTINCT session_id FROM events").fetchall() == [("b",)]


async def test_concurrent_sessions_on_one_database(tmp_path: Path) -> None:
    backend = SqlitePersistence(tmp_path / "s.db")

    async def one(id: str) -> None:
        await backend.create({**HEADER, "id": id})
        await backend.append(id, turn(id).events)

    await asyncio.gather(*(one(f"c{n}") for n in range(20)))
    assert len(await backend.list_headers()) == 20
    await backend.aclose()
    assert os.path.exists(tmp_path / "s.db")


CHUNKS = [
    {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "a"}},
    {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "\u00e9\n\u2028"}},
    {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 1, "text": "b"}},
    {"turn": 1, "step": 1, "chunk": {"type": "reasoning-delta", "index": 0, "text": "r"}},
    {"turn": 1, "step": 1, "chunk": {"text": "other key order", "index": 0, "type": "text-delta"}},
    {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x", "extra": 1}},
    {
        "turn": 1,
        "step": 1,
        "chunk": {"type": "tool-call-delta", "index": 0, "id": "c", "argumentsDelta": "{"},
    },
]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, len(CHUNKS) - 1), max_size=40), st.integers(1, 9))
def test_streamed_deltas_load_exactly_as_written(choices: list[int], dt: int) -> None:
    """Runs of plain deltas come back as lazy runs; every event (any shape, any run length)
    encodes exactly as it was written."""

    async def scenario(path: str) -> tuple[list[bytes], list[bytes], int]:
        clock = iter(range(0, 10_000, dt))
        session = Session.create("d", clock=lambda: next(clock))
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        for choice in choices:
            session.append("assistant/chunk", CHUNKS[choice])
        backend = SqlitePersistence(path)
        await backend.create({**HEADER, "id": "d"})
        await backend.append("d", session.events)
        stored = await backend.storage.load("d")
        await backend.aclose()
        assert stored is not None
        lazy = sum(isinstance(p, LazyRun) for p in getattr(stored.events, "parts", ()))
        fresh = SqlitePersistence(path)
        loaded = await fresh.read_from("d", 0)
        await fresh.aclose()
        return [e.encode() for e in session.events], [e.encode() for e in loaded], lazy

    with tempfile.TemporaryDirectory() as root:
        written, loaded, lazy = asyncio.run(scenario(os.path.join(root, "s.db")))
    assert loaded == written
    runs = sum(
        1
        for i in range(len(choices) - 2)
        if choices[i] == choices[i + 1] == choices[i + 2]
        and choices[i] < 4
        and (i == 0 or choices[i - 1] != choices[i])
    )
    if runs:
        assert lazy >= 1


@pytest.mark.slow  # (300 rounds; make test runs it)
def test_connections_that_open_a_new_database_together_all_open_it(tmp_path: Path) -> None:
    """Two connections creating one database at once: the one whose switch to WAL meets the
    other's schema transaction waits for it (SQLite answers it busy at once, without its busy
    handler), rather than fail with "database is locked"."""
    from agent_session.persistence_sqlite.schema import open_database

    failed: list[BaseException] = []
    for round in range(300):
        path = str(tmp_path / f"r{round}.db")
        together = threading.Barrier(3)

        def open_it(path: str = path, together: threading.Barrier = together) -> None:
            together.wait()
            try:
                open_database(path, "wal", 5000).connection.close()
            except BaseException as e:  # (collected: a thread's raise would be lost)
                failed.append(e)

        threads = [threading.Thread(target=open_it) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failed == []
