"""``SqliteStorage``: every session in one SQLite database in the reference's format
(:mod:`persistence_sqlite.schema`, :mod:`persistence_sqlite.rows`), as a
:class:`session.persistence.storage.Storage`.

Guarantees:

- An append is one ``BEGIN IMMEDIATE`` transaction (the session's row on its first batch,
  every event row, the revision bump) committed with ``synchronous = FULL``: when it returns
  the batch is on stable storage; when it fails nothing of it is stored.
- Inside that transaction the stored log must end exactly where the batch starts (an
  optimistic check of the next seq), so two writers of one session, in any process, can never
  interleave or duplicate rows: the one that is behind gets :class:`SessionCollisionError`.
- A repair (cut a torn tail, append closers) is one transaction that first checks the rows
  are still the ones the repair was computed from.
- Every SQLite call runs on one worker thread per storage, never on the event loop; another
  process's write transaction is waited for at most ``busy_timeout_ms``.

- One writer per session: a writer takes the session's lock
  (:mod:`persistence_sqlite.locks`) before it adopts, repairs, appends to or deletes a stored
  session, and when it materializes a new one; a second writer, in this process or another,
  is refused with :class:`SessionCollisionError` before it changes or decides anything. A
  process that dies releases its locks. Readers take no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from agent_session.persistence_sqlite.locks import WriterLocks
from agent_session.persistence_sqlite.rows import (
    EVENT_COLUMNS,
    HEADER_COLUMNS,
    batch_values,
    event_values,
    header_of,
    header_values,
    read_back,
    render_row,
    rendered_size,
    row_line,
    scan,
)
from agent_session.persistence_sqlite.runs import with_lazy_runs
from agent_session.persistence_sqlite.schema import (
    JOURNAL_MODES,
    JournalMode,
    OpenDatabase,
    open_database,
    open_read_only,
    transaction,
)
from agent_session.persistence_sqlite.tail import read_from_last, read_tail
from agent_session.session import (
    SessionCollisionError,
    SessionEvent,
    SessionHeader,
    SessionPersistenceCorruptionError,
)
from agent_session.session.events.header import header_line
from agent_session.session.persistence.kit import (
    IOThreads,
    RawArtifact,
    SessionSnapshot,
    Storage,
    StoredLog,
    StoredTail,
    check_text_id,
    failpoint,
)

__all__ = ["RowCut", "SqliteStorage"]

T = TypeVar("T")

_INSERT_EVENT = (
    "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_BUMP = "UPDATE sessions SET revision = revision + 1 WHERE id = ?"


@dataclass(frozen=True, slots=True)
class RowCut:
    """Where a torn tail starts, and the revision of the rows it was found in."""

    seq: int
    revision: str


class SqliteStorage(Storage):
    """Sessions as rows of one database file in the reference's format (see the module
    docstring for the guarantees)."""

    name = "session-persistence-sqlite"
    reads_from_last = True

    def stored_line(self, id: str, event: SessionEvent, line: bytes | None = None) -> bytes:
        """The row of ``event`` rendered as :meth:`read_raw` renders it (:func:`row_line`)."""
        return row_line(id, event, line)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        journal_mode: JournalMode | None = "wal",
        busy_timeout_ms: int = 5000,
        read_only: bool = False,
    ) -> None:
        raw = os.fspath(path)
        if not isinstance(raw, str) or not raw:
            raise ValueError("the session database path must be a non-empty string")
        self.path = raw if raw == ":memory:" else os.path.abspath(raw)
        """The absolute database path, or ``":memory:"``."""
        if journal_mode not in (None, *JOURNAL_MODES):
            raise ValueError(
                f'journal_mode must be "wal", "delete", "truncate" or "persist", not '
                f"{journal_mode!r}"
            )
        if type(busy_timeout_ms) is not int or not 0 <= busy_timeout_ms <= 2_147_483_647:
            raise TypeError("busy_timeout_ms must be an integer between 0 and 2147483647")
        self.journal_mode = journal_mode
        self.busy_timeout_ms = busy_timeout_ms
        self.read_only = read_only
        """Opened for reading only (:func:`persistence_sqlite.schema.open_read_only`): the
        file must exist, nothing is created, written or checkpointed, a writer's lock does
        not block it, and every write is refused."""
        self._db: OpenDatabase | None = None
        self._worker = IOThreads(1, "session-sqlite")
        self._locks = None if self.path == ":memory:" else WriterLocks(self.path)

    # --- the worker -------------------------------------------------------------------------

    async def run_read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run a read-only ``work(connection)`` as this storage runs its own reads (the
        front door's aggregate queries)."""
        return await self._run(work)

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` with the connection on the worker thread (opening it on first use)."""
        return await self._worker.submit(self._call, work)

    def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with _translated(self.path, self.busy_timeout_ms, self.read_only):
            if self._db is None:
                if self.read_only:
                    self._db = open_read_only(self.path, self.busy_timeout_ms)
                else:
                    self._db = open_database(self.path, self.journal_mode, self.busy_timeout_ms)
                self._db.connection.text_factory = bytes
            return work(self._db.connection)

    @property
    def identity(self) -> str:
        """The opened store's identity (opened by the first call)."""
        assert self._db is not None
        return self._db.identity

    def _revision(self, incarnation: bytes, revision: int) -> str:
        return f"{self.identity}:incarnation:{incarnation.decode()}:revision:{revision}"

    # --- reads ------------------------------------------------------------------------------

    def check_id(self, id: str) -> None:
        """Any non-empty string a SQLite ``TEXT`` can hold exactly (valid UTF-8, no NUL)."""
        check_text_id(id, "a SQLite TEXT key")

    def stored_now(self, id: str) -> bool | None:
        """``None``: asking the database would block the event loop. (A log this backend
        wrote or read is known to its service; another process's is refused at the first
        flush, as the reference refuses every one.)"""
        return None

    async def load(self, id: str) -> StoredLog | None:
        return await self._run(lambda db: self._load(db, id))

    @staticmethod
    def _read(db: sqlite3.Connection, id: str) -> tuple[Any, list[Any]] | None:
        """The session's row (:data:`HEADER_COLUMNS`, incarnation, revision) and its event
        rows in seq order, from one snapshot; ``None`` when it has no row."""
        with transaction(db, "DEFERRED"):
            row = db.execute(
                f"SELECT {HEADER_COLUMNS}, incarnation, revision FROM sessions WHERE id = ?",
                (id,),
            ).fetchone()
            if row is None:
                return None
            rows = db.execute(
                f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq", (id,)
            ).fetchall()
        return row, rows

    def _load(self, db: sqlite3.Connection, id: str) -> StoredLog | None:
        found = self._read(db, id)
        if found is None:
            return None
        row, rows = found
        header = header_of(row, f'database "{self.path}"')
        revision = self._revision(row[9], row[10])
        try:
            events, torn = scan(rows)
        except SessionPersistenceCorruptionError as e:
            raise SessionPersistenceCorruptionError(
                f'{e} (session "{id}", database "{self.path}")'
            ) from None
        cut = None if torn is None else RowCut(torn, revision)
        # the size of the JSONL text the rows stand for (what read_raw returns)
        size = len(header_line(header)) + 1 + rendered_size(rows)
        return StoredLog(header, with_lazy_runs(events), revision, cut, size)

    async def read_tail(self, id: str, count: int) -> StoredTail | None:
        where = f'database "{self.path}"'
        tail = await self._run(lambda db: read_tail(db, id, count, where))
        return tail if tail is not None else await super().read_tail(id, count)

    async def read_from_last(self, id: str, type: str) -> StoredTail | None:
        where = f'database "{self.path}"'
        return await self._run(lambda db: read_from_last(db, id, type, where))

    async def revision(self, id: str) -> str | None:
        row = await self._run(
            lambda db: db.execute(
                "SELECT incarnation, revision FROM sessions WHERE id = ?", (id,)
            ).fetchone()
        )
        return None if row is None else self._revision(row[0], row[1])

    def as_stored(self, events: Sequence[SessionEvent]) -> Sequence[SessionEvent]:
        """Through the row mapping and back: the columns' key order."""
        return [SessionEvent.from_json(read_back(event_values("", e))) for e in events]

    async def list_snapshots(self) -> list[SessionSnapshot]:
        rows = await self._run(
            lambda db: db.execute(
                f"SELECT {HEADER_COLUMNS}, incarnation, revision FROM sessions ORDER BY id"
            ).fetchall()
        )
        snapshots = []
        for row in rows:
            with contextlib.suppress(SessionPersistenceCorruptionError):
                header = header_of(row, f'database "{self.path}"')
                snapshots.append(SessionSnapshot(header, self._revision(row[9], row[10])))
        return snapshots

    async def read_raw(self, id: str) -> RawArtifact | None:
        return await self._run(lambda db: self._raw(db, id))

    def _raw(self, db: sqlite3.Connection, id: str) -> RawArtifact | None:
        """The session as the JSONL text its rows stand for, every row verbatim."""
        found = self._read(db, id)
        if found is None:
            return None
        row, rows = found
        header = header_of(row, f'database "{self.path}"')
        lines = [header_line(header), *(render_row(r) for r in rows)]
        return RawArtifact(header, "session.jsonl", b"".join(line + b"\n" for line in lines))

    # --- writer locks (appends are also checked optimistically, by the seq's key) ----------

    async def acquire(self, id: str) -> bool:
        """Take the session's writer lock (stored or not: a new session is locked when it
        materializes)."""
        if self._locks is None or self._locks.holds(id):
            return False
        if self.read_only:
            raise OSError(errno.EROFS, f'session database "{self.path}" is opened read-only')
        locks = self._locks
        return await self._run(lambda _: locks.take(id))  # (the database, and its directory, first)

    async def writer_elsewhere(self, id: str) -> bool:
        """Whether another process or storage holds ``id``'s writer lock (no lock taken)."""
        if self._locks is None:
            return False
        return await self._worker.submit(self._locks.held_elsewhere, id)

    async def release(self, id: str) -> None:
        if self._locks is not None and self._locks.holds(id):
            await self._worker.submit(self._locks.give, id)

    # --- writes -----------------------------------------------------------------------------

    async def append(
        self, header: SessionHeader, events: Sequence[SessionEvent], *, materialized: bool
    ) -> None:
        rows = batch_values(header.id, events)  # refuse before writing
        if not materialized:
            await self.acquire(header.id)  # the writer of a new session holds it from now
        await self._run(lambda db: self._append(db, header, rows, materialized))

    def _append(
        self,
        db: sqlite3.Connection,
        header: SessionHeader,
        rows: list[tuple[Any, ...]],
        materialized: bool,
    ) -> None:
        id = header.id
        with transaction(db, "IMMEDIATE"):
            if materialized:
                _expect_next(db, id, rows[0][1] if rows else None)
            else:
                _materialize(db, header)
            db.executemany(_INSERT_EVENT, rows)
            db.execute(_BUMP, (id,))
            failpoint("sqlite:append:before-commit")
        failpoint("sqlite:append:after-commit")

    def start_append(
        self, header: SessionHeader, events: Sequence[SessionEvent]
    ) -> asyncio.Future[None]:
        """The append's transaction, handed straight to the database's worker (no task)."""
        rows = batch_values(header.id, events)  # refuse before writing
        return self._worker.submit(self._call, lambda db: self._append(db, header, rows, True))

    async def commit_repair(
        self, header: SessionHeader, cut_at: object | None, closers: Sequence[SessionEvent]
    ) -> None:
        rows = [event_values(header.id, event) for event in closers]
        await self._run(lambda db: self._repair(db, header.id, cut_at, rows))

    def _repair(
        self, db: sqlite3.Connection, id: str, cut_at: object | None, rows: list[tuple[Any, ...]]
    ) -> None:
        with transaction(db, "IMMEDIATE"):
            if isinstance(cut_at, RowCut):
                found = db.execute(
                    "SELECT incarnation, revision FROM sessions WHERE id = ?", (id,)
                ).fetchone()
                if found is None or self._revision(found[0], found[1]) != cut_at.revision:
                    raise SessionCollisionError(
                        f'session "{id}" was changed by another writer since it was read; '
                        "load it again"
                    )
                db.execute("DELETE FROM events WHERE session_id = ? AND seq >= ?", (id, cut_at.seq))
            elif rows:
                _expect_next(db, id, rows[0][1])
            db.executemany(_INSERT_EVENT, rows)
            if cut_at is not None or rows:
                db.execute(_BUMP, (id,))
            failpoint("sqlite:repair:before-commit")
        failpoint("sqlite:repair:after-commit")

    async def delete(self, id: str) -> bool:
        """Take the session's writer lock (refused while another writer holds it), then
        delete its row and (by ``ON DELETE CASCADE``) its events in one transaction, their
        bytes overwritten with zeros (``secure_delete``), and truncate the WAL; ``False``
        when it is not stored."""

        def delete(db: sqlite3.Connection) -> bool:
            with transaction(db, "IMMEDIATE"):
                deleted = db.execute("DELETE FROM sessions WHERE id = ?", (id,)).rowcount > 0
            # Its rows were zeroed (secure_delete); the WAL still holds their earlier pages
            # until a checkpoint copies the zeroed ones back and truncates it (a reader in
            # another process may defer that to the next checkpoint).
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return deleted

        taken = await self.acquire(id)
        try:
            return await self._run(delete)
        finally:
            if taken:
                await self.release(id)

    async def close(self) -> None:
        def close(db: sqlite3.Connection) -> None:
            db.close()

        try:
            if self._db is not None:
                await self._run(close)
            if self._locks is not None:
                await self._worker.submit(self._locks.close)
        finally:
            self._db = None
            self._worker.shutdown()


def _materialize(db: sqlite3.Connection, header: SessionHeader) -> None:
    """Insert the session's row (revision 0, a new incarnation), refusing an id that already
    has a row, or event rows left without one."""
    id = header.id
    if db.execute("SELECT 1 FROM sessions WHERE id = ?", (id,)).fetchone() is not None:
        raise SessionCollisionError(
            f'refusing to materialize "{id}": a log already exists in the database '
            "(load/resume it instead)"
        )
    if db.execute("SELECT 1 FROM events WHERE session_id = ? LIMIT 1", (id,)).fetchone():
        raise SessionCollisionError(
            f'refusing to materialize "{id}": the database holds event rows of that id '
            "without a sessions row"
        )
    db.execute(
        f"INSERT INTO sessions ({HEADER_COLUMNS}, incarnation, revision) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
        (*header_values(header), str(uuid.uuid4())),
    )


def _expect_next(db: sqlite3.Connection, id: str, first: int | None) -> None:
    """Refuse a batch that does not start exactly where the stored log ends."""
    row = db.execute(
        "SELECT (SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE session_id = ?) "
        "FROM sessions WHERE id = ?",
        (id, id),
    ).fetchone()
    if row is None:
        raise SessionCollisionError(f'session "{id}" was deleted by another writer')
    if first is not None and row[0] != first:
        raise SessionCollisionError(
            f'session "{id}" was changed by another writer: the stored log continues at seq '
            f"{row[0]}, this batch starts at seq {first}; load or resume it again"
        )


@contextlib.contextmanager
def _translated(path: str, busy_timeout_ms: int, read_only: bool = False) -> Iterator[None]:
    """SQLite's errors as this library's: a busy database past the timeout as a collision
    (for a reader, an ``OSError`` saying it is busy), a duplicate key as a collision, a
    damaged file as corruption, I/O and a full disk as ``OSError``."""
    try:
        yield
    except sqlite3.IntegrityError as e:
        raise SessionCollisionError(
            f'session database "{path}" refused a write another writer made first: {e}'
        ) from e
    except sqlite3.OperationalError as e:
        code = getattr(e, "sqlite_errorcode", 0) & 0xFF
        if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) and read_only:
            raise OSError(
                errno.EBUSY,
                f'session database "{path}" is busy: another process held it for '
                f"{busy_timeout_ms} ms: {e}",
            ) from e
        if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            raise SessionCollisionError(
                f'session database "{path}" stayed locked by another writer for '
                f"{busy_timeout_ms} ms: {e}"
            ) from e
        number = errno.ENOSPC if code == sqlite3.SQLITE_FULL else errno.EIO
        raise OSError(number, f"{e} (session database {path})") from e
    except sqlite3.DatabaseError as e:
        raise SessionPersistenceCorruptionError(f'session database "{path}" is damaged: {e}') from e
