"""A writer for the kill matrix; the failpoint comes from the environment. The store is the
JSONL root ``ROOT`` (``none``/``zstd`` logs), with ``sqlite`` the database
``ROOT/sessions.db``, with ``postgres`` a database of the test server named after ``ROOT``.

``python -m tests.kill_child ROOT SEED write``: create session ``k`` and append up to five
batches of random sizes (seeded), printing ``acked <n>`` (events durable so far) after each.
``python -m tests.kill_child ROOT SEED live``: the same batches appended to a live session
``k``, each followed by a flush (so, after the first, a checkpoint of the live path).
``python -m tests.kill_child ROOT SEED repair``: cold-load session ``k`` (which the parent
left interrupted with a torn tail), which repairs it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import sys

import psycopg

from agent_session.persistence_jsonl import JsonlPersistence
from agent_session.persistence_postgres import PostgresPersistence
from agent_session.persistence_sqlite import SqlitePersistence
from agent_session.session import Runtime, Session, SessionEvent
from agent_session.session.persistence.service import SessionPersistence


def open_backend(root: str, compression: str) -> SessionPersistence:
    """The kill matrix's store: JSONL logs of ``compression``, ``sqlite`` or ``postgres``."""
    if compression == "sqlite":
        return SqlitePersistence(os.path.join(root, "sessions.db"))
    if compression == "postgres":
        return PostgresPersistence(database_of(root))
    return JsonlPersistence(root, new_session_compression=compression)


def database_of(root: str) -> str:
    """The test server's database of the run in ``root`` (created on first use)."""
    server = os.environ["AGENT_SESSION_PG_DSN"]
    name = "k_" + hashlib.sha256(root.encode()).hexdigest()[:16]
    with psycopg.connect(server, autocommit=True) as db:
        if db.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            db.execute(f"CREATE DATABASE {name}")
    return f"{server.rpartition('/')[0]}/{name}"


def events(seed: int) -> list[list[object]]:
    """Deterministic batches: turns with chunks, calls and results, cut at random sizes."""
    rng = random.Random(seed)
    session = Session.create("k", clock=lambda: 7)
    for turn in range(1, 4):
        session.append("turn/start", {"turn": turn})
        session.append("step/start", {"turn": turn, "step": 1})
        for i in range(rng.randint(1, 12)):
            session.append(
                "assistant/chunk",
                {
                    "turn": turn,
                    "step": 1,
                    "chunk": {"type": "text-delta", "index": 0, "text": f"t{i} "},
                },
            )
        session.append("step/end", {"turn": turn, "step": 1})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    flat = list(session.events)
    batches: list[list[object]] = []
    while flat and len(batches) < 5:
        size = rng.randint(1, max(1, len(flat) // 2))
        batches.append(list(flat[:size]))
        flat = flat[size:]
    if flat:
        batches.append(list(flat))
    return batches


async def main(root: str, seed: int, action: str, compression: str = "none") -> None:
    backend = open_backend(root, compression)
    if action == "write":
        await backend.create({"version": 0, "id": "k", "createdAt": 1, "delegationDepth": 0})
        acked = 0
        for batch in events(seed):
            await backend.append("k", batch)  # type: ignore[arg-type]
            acked += len(batch)
            print(f"acked {acked}", flush=True)
    elif action == "live":
        runtime = Runtime(clock=lambda: 7)
        runtime.install(backend)
        session = runtime.sessions.create("k", created_at=1)
        acked = 0
        for batch in events(seed):
            for event in batch:
                assert isinstance(event, SessionEvent)
                session.append(event.type, event.data)
            await runtime.sessions.flush(session)
            acked += len(batch)
            print(f"acked {acked}", flush=True)
        await runtime.sessions.dispose(session)
    else:
        await backend.load("k")
        print("repaired", flush=True)
    await backend.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], *sys.argv[4:]))
