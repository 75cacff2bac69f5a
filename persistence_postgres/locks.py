"""Writer exclusion across hosts: a session-level advisory lock per live session, held on one
dedicated connection while this process writes the session.

A second writer anywhere is refused with :class:`SessionCollisionError` naming the owner (its
``application_name``: host and pid, and its server pid). The server frees the locks of a
connection that closes, so a holder that dies gives them back. The lock gives a clear error
and liveness; what keeps the log correct is the check of ``next_seq`` in every append.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

import psycopg

from session import SessionCollisionError

__all__ = ["KEY", "AdvisoryLocks", "Connection"]

Connection = psycopg.Connection[tuple[Any, ...]]
"""A synchronous connection, as this backend uses them."""

KEY: Final = "hashtextextended('agent_session:' || %s, 0)"
"""The advisory lock key of the session id in ``%s`` (one bigint: two oids in ``pg_locks``)."""
_OWNER: Final = f"""
SELECT a.application_name, a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid,
  (SELECT {KEY} AS k) AS key
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.classid = ((key.k >> 32) & 4294967295)::oid
  AND l.objid = (key.k & 4294967295)::oid
  AND l.pid <> pg_backend_pid()
"""


class AdvisoryLocks:
    """The advisory locks this process holds (thread-safe; one connection, opened on first
    use)."""

    def __init__(self, connect: Callable[[], Connection]) -> None:
        self._connect = connect
        self._connection: Connection | None = None
        self._held: set[str] = set()
        self._mutex = threading.Lock()

    def holds(self, id: str) -> bool:
        """Whether this process holds ``id``'s lock."""
        return id in self._held

    def take(self, id: str) -> bool:
        """Take ``id``'s lock; ``True`` when newly taken.

        Raises:
            SessionCollisionError: Another connection holds it (naming its owner).
        """
        with self._mutex:
            if id in self._held:
                return False
            connection = self._open()
            row = connection.execute(f"SELECT pg_try_advisory_lock({KEY})", (id,)).fetchone()
            if not row or not row[0]:
                owner = self.owner(connection, id)
                raise SessionCollisionError(
                    f'session "{id}" is being written by another writer '
                    f"({owner or 'it just let go; try again'}); refusing to write"
                )
            self._held.add(id)
            return True

    def give(self, id: str) -> None:
        """Release ``id``'s lock if held."""
        with self._mutex:
            if id not in self._held:
                return
            self._held.discard(id)
            if self._connection is not None and not self._connection.closed:
                self._connection.execute(f"SELECT pg_advisory_unlock({KEY})", (id,))

    @staticmethod
    def owner(connection: Connection, id: str) -> str | None:
        """Who holds ``id``'s lock on another connection (``application_name``, server pid),
        or ``None``; reads ``pg_locks`` without taking anything."""
        row = connection.execute(_OWNER, (id,)).fetchone()
        return None if row is None else f"{row[0] or 'a connection'}, server pid {row[1]}"

    def close(self) -> None:
        """Give every lock back (closing the connection does)."""
        with self._mutex:
            self._held.clear()
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _open(self) -> Connection:
        if self._connection is None or self._connection.closed:
            self._held.clear()  # a new connection holds nothing
            self._connection = self._connect()
        return self._connection
