"""``PostgresPersistence``: the persistence service over :class:`PostgresStorage`, with the
reference's repair as its default."""

from __future__ import annotations

from typing import Any

from psycopg_pool import ConnectionPool

from agent_session.persistence_postgres.storage import PostgresStorage
from agent_session.recovery import closers as default_repair
from agent_session.session.persistence.kit import Repair, Scheduler, SessionPersistence

__all__ = ["PostgresPersistence"]


class PostgresPersistence(SessionPersistence):
    """Every session in one PostgreSQL database (``dsn``: a ``postgresql://`` URL, a libpq
    connection string, or a ``psycopg_pool.ConnectionPool`` of yours, whose connections are
    switched to autocommit and ``synchronous_commit = on`` when first used here, and which
    you close), for a fleet of hosts. The guarantees, and where the I/O runs,
    are :class:`persistence_postgres.storage.PostgresStorage`'s; the schema is created or
    upgraded on first use (:mod:`persistence_postgres.schema`). ``pool_size`` bounds the
    connections (and worker threads) appends and reads use, and (not with a pool of yours)
    the event loop's connections that live sessions' checkpoints use; one more holds the
    writer locks. ``transaction_pooler=True`` runs behind a transaction-mode connection pooler
    (PgBouncer): no writer locks (a second writer is refused by the compare-and-set at its
    write, not at its resume; ``recover`` cannot tell a live session from an interrupted
    one), no prepared statements, and the server's own ``synchronous_commit`` (refused
    unless on).
    """

    def __init__(
        self,
        dsn: str | ConnectionPool[Any],
        *,
        write_batch_max_delay_ms: int = 200,
        prepared_session_cache_size: int = 5,
        pool_size: int = 8,
        transaction_pooler: bool = False,
        repair: Repair = default_repair,
        scheduler: Scheduler | None = None,
    ) -> None:
        storage = PostgresStorage(dsn, pool_size=pool_size, transaction_pooler=transaction_pooler)
        super().__init__(
            storage,
            repair=repair,
            write_batch_max_delay_ms=write_batch_max_delay_ms,
            prepared_session_cache_size=prepared_session_cache_size,
            scheduler=scheduler,
        )
        self.postgres = storage
        """The PostgreSQL storage this backend holds."""
