"""``ls`` of a store of 10,000 sessions, JSONL and SQLite: one session written by the real
backend, planted 10,000 times (its files copied, its rows re-keyed), then surveyed as
``agent-session ls`` surveys it (each backend's ``survey``: what ``ls`` reads), in
seconds."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_jsonl.survey import survey as survey_directory
from agent_session.persistence_sqlite import SqlitePersistence
from agent_session.persistence_sqlite.survey import survey as survey_database
from agent_session.session import Runtime
from agent_session.session.persistence.service import SessionPersistence
from bench.workload import run_steps

__all__ = ["ls_10k_sessions", "one_session", "plant_directories", "plant_rows"]


async def one_session(backend: SessionPersistence) -> None:
    """Session ``s0``: one complete turn of four steps of 20 streamed deltas (about 100
    events)."""
    runtime = Runtime()
    runtime.install(backend)
    session = runtime.sessions.create("s0")
    await run_steps(runtime, session, 4, 20)
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    await backend.aclose()


def plant_directories(root: str, count: int) -> None:
    project = os.path.join(root, "_no-cwd")
    with open(os.path.join(project, "s0", "session.jsonl"), "rb") as f:
        first, rest = f.read().split(b"\n", 1)
    for n in range(1, count):
        directory = os.path.join(project, f"s{n}")
        os.mkdir(directory)
        header = first.replace(b'"id":"s0"', b'"id":"s%d"' % n)
        with open(os.path.join(directory, "session.jsonl"), "wb") as f:
            f.write(header + b"\n" + rest)
    shutil.rmtree(os.path.join(project, "s0", "session.lock"), ignore_errors=True)


def plant_rows(path: str, count: int) -> None:
    with sqlite3.connect(path) as db:
        for n in range(1, count):
            db.execute(
                "INSERT INTO sessions SELECT ?, version, created_at, cwd, parent_session, "
                "seed_length, origin, delegation_depth, agent_preset, incarnation, revision "
                "FROM sessions WHERE id = 's0'",
                (f"s{n}",),
            )
            db.execute(
                "INSERT INTO events SELECT ?, seq, type, time, data, source_event_seqs, "
                "surface_op FROM events WHERE session_id = 's0'",
                (f"s{n}",),
            )


async def ls_10k_sessions(root: str, count: int = 10_000) -> tuple[float, float]:
    """(seconds to list ``count`` JSONL sessions, seconds to list them in SQLite)."""
    directory, database = os.path.join(root, "jsonl"), os.path.join(root, "sessions.db")
    await one_session(JsonlPersistence(directory))
    await one_session(SqlitePersistence(database))
    plant_directories(directory, count)
    plant_rows(database, count)
    start = time.perf_counter()
    logs = list(survey_directory(directory))
    jsonl_seconds = time.perf_counter() - start
    start = time.perf_counter()
    rows = survey_database(database)
    sqlite_seconds = time.perf_counter() - start
    assert len(logs) == len(rows) == count
    assert all(s.summary and s.summary.last_bracket == "end" for s in logs)
    assert all(r.last_bracket == "end" and r.events > 90 for r in rows)
    return jsonl_seconds, sqlite_seconds
