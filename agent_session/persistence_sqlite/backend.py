"""``SqlitePersistence``: the persistence service over :class:`SqliteStorage` (the service
holding a SQLite storage), with the reference's repair as its default."""

from __future__ import annotations

import os

from agent_session.persistence_sqlite.schema import JournalMode
from agent_session.persistence_sqlite.storage import SqliteStorage
from agent_session.recovery import closers as default_repair
from agent_session.session.persistence.kit import Repair, Scheduler, SessionPersistence

__all__ = ["SqlitePersistence"]


class SqlitePersistence(SessionPersistence):
    """Every session in one SQLite database file (``path``, or ``":memory:"``) in the
    reference's format: a database either side writes loads on the other. The guarantees,
    and where the I/O runs, are :class:`persistence_sqlite.storage.SqliteStorage`'s; this class
    only builds it and hands it to the service.

    ``journal_mode`` is the reference's (``wal`` by default; ``None`` keeps the mode an
    existing database has); ``busy_timeout_ms`` is how long
    a write waits for another process's write transaction before failing with
    :class:`session.SessionCollisionError`. ``read_only`` opens an existing database for
    reading only (operator tools that inspect: nothing is created, written or checkpointed;
    writes are refused).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        journal_mode: JournalMode | None = "wal",
        write_batch_max_delay_ms: int = 200,
        prepared_session_cache_size: int = 5,
        busy_timeout_ms: int = 5000,
        repair: Repair = default_repair,
        scheduler: Scheduler | None = None,
        read_only: bool = False,
    ) -> None:
        storage = SqliteStorage(
            path, journal_mode=journal_mode, busy_timeout_ms=busy_timeout_ms, read_only=read_only
        )
        super().__init__(
            storage,
            repair=repair,
            write_batch_max_delay_ms=write_batch_max_delay_ms,
            prepared_session_cache_size=prepared_session_cache_size,
            scheduler=scheduler,
        )
        self.sqlite = storage
        """The SQLite storage this backend holds."""

    @property
    def path(self) -> str:
        """The absolute database path, or ``":memory:"``."""
        return self.sqlite.path
