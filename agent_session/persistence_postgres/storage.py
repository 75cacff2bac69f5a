"""``PostgresStorage``: sessions as rows of a PostgreSQL database
(:mod:`persistence_postgres.schema`), as a :class:`session.persistence.storage.Storage`.

Guarantees:

- An append is one statement, so one round trip and one transaction: the session row's
  ``next_seq`` moves from the value this writer expects to the batch's end and the batch's rows
  are inserted, or nothing happens (another writer, on any host, moved the log: the batch is
  refused with :class:`SessionCollisionError`; nothing is spliced or duplicated). Every
  connection runs with ``synchronous_commit = on``, and a server with ``fsync = off`` is
  refused: when an append returns, its commit is flushed on the server.
- A commit whose acknowledgement is lost (the connection drops during it) is reconciled on a
  new connection by reading ``next_seq`` and comparing the stored lines: reported done when
  the batch is there exactly, refused as an I/O error when it is not (the batch is kept and
  retried; the check of ``next_seq`` makes a retry safe), never assumed either way. When
  even that connection cannot be opened (the server is restarting), the retry settles it
  first: the part of its batch already stored is not sent again, and a writer's own commit
  is never taken for another writer's.
- A repair is one transaction that locks the session row and re-checks its revision.
- A live session's writer holds a session-level advisory lock on a dedicated connection
  (:class:`persistence_postgres.locks.AdvisoryLocks`); the server frees it when the holder
  dies.
- No database call blocks the event loop. A live session's checkpoint is a prepared
  statement sent on a connection of the loop the moment the flush asks, its answer read by a
  callback of the loop (:mod:`persistence_postgres.loop_connections`: no thread hop, no
  task); every other call runs on a worker thread with a pooled connection. Either way the
  commits of different sessions overlap and the server groups them.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from agent_session.persistence_postgres.appends import (
    append_batch,
    moved,
    send_on_loop,
    settle_lost,
    unsent_part,
)
from agent_session.persistence_postgres.lines import Line, batch_lines
from agent_session.persistence_postgres.locks import AdvisoryLocks, Connection, writer_name
from agent_session.persistence_postgres.loop_connections import LoopConnections
from agent_session.persistence_postgres.reads import (
    RowCut,
    read_from_last,
    read_log,
    read_raw,
    read_tail,
    revision_of,
    snapshots_of,
)
from agent_session.persistence_postgres.schema import check_durability, migrate
from agent_session.persistence_postgres.statements import ROWS_PER_STATEMENT, protocol_append
from agent_session.persistence_postgres.unreachable import (
    CONNECT_TIMEOUT_S,
    pooled,
    translated,
    unreachable,
)
from agent_session.session import SessionCollisionError, SessionEvent, SessionHeader
from agent_session.session.persistence.kit import (
    IOThreads,
    RawArtifact,
    SessionSnapshot,
    Storage,
    StoredLog,
    StoredTail,
    check_text_id,
    failpoint,
    install_log_filter,
    mask_store,
    remember_store,
    scrub,
)

__all__ = ["PostgresStorage", "RowCut"]

T = TypeVar("T")


class PostgresStorage(Storage):
    """Sessions as rows of one PostgreSQL database (see the module docstring)."""

    name = "session-persistence-postgres"
    writes_lines = True

    def __init__(
        self,
        dsn: str | ConnectionPool[Any],
        *,
        pool_size: int = 8,
        transaction_pooler: bool = False,
    ) -> None:
        if type(pool_size) is not int or pool_size < 1:
            raise TypeError("pool_size must be a positive integer")
        given = dsn if isinstance(dsn, ConnectionPool) else None
        conninfo = given.conninfo if given is not None else dsn
        if not isinstance(conninfo, str) or not conninfo:
            raise ValueError("the PostgreSQL connection string must be a non-empty string")
        remember_store(conninfo)  # no message or log record of this process shows it
        install_log_filter("psycopg")
        install_log_filter("psycopg.pool")
        self.shown = mask_store(conninfo)
        """The connection string without a password, for messages."""
        try:
            psycopg.conninfo.conninfo_to_dict(conninfo)
        except psycopg.ProgrammingError as e:
            raise ValueError(
                f"invalid PostgreSQL connection string {self.shown}: "
                f"{' '.join(scrub(str(e), conninfo).split())}"
            ) from None
        extra = given.kwargs if given is not None and isinstance(given.kwargs, dict) else {}
        self.dsn = conninfo
        """The connection string (a pool's, when a pool was given)."""
        self.transaction_pooler = transaction_pooler
        self.pack = True
        """Behind a transaction-mode pooler (PgBouncer): no session-level advisory locks, no
        prepared statements, no startup options; writers are kept apart by the
        compare-and-set alone, and commits are as durable as the server's own settings make
        them (checked on every connection)."""
        self.settings: dict[str, Any] = {
            **extra,
            "autocommit": True,
            **({} if transaction_pooler else {"options": "-c synchronous_commit=on"}),
            **({"prepare_threshold": None} if transaction_pooler else {}),
            "application_name": writer_name(),
            "connect_timeout": CONNECT_TIMEOUT_S,
            # A dead peer (a host gone, a cut network) is noticed within about 30 s, on the
            # lock connection too, which is idle for as long as its sessions are live.
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 5,
            "keepalives_count": 3,
        }
        """The settings of every connection this storage opens itself."""
        self._adopted: weakref.WeakSet[Connection] | None = None
        if given is not None:  # the user's pool: its connections are adopted on first use
            self._pool: ConnectionPool[Any] = given
            self._adopted = weakref.WeakSet()
            pool_size = given.max_size
        else:
            self._pool = ConnectionPool(
                conninfo,
                min_size=1,
                max_size=pool_size,
                kwargs=self.settings,
                timeout=CONNECT_TIMEOUT_S,
                reconnect_timeout=CONNECT_TIMEOUT_S,
                # A connection a restart ended is replaced when taken, not failed on: one
                # round trip on the worker path (a live checkpoint runs on the loop's).
                check=ConnectionPool.check_connection,
                configure=check_durability,
                open=False,
                name="agent-session",
            )
        self._opened = False
        self._opening = threading.Lock()
        self._worker = IOThreads(pool_size, "session-postgres")
        on_loop = 0 if given is not None or transaction_pooler else pool_size
        self._on_loop = LoopConnections(conninfo, self.settings, on_loop)
        """Checkpoints' connections on the event loop (none with a pool of yours)."""
        self._unsettled: set[str] = set()
        """Sessions whose last failed append may or may not be stored."""
        self.locks = AdvisoryLocks(self.connect, enabled=not transaction_pooler)
        """The writer locks of live sessions (one dedicated connection)."""

    # --- the workers ------------------------------------------------------------------------

    async def run_read(self, work: Callable[[Connection], T]) -> T:
        """Run a read-only ``work(connection)`` as this storage runs its own reads (the
        front door's aggregate queries)."""
        return await self._run(work)

    async def _run(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` with a pooled connection on a worker thread."""
        return await self._worker.submit(self._call, work)

    def connect(self) -> Connection:
        """A new connection of this storage's own (its settings, durability checked)."""
        connection = psycopg.connect(self.dsn, **self.settings)
        try:
            check_durability(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _call(self, work: Callable[[Connection], T]) -> T:
        with translated(self.shown):
            if not self._opened:
                with self._opening:  # the first calls of several workers open it once
                    if not self._opened:
                        self._open()
            with pooled(self._pool, self.connect) as connection:
                self._adopt(connection)
                return work(connection)

    def _open(self) -> None:
        """Check the server once, on a connection of our own (a refused password, an unknown
        database or a stopped server fails here at once, with the server's reason, instead
        of the pool retrying it in the background), bring the schema up to date, then open
        the pool."""
        if self._adopted is None:
            with self.connect() as connection:
                migrate(connection)
            self._pool.open(wait=False)
        else:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
            with self._pool.connection(timeout=CONNECT_TIMEOUT_S) as connection:
                self._adopt(connection)
                migrate(connection)
        self._opened = True

    def _adopt(self, connection: Connection) -> None:
        """Make a connection of a pool the user passed run as this storage's own do:
        autocommit, ``synchronous_commit = on``, durability checked (once per connection)."""
        if self._adopted is None or connection in self._adopted:
            return
        connection.autocommit = True
        connection.execute("SET synchronous_commit = on")
        check_durability(connection)
        self._adopted.add(connection)

    # --- reads ------------------------------------------------------------------------------

    def check_id(self, id: str) -> None:
        """Any non-empty string PostgreSQL ``text`` can hold (valid UTF-8, no NUL)."""
        check_text_id(id, "PostgreSQL text")

    async def load(self, id: str) -> StoredLog | None:
        return await self._run(lambda db: read_log(db, id))

    async def revision(self, id: str) -> str | None:
        row = await self._run(
            lambda db: db.execute(
                "SELECT incarnation, revision FROM agent_session WHERE id = %s", (id,)
            ).fetchone()
        )
        return None if row is None else revision_of(row[0], row[1])

    async def list_snapshots(self) -> list[SessionSnapshot]:
        rows = await self._run(
            lambda db: db.execute(
                "SELECT id, header, incarnation, revision FROM agent_session ORDER BY id"
            ).fetchall()
        )
        return snapshots_of(rows)

    async def read_raw(self, id: str) -> RawArtifact | None:
        return await self._run(lambda db: read_raw(db, id))

    async def read_tail(self, id: str, count: int) -> StoredTail | None:
        tail = await self._run(lambda db: read_tail(db, id, count))
        return tail if tail is not None else await super().read_tail(id, count)

    reads_from_last = True

    async def read_from_last(self, id: str, type: str) -> StoredTail | None:
        return await self._run(lambda db: read_from_last(db, id, type))

    # --- writer locks -----------------------------------------------------------------------

    async def acquire(self, id: str) -> bool:
        if self.locks.holds(id):
            return False
        return await self._worker.submit(self._locking, self.locks.take, id)

    def _locking(self, step: Callable[[str], T], id: str) -> T:
        """A step of :attr:`locks`, its driver errors as ``OSError``."""
        with translated(self.shown):
            return step(id)

    async def writer_elsewhere(self, id: str) -> bool:
        if self.locks.holds(id):
            return False
        return await self._run(lambda db: self.locks.owner(db, id) is not None)

    async def release(self, id: str) -> None:
        if self.locks.holds(id):
            await self._worker.submit(self._locking, self.locks.give, id)

    # --- writes -----------------------------------------------------------------------------

    async def append(
        self, header: SessionHeader, events: Sequence[SessionEvent], *, materialized: bool
    ) -> None:
        lines = batch_lines(events, self.pack)
        if not materialized:
            await self.acquire(header.id)  # the writer of a new session holds it from now
        await self._run(lambda db: self._append(db, header, lines, materialized))

    def _append(
        self, db: Connection, header: SessionHeader, lines: list[Line], materialized: bool
    ) -> None:
        """:func:`append_batch`, after settling a failed append of the session whose outcome
        is still unknown (its batch leads this one: only what it did not store is sent), and
        with the session's writer lock still held (taken again if its connection ended)."""
        if self.locks.holds(header.id):
            self.locks.ensure(header.id)
        if header.id in self._unsettled:
            unsent = unsent_part(db, header.id, lines)
            if unsent is not None:
                lines, materialized = unsent
            self._unsettled.discard(header.id)
            if not lines:
                return
        append_batch(db, header, lines, materialized, self._settle)

    async def append_batches(
        self, header: SessionHeader, batches: Sequence[Sequence[SessionEvent]]
    ) -> None:
        """A new session's ``batches`` (each packed as an append of it packs), in one
        transaction: the session is stored whole or not at all."""
        lines = [line for batch in batches for line in batch_lines(batch, self.pack)]
        await self._run(lambda db: append_batch(db, header, lines, False, self._settle))

    def start_append(
        self, header: SessionHeader, events: Sequence[SessionEvent]
    ) -> asyncio.Future[None]:
        """The append's statement sent now on an idle connection of the event loop (no task),
        or by a task once one is ready; on a worker thread instead for a batch of several
        statements, before the schema is known to be in place, with a pool of yours, or on a
        second event loop."""
        lines = batch_lines(events, self.pack)
        if (
            self._opened
            and len(lines) <= ROWS_PER_STATEMENT
            and self._on_loop.usable()
            and header.id not in self._unsettled
            and self.locks.intact()
        ):
            statement = protocol_append(header.id, lines)
            link = self._on_loop.ready_now(statement[0])
            if link is not None:
                return send_on_loop(self._on_loop, link, header.id, lines, statement, self._lost)
            return asyncio.get_running_loop().create_task(
                self._append_on_loop(header.id, lines, statement)
            )
        return self._worker.submit(self._call, lambda db: self._append(db, header, lines, True))

    async def _append_on_loop(
        self, id: str, lines: list[Line], statement: tuple[bytes, list[bytes]]
    ) -> None:
        try:
            link = await self._on_loop.ready(statement[0])
        except psycopg.OperationalError as e:  # nothing of the batch was sent
            raise unreachable(self.shown, e, f'the batch of "{id}" is not stored') from None
        await send_on_loop(self._on_loop, link, id, lines, statement, self._lost)

    async def _lost(self, id: str, lines: list[Line], error: Exception) -> None:
        """:meth:`_settle` of a statement of the loop's connections, on a worker thread."""
        with translated(self.shown):
            await self._worker.submit(self._settle, id, lines, error)

    def _settle(self, id: str, lines: list[Line], error: Exception) -> None:
        """Whether the batch whose connection failed is stored, asked on a new connection;
        when that fails too, the outcome stays unknown until the session's next append
        settles it (:meth:`_append`)."""
        try:
            with psycopg.connect(self.dsn, **self.settings) as db:
                settle_lost(db, id, lines, error)
        except psycopg.Error:
            self._unsettled.add(id)
            raise

    async def commit_repair(
        self, header: SessionHeader, cut_at: object | None, closers: Sequence[SessionEvent]
    ) -> None:
        lines = batch_lines(closers, self.pack)
        await self._run(lambda db: self._repair(db, header.id, cut_at, lines))

    def _repair(self, db: Connection, id: str, cut_at: object | None, lines: list[Line]) -> None:
        with db.transaction():
            found = db.execute(
                "SELECT incarnation, revision, next_seq FROM agent_session WHERE id = %s "
                "FOR UPDATE",
                (id,),
            ).fetchone()
            if found is None:
                raise SessionCollisionError(f'session "{id}" was deleted by another writer')
            if isinstance(cut_at, RowCut):
                if revision_of(found[0], found[1]) != cut_at.revision:
                    raise moved(id, True)
                db.execute(
                    "DELETE FROM agent_session_event WHERE session_id = %s AND seq >= %s",
                    (id, cut_at.seq),
                )
                end = cut_at.seq
            else:
                end = found[2]
            if lines and lines[0].seq != end:
                raise moved(id, True)
            for line in lines:
                db.execute(
                    "INSERT INTO agent_session_event (session_id, seq, n, type, line) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    (id, line.seq, line.n, line.type, line.text),
                )
            if lines:
                end = lines[-1].seq + lines[-1].n
            db.execute(
                "UPDATE agent_session SET next_seq = %s, revision = revision + 1, "
                "updated_at = now() WHERE id = %s",
                (end, id),
            )
            failpoint("postgres:repair:before-commit")
        failpoint("postgres:repair:after-commit")

    async def delete(self, id: str) -> bool:
        """Take the session's writer lock (refused while a writer anywhere holds it), then
        delete its row and its lines in one transaction (the row first: an append waiting on
        it then finds it gone and inserts nothing)."""
        held = self.locks.holds(id)
        await self.acquire(id)
        try:
            deleted = await self._run(lambda db: _delete(db, id))
        finally:
            if not held:
                await self.release(id)
        return deleted > 0

    async def close(self) -> None:
        try:
            await self._on_loop.close()
            await self._worker.submit(self.locks.close)
            if self._adopted is None:  # a pool the user passed stays theirs to close
                await self._worker.submit(self._pool.close)
        finally:
            self._worker.shutdown()


def _delete(db: Connection, id: str) -> int:
    with db.transaction():
        deleted = db.execute("DELETE FROM agent_session WHERE id = %s", (id,)).rowcount
        db.execute("DELETE FROM agent_session_event WHERE session_id = %s", (id,))
    return deleted
