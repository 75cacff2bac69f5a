"""The stack every figure runs on: a session runtime with one backend installed."""

from __future__ import annotations

import os

from agent_session.session import Runtime
from agent_session.session.persistence.service import SessionPersistence
from agent_session.stores import SQLITE_PREFIX, open_store
from bench.postgres import database_for

__all__ = ["open_backend", "stack"]


def open_backend(root: str, compression: str = "none") -> SessionPersistence:
    """The backend of a figure: JSONL logs (``none``/``zstd``), ``sqlite`` (our SQLite
    backend, ``<root>/sessions.db``) or ``postgres`` (a database of the test server)."""
    if compression == "sqlite":
        return open_store(SQLITE_PREFIX + os.path.join(root, "sessions.db"))
    if compression == "postgres":
        return open_store(database_for(root))
    return open_store(root, new_session_compression=compression)


def stack(root: str, compression: str = "none") -> tuple[Runtime, SessionPersistence]:
    runtime = Runtime()
    backend = open_backend(root, compression)
    runtime.install(backend)
    return runtime, backend
