"""A deleted session leaves no trace on disk: after ``rm`` or ``purge``, a scan of every byte
of the store for a canary string its content held finds nothing — in a JSONL directory, in a
SQLite file with its WAL and free pages, and in a PostgreSQL server's data directory after
the steps ``docs/governance.md`` names (``VACUUM FULL``, a WAL switch and a checkpoint)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import psycopg
import pytest

from agent_session import open_store
from tests.pg_server import OwnServer
from tests.test_cli import cli
from tests.test_retention import write_session

KEPT = "kept-5d1e-still-here"


def traces(root: Path, canary: bytes) -> list[str]:
    """Every file under ``root`` whose bytes hold ``canary``."""
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and canary in path.read_bytes()
    )


def fill(store: str, canary: str) -> None:
    """Three sessions: one whose content holds ``canary`` (in short messages, and in long
    ones for overflow pages too), two that keep other content (their pages are shared and
    rewritten)."""
    asyncio.run(write_session(store, "a", text=KEPT, turns=3))
    asyncio.run(write_session(store, "gone", text=canary, turns=2))
    asyncio.run(write_session(store, "gone", text=f"{canary} {os.urandom(3000).hex()}"))
    asyncio.run(write_session(store, "b", text=KEPT, turns=3))


@pytest.mark.parametrize("how", ["rm", "purge"])
def test_jsonl_directory_holds_no_trace(tmp_path: Path, how: str) -> None:
    root, canary = tmp_path / "s", f"canary-{how}-jsonl-91c2"
    fill(str(root), canary)
    assert traces(root, canary.encode()) != []
    delete(str(root), how)
    assert traces(root, canary.encode()) == []
    assert traces(root, KEPT.encode()) != []


def delete(store: str, how: str) -> None:
    if how == "rm":
        cli("rm", store, "gone")
    else:
        cli("label", store, "gone", "subject=ana")
        cli("purge", store, "--older-than", "0s", "--label", "subject=ana")


@pytest.mark.parametrize("how", ["rm", "purge", "open store"])
def test_sqlite_file_wal_and_free_pages_hold_no_trace(tmp_path: Path, how: str) -> None:
    root, canary = tmp_path / "db", f"canary-{how}-sqlite-4b7e"
    root.mkdir()
    store = f"sqlite:///{root}/sessions.db"
    fill(store, canary)
    assert traces(root, canary.encode()) != []
    if how == "open store":  # (a long-lived process: its WAL is not removed at close)
        asyncio.run(_delete_while_open(store, root, canary.encode()))
    else:
        delete(store, how)
    assert traces(root, canary.encode()) == []
    assert traces(root, KEPT.encode()) != []


async def _delete_while_open(store: str, root: Path, canary: bytes) -> None:
    backend = open_store(store)
    try:
        await backend.delete("gone")
        assert traces(root, canary) == []  # (the WAL file is there, truncated)
    finally:
        await backend.aclose()


def test_the_scan_finds_what_a_plain_sqlite_delete_leaves(tmp_path: Path) -> None:
    """The control: without ``secure_delete`` and a WAL checkpoint, a deleted session's
    bytes stay in the file's free pages or its WAL, and the scan above finds them."""
    root, canary = tmp_path / "db", "canary-control-sqlite-77aa"
    root.mkdir()
    fill(f"sqlite:///{root}/sessions.db", canary)
    db = sqlite3.connect(root / "sessions.db", isolation_level=None)
    try:
        db.execute("PRAGMA secure_delete = OFF")
        db.execute("DELETE FROM events WHERE session_id = 'gone'")
        db.execute("DELETE FROM sessions WHERE id = 'gone'")
        assert db.execute("SELECT count(*) FROM events WHERE session_id = 'gone'").fetchone() == (
            0,
        )
        assert traces(root, canary.encode()) != []
    finally:
        db.close()


@pytest.mark.process
def test_postgres_data_directory_holds_no_trace_after_vacuum(tmp_path: Path) -> None:
    server = OwnServer(settings="-c wal_recycle=off -c min_wal_size=32MB")
    try:
        canary = "canary-postgres-e02f"
        fill(server.dsn, canary)
        data = server.directory / "data"
        with psycopg.connect(server.dsn, autocommit=True) as db:
            db.execute("CHECKPOINT")
        assert traces(data, canary.encode()) != []
        delete(server.dsn, "purge")
        with psycopg.connect(server.dsn, autocommit=True) as db:  # (the documented steps)
            db.execute("VACUUM FULL agent_session_event, agent_session")
            for _ in range(2):
                db.execute("SELECT pg_switch_wal()")
                db.execute("CHECKPOINT")
        assert traces(data, canary.encode()) == []
        assert traces(data, KEPT.encode()) != []
    finally:
        server.remove()


def test_the_search_index_forgets_a_deleted_session_byte_for_byte(tmp_path: Path) -> None:
    root, canary = tmp_path / "s", "canary-search-index-3c9d"
    index = tmp_path / "index.db"
    fill(str(root), canary)
    found = cli("search", str(root), canary, "--index", str(index)).stdout
    assert "gone seq" in found
    assert canary.encode() in index.read_bytes()
    delete(str(root), "purge")
    after = cli("search", str(root), canary, "--index", str(index)).stdout
    assert "no session says" in after
    assert traces(tmp_path, canary.encode()) == []  # (the store and the index beside it)


def test_a_sealed_session_is_never_indexed(tmp_path: Path) -> None:
    from agent_session.sealing import Keyring

    master = tmp_path / "master.key"
    master.write_bytes(os.urandom(32))
    ring = Keyring(tmp_path / "ring", master.read_bytes())
    root, canary, index = tmp_path / "s", "canary-sealed-index-81f0", tmp_path / "index.db"
    asyncio.run(write_session(str(root), "sealed", keyring=ring, text=canary))
    env = {
        "AGENT_SESSION_KEYRING": str(ring.directory),
        "AGENT_SESSION_MASTER_KEY_FILE": str(master),
    }
    for given in ({}, env):  # (without its keyring, and with it)
        found = cli("search", str(root), canary, "--index", str(index), env=given).stdout
        assert "no session says" in found
    assert traces(tmp_path, canary.encode()) == []
