"""A connection to a store's database for the tables this build keeps beside the logs (the
export cursors, the ADK catalog), which the reference never reads.

Guarantees: statements are written with ``?`` marks whatever the driver; calls from several
threads run one at a time, and a transaction holds the connection until it ends; a
PostgreSQL driver failure is the ``OSError`` the store itself raises (its server named
without a password, :mod:`persistence_postgres.unreachable`); a SQLite commit is durable
when it returns (``synchronous = FULL``).
"""

from __future__ import annotations

import contextlib
import pathlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_session.stores import StoreSpec

__all__ = ["SideDatabase", "side_database"]


class SideDatabase:
    """One connection (autocommit), shared by threads."""

    def __init__(self, db: Any, *, mark: str, begin: str, shown: str | None = None) -> None:
        """``mark``: the driver's placeholder; ``begin``: what starts a write transaction;
        ``shown``: the PostgreSQL server as errors name it (``None`` for SQLite)."""
        self._db = db
        self._mark = mark
        self._begin = begin
        self._shown = shown
        self.on_postgres = shown is not None
        """Whether the database is a PostgreSQL server's (else SQLite's)."""
        self._lock = threading.RLock()

    @classmethod
    def sqlite(cls, db: sqlite3.Connection) -> SideDatabase:
        """A SQLite connection opened with ``isolation_level=None`` and
        ``check_same_thread=False``."""
        db.execute("PRAGMA synchronous = FULL")
        db.execute("PRAGMA busy_timeout = 5000")
        return cls(db, mark="?", begin="BEGIN IMMEDIATE")

    @classmethod
    def postgres(cls, url: str) -> SideDatabase:
        """A new connection to the server ``url`` names.

        Raises:
            OSError: It cannot be reached or refuses us (no password in the message).
        """
        import psycopg

        from agent_session.persistence_postgres.unreachable import CONNECT_TIMEOUT_S, translated
        from agent_session.session.persistence.redaction import mask_store

        shown = mask_store(url)
        with translated(shown):
            db = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        return cls(db, mark="%s", begin="BEGIN", shown=shown)

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        with self._lock:
            if self._shown is None:
                yield
                return
            from agent_session.persistence_postgres.unreachable import translated

            with translated(self._shown):
                yield

    def execute(self, sql: str, values: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; its rows (``[]`` for one that returns none)."""
        with self._guarded():
            cursor = self._db.execute(sql.replace("?", self._mark), tuple(values))
            return list(cursor.fetchall()) if cursor.description is not None else []

    def columns(self, table: str) -> set[str]:
        """The names of ``table``'s columns (none when there is no such table)."""
        if self._shown is None:
            rows = self.execute("SELECT name FROM pragma_table_info(?)", (table,))
        else:
            rows = self.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                "AND table_schema = current_schema()",
                (table,),
            )
        return {str(row[0]) for row in rows}

    def create_table(self, table: str, ddl: str) -> None:
        """Run ``ddl`` (a ``CREATE TABLE IF NOT EXISTS`` of ``table``), taking a table another
        process created at the same moment as created: PostgreSQL answers two such
        statements at once with a unique violation of its catalog."""
        try:
            self.execute(ddl)
        except OSError:
            if not self.columns(table):
                raise

    @contextlib.contextmanager
    def transaction(self) -> Iterator[SideDatabase]:
        """Statements that commit together (or, on an error, not at all)."""
        with self._guarded():
            self._db.execute(self._begin)
            try:
                yield self
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()


def side_database(store: StoreSpec) -> SideDatabase:
    """A connection to the database of the SQLite or PostgreSQL store ``store`` names. A
    SQLite file must exist (``mode=rw``: a missing file is an error, never an empty database
    the store would then refuse as foreign).

    Raises:
        OSError: The database cannot be opened or reached (no password in the message).
    """
    if store.kind == "sqlite":
        uri = pathlib.Path(store.path).resolve().as_uri() + "?mode=rw"
        db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        return SideDatabase.sqlite(db)
    return SideDatabase.postgres(store.path)
