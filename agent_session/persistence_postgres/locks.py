"""Writer exclusion across hosts: a session-level advisory lock per live session, held on one
dedicated connection while this process writes the session.

A second writer anywhere is refused with :class:`SessionCollisionError` naming the owner (its
``application_name``: host and pid, and its server pid). The server frees the locks of a
connection that closes, so a holder that dies gives them back. The lock gives a clear error
and liveness; what keeps the log correct is the check of ``next_seq`` in every append.

A writer killed on this host holds its lock until the server notices that its connection
closed (a moment later): a new writer that finds the lock held by a process of this host
that no longer exists waits for the server to end that connection (up to
:data:`DEAD_OWNER_WAIT_S`) instead of being refused.

The server also frees them when it ends the connection (a restart, a network cut). So every
write that relies on a lock asks first whether its connection is still there
(:meth:`AdvisoryLocks.intact`, :meth:`AdvisoryLocks.ensure`): when it is gone the lock is
taken again on a new connection before the write, and when another writer took it in
between, the write is refused (now and on every later try), never made without it. The lock
connection runs with ``idle_session_timeout = 0`` (it is idle while its sessions are) and TCP
keepalives.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Final

import psycopg

from agent_session.session import SessionCollisionError

__all__ = ["DEAD_OWNER_WAIT_S", "HELD", "KEY", "AdvisoryLocks", "Connection", "writer_name"]

Connection = psycopg.Connection[tuple[Any, ...]]
"""A synchronous connection, as this backend uses them."""

KEY: Final = "hashtextextended('agent_session:' || %s, 0)"
"""The advisory lock key of the session id in ``%s`` (one bigint: two oids in ``pg_locks``)."""
HELD: Final = """l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid = ((key.k >> 32) & 4294967295)::oid
  AND l.objid = (key.k & 4294967295)::oid"""
"""The ``pg_locks`` row ``l`` is the advisory lock of key ``key.k`` in this database (an
advisory lock's key is per database: the same id in another database is another lock)."""
_OWNER: Final = f"""
SELECT a.application_name, a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid,
  (SELECT {KEY} AS k) AS key
WHERE {HELD} AND l.pid <> pg_backend_pid()
"""
DEAD_OWNER_WAIT_S: Final = 5.0
"""How long a writer waits for the server to end the connection of a lock holder that died on
this host before it is refused."""
_NAME: Final = re.compile(r"agent-session host=(?P<host>\S+) pid=(?P<pid>\d+)")


def writer_name() -> str:
    """The ``application_name`` of this process's connections: what a refused writer is
    told about the owner, and how a writer of this host knows the owner died."""
    return f"agent-session host={socket.gethostname()} pid={os.getpid()}"[:63]


def _dead_here(name: str | None) -> bool:
    """Whether ``name`` (an owner's ``application_name``) is a process of this host that no
    longer exists."""
    found = _NAME.fullmatch(name or "")
    if found is None or len(found[0]) >= 63 or found["host"] != socket.gethostname():
        return False  # (not ours, cut to the server's 63 bytes, or another host's)
    try:
        os.kill(int(found["pid"]), 0)
    except ProcessLookupError:
        return True
    except OSError:  # (alive, another user's)
        return False
    return False


def _shown(holder: tuple[Any, ...]) -> str:
    """A lock holder's row of ``_OWNER``, as a refused writer is told it."""
    return f"{holder[0] or 'a connection'}, server pid {holder[1]}"


class AdvisoryLocks:
    """The advisory locks this process holds (thread-safe; one connection, opened on first
    use)."""

    def __init__(self, connect: Callable[[], Connection], *, enabled: bool = True) -> None:
        self._connect = connect
        self.enabled = enabled
        """``False`` behind a transaction-mode pooler, which keeps no session-level lock:
        nothing is taken (writers are kept apart by the compare-and-set alone)."""
        self._connection: Connection | None = None
        self._held: set[str] = set()
        self._lost: set[str] = set()
        """Locks this process took whose connection ended: to take again before a write."""
        self._mutex = threading.Lock()

    def holds(self, id: str) -> bool:
        """Whether this process took ``id``'s lock (and has not given it back); see
        :meth:`intact` for whether it still has it."""
        return id in self._held or id in self._lost

    def intact(self) -> bool:
        """Whether the held locks' connection shows no sign of having ended, without a round
        trip (an idle connection the server spoke on is suspect: :meth:`ensure` asks)."""
        connection = self._connection
        if self._lost or connection is None or connection.closed or connection.broken:
            return not self._held and not self._lost
        readable, _, _ = select.select([connection.pgconn.socket], [], [], 0)
        return not readable

    def ensure(self, id: str) -> None:
        """Before a write that relies on ``id``'s lock: return when this process still holds
        it (or never took it); take it again when its connection ended.

        Raises:
            SessionCollisionError: The lock was lost and another writer holds it now.
            psycopg.OperationalError: The server cannot be reached to take it again.
        """
        with self._mutex:
            if id in self._held and self._alive():
                return
            if id not in self._held and id not in self._lost:
                return
            self._take_now(
                id,
                lambda owner: (
                    f'the writer lock of session "{id}" was lost (the connection holding it '
                    f"ended) and another writer holds it now ({owner or 'it just let go'}); "
                    "refusing to write: load or resume it again"
                ),
            )

    def _alive(self) -> bool:
        """Whether the lock connection still works (a round trip when in doubt)."""
        connection = self._connection
        if connection is None or connection.closed or connection.broken:
            return False
        readable, _, _ = select.select([connection.pgconn.socket], [], [], 0)
        if not readable:
            return True
        try:
            connection.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def _forget_connection(self) -> None:
        """The connection ended: every lock on it is gone, to be taken again."""
        if self._connection is not None and not self._alive():
            self._lost |= self._held
            self._held.clear()
            with contextlib.suppress(psycopg.Error):
                self._connection.close()
            self._connection = None

    def _take_now(self, id: str, refusal: Callable[[str | None], str]) -> None:
        """Take ``id``'s lock on a live connection (under the mutex).

        Raises:
            SessionCollisionError: Another connection holds it (``refusal(owner)`` says so).
        """
        self._forget_connection()
        connection = self._open()
        deadline = time.monotonic() + DEAD_OWNER_WAIT_S
        while not self._try(connection, id):
            holder = connection.execute(_OWNER, (id,)).fetchone()
            late = time.monotonic() > deadline
            if late or (holder is not None and not _dead_here(holder[0])):
                raise SessionCollisionError(refusal(None if holder is None else _shown(holder)))
            if holder is not None:  # (it died here: the server ends it when it notices)
                time.sleep(0.01)
            # (no holder: it let go between the two queries, so the next try may take it)
        self._held.add(id)
        self._lost.discard(id)

    def _try(self, connection: Connection, id: str) -> bool:
        row = connection.execute(f"SELECT pg_try_advisory_lock({KEY})", (id,)).fetchone()
        return bool(row and row[0])

    def take(self, id: str) -> bool:
        """Take ``id``'s lock; ``True`` when newly taken.

        Raises:
            SessionCollisionError: Another connection holds it (naming its owner).
        """
        if not self.enabled:
            return True
        with self._mutex:
            if id in self._held:
                return False
            self._take_now(
                id,
                lambda owner: (
                    f'session "{id}" is being written by another writer '
                    f"({owner or 'it just let go; try again'}); refusing to write"
                ),
            )
            return True

    def give(self, id: str) -> None:
        """Release ``id``'s lock if held."""
        with self._mutex:
            self._lost.discard(id)
            if id not in self._held:
                return
            self._held.discard(id)
            if self._connection is not None and not self._connection.closed:
                # (a connection that ended has given the lock back already)
                with contextlib.suppress(psycopg.OperationalError):
                    self._connection.execute(f"SELECT pg_advisory_unlock({KEY})", (id,))

    def owner(self, connection: Connection, id: str) -> str | None:
        """Who holds ``id``'s lock on another connection (``application_name``, server pid),
        or ``None`` (always, when locks are not :attr:`enabled`); reads ``pg_locks`` without
        taking anything."""
        if not self.enabled:
            return None
        row = connection.execute(_OWNER, (id,)).fetchone()
        return None if row is None else _shown(row)

    def close(self) -> None:
        """Give every lock back (closing the connection does)."""
        with self._mutex:
            self._held.clear()
            self._lost.clear()
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _open(self) -> Connection:
        if self._connection is None or self._connection.closed:
            self._lost |= self._held  # a new connection holds nothing
            self._held.clear()
            connection = self._connect()
            if connection.info.server_version >= 140000:  # idle while its sessions are live
                connection.execute("SET idle_session_timeout = 0")
            self._connection = connection
        return self._connection
