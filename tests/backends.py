"""Backend kits for the persistence contract suite.

A kit makes backend instances over one shared storage (a new instance models a process
restart) and can plant raw stored logs for the read-side tests. A new backend joins the
contract suite by adding one kit factory to ``KITS``.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg
import pytest

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_postgres import PostgresPersistence
from agent_session.persistence_postgres.schema import migrate
from agent_session.persistence_sqlite import SqlitePersistence
from agent_session.persistence_sqlite.schema import open_database
from agent_session.session import SessionHeader, encode_json
from agent_session.session.json.lossless import snapshot
from agent_session.session.persistence.service import SessionPersistence
from agent_session.session.persistence.write_behind import Scheduler
from agent_session.testing import Kit, MemoryKit


class JsonlKit:
    name = "jsonl"
    keeps_ignorable = header_names_id = answers_at_once = deletes = True

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="jsonl-kit-")
        self.backends: list[JsonlPersistence] = []

    def make(
        self, *, scheduler: Scheduler | None = None, write_batch_max_delay_ms: int = 200
    ) -> SessionPersistence:
        backend = JsonlPersistence(
            self.root, scheduler=scheduler, write_batch_max_delay_ms=write_batch_max_delay_ms
        )
        self.backends.append(backend)
        return backend

    def plant(
        self,
        header: Mapping[str, Any],
        events: Sequence[Mapping[str, Any]],
        *,
        under: str | None = None,
    ) -> None:
        place = SessionHeader.model_validate(
            {**header, "version": 0, "id": under if under is not None else header["id"]}
        )
        path = JsonlPersistence(self.root).locate(place)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        lines = [encode_json(snapshot({"type": "session", **header}))]
        lines += [encode_json(snapshot(e)) for e in events]
        with open(path, "wb") as f:
            f.write(b"\n".join(lines) + b"\n")

    def append_calls(self) -> int:
        total = 0
        for directory, _, files in os.walk(self.root):
            for name in files:
                if name == "session.jsonl":
                    with open(os.path.join(directory, name), "rb") as f:
                        total += f.read().count(b"\n")
        return total


class SqliteKit:
    name = "sqlite"
    keeps_ignorable = header_names_id = answers_at_once = False
    deletes = True

    def __init__(self) -> None:
        self.path = os.path.join(tempfile.mkdtemp(prefix="sqlite-kit-"), "sessions.db")

    def make(
        self, *, scheduler: Scheduler | None = None, write_batch_max_delay_ms: int = 200
    ) -> SessionPersistence:
        return SqlitePersistence(
            self.path, scheduler=scheduler, write_batch_max_delay_ms=write_batch_max_delay_ms
        )

    def plant(
        self,
        header: Mapping[str, Any],
        events: Sequence[Mapping[str, Any]],
        *,
        under: str | None = None,
    ) -> None:
        db = open_database(self.path, "wal", 1000).connection
        id = under if under is not None else header["id"]
        optional = ("cwd", "parentSession", "seedLength", "origin", "delegationDepth")
        db.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'planted', 0)",
            (
                id,
                header["version"],
                header["createdAt"],
                *(header.get(k) for k in optional),
                header.get("agentPreset"),
            ),
        )
        for e in events:
            wire = snapshot(e)
            db.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    id,
                    wire["seq"],
                    wire["type"],
                    wire["time"],
                    encode_json(wire["data"]).decode(),
                    encode_json(wire["sourceEventSeqs"]).decode()
                    if "sourceEventSeqs" in wire
                    else None,
                    encode_json(wire["surfaceOp"]).decode() if "surfaceOp" in wire else None,
                ),
            )
        db.close()

    def append_calls(self) -> int:
        if not os.path.exists(self.path):
            return 0
        with sqlite3.connect(self.path) as db:
            (total,) = db.execute("SELECT COALESCE(SUM(revision), 0) FROM sessions").fetchone()
        return int(total)


class PostgresKit:
    name = "postgres"
    keeps_ignorable = header_names_id = deletes = True
    answers_at_once = False

    def __init__(self) -> None:
        self.dsn = fresh_database()

    def make(
        self, *, scheduler: Scheduler | None = None, write_batch_max_delay_ms: int = 200
    ) -> SessionPersistence:
        return PostgresPersistence(
            self.dsn, scheduler=scheduler, write_batch_max_delay_ms=write_batch_max_delay_ms
        )

    def plant(
        self,
        header: Mapping[str, Any],
        events: Sequence[Mapping[str, Any]],
        *,
        under: str | None = None,
    ) -> None:
        id = under if under is not None else header["id"]
        line = encode_json(snapshot({"type": "session", **header})).decode()
        with psycopg.connect(self.dsn, autocommit=True) as db:
            migrate(db)
            db.execute(
                "INSERT INTO agent_session VALUES (%s, %s, %s, %s, 1, gen_random_uuid())",
                (id, line, header["createdAt"], len(events)),
            )
            for e in events:
                wire = snapshot(e)
                db.execute(
                    "INSERT INTO agent_session_event VALUES (%s, %s, 1, %s, %s)",
                    (id, wire["seq"], wire["type"], encode_json(wire).decode()),
                )

    def append_calls(self) -> int:
        with psycopg.connect(self.dsn, autocommit=True) as db:
            migrate(db)
            row = db.execute("SELECT COALESCE(SUM(revision), 0) FROM agent_session").fetchone()
        return int(row[0]) if row else 0


def fresh_database() -> str:
    """The DSN of a new, empty database on the test server (``AGENT_SESSION_PG_DSN``, which
    ``make test`` and ``.ci/run`` provide through ``scripts/with-postgres``). Without it the
    calling test fails: the PostgreSQL tests never skip."""
    server = os.environ.get("AGENT_SESSION_PG_DSN")
    if not server:
        pytest.fail(
            "AGENT_SESSION_PG_DSN is not set: run the tests through scripts/with-postgres "
            "(make test does), or point it at a PostgreSQL server"
        )
    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server, autocommit=True) as db:
        db.execute(f"CREATE DATABASE {name}")
    base, _, _ = server.rpartition("/")  # a postgresql:// URL: the database is its path
    return f"{base}/{name}"


KITS: dict[str, Callable[[], Kit]] = {
    "memory": MemoryKit,
    "jsonl": JsonlKit,
    "sqlite": SqliteKit,
    "postgres": PostgresKit,
}
"""Every backend the contract suite runs against."""
