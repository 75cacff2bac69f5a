"""The PostgreSQL figures, against the server of ``AGENT_SESSION_PG_DSN`` (``make bench``
starts a throwaway one through ``scripts/with-postgres``): each measurement gets a database
of its own, named after its temporary directory."""

from __future__ import annotations

import hashlib
import os
import statistics
import time

import psycopg

from agent_session.persistence_jsonl.encoder import encode_batch
from agent_session.session import Session
from bench.workload import append_step

__all__ = ["DSN_ENV", "bare_insert_commit", "bare_insert_commit_async", "database_for"]

DSN_ENV = "AGENT_SESSION_PG_DSN"


def database_for(root: str) -> str:
    """The URL of the database of the measurement in ``root`` (created on first use)."""
    server = os.environ[DSN_ENV]
    name = "bench_" + hashlib.sha256(root.encode()).hexdigest()[:16]
    with psycopg.connect(server, autocommit=True) as db:
        if db.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            db.execute(f"CREATE DATABASE {name}")
    return f"{server.rpartition('/')[0]}/{name}"


def _step_text(chunks: int) -> str:
    """One step's JSONL text (what the baselines insert as one row)."""
    session = Session.create("bare")
    session.append("turn/start", {"turn": 1})
    append_step(session, 1, chunks)
    return encode_batch(session.events[1:], pack=True).decode()


_BARE_TABLE = "CREATE TABLE IF NOT EXISTS bare (seq bigint PRIMARY KEY, line text)"
_BARE_INSERT = "INSERT INTO bare VALUES (%s, %s)"
_DURABLE = "-c synchronous_commit=on"


def bare_insert_commit(root: str, steps: int = 200, chunks: int = 20) -> float:
    """Median ms of the baseline: one step's JSONL text inserted as one row and committed
    (autocommit, ``synchronous_commit = on``), with bare psycopg on one connection, blocking
    (the thread sleeps in the socket read: no event loop to wake)."""
    text = _step_text(chunks)
    with psycopg.connect(database_for(root), autocommit=True, options=_DURABLE) as db:
        db.execute(_BARE_TABLE)
        times = []
        for step in range(steps):
            start = time.perf_counter()
            db.execute(_BARE_INSERT, (step, text))
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def bare_insert_commit_async(root: str, steps: int = 200, chunks: int = 20) -> float:
    """:func:`bare_insert_commit` with psycopg's ``AsyncConnection`` on the running event
    loop: what an asyncio server's own insert costs, the loop's wake-up included."""
    text = _step_text(chunks)
    async with await psycopg.AsyncConnection.connect(
        database_for(root), autocommit=True, options=_DURABLE
    ) as db:
        await db.execute(_BARE_TABLE)
        times = []
        for step in range(steps):
            start = time.perf_counter()
            await db.execute(_BARE_INSERT, (step, text))
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000
