"""The writer locks of the sessions of one SQLite database: a byte of ``<database>-writers``
per session, locked with an open-file-description lock (Linux ``F_OFD_SETLK``).

Guarantees:

- While a :class:`WriterLocks` holds a session's byte, no other holder of this protocol (in
  another process, or another storage instance of this process) can take it: taking it is
  refused at once, never waited for.
- The kernel drops every lock of a process that dies (SIGKILL included): a crashed writer
  never leaves a session locked.
- Telling whether another writer holds a session (:meth:`WriterLocks.held_elsewhere`) takes no
  lock and creates nothing, so a read-only command never blocks a writer and never writes.

A session's byte is at an offset derived from its id (a 62-bit BLAKE2b digest), so two ids
share a byte with a probability of about ``n² / 2⁶³`` for ``n`` sessions written at once.
The lock file holds no data (the locks live in the kernel); SQLite's own ``-wal``, ``-shm``
and ``-journal`` files sit beside it.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import struct
from typing import Final

from session import SessionCollisionError

__all__ = ["LOCK_SUFFIX", "WriterLocks", "lock_path"]

LOCK_SUFFIX: Final = "-writers"
"""What the lock file's name adds to the database's."""

_F_OFD_GETLK: Final = getattr(fcntl, "F_OFD_GETLK", 36)
_F_OFD_SETLK: Final = getattr(fcntl, "F_OFD_SETLK", 37)
_FLOCK: Final = struct.Struct("@hhqqi4x")
"""``struct flock``: type, whence, start, length, pid (0 for an OFD lock)."""
_OFFSETS: Final = 1 << 62


def lock_path(database: str) -> str:
    """The lock file of the database at ``database`` (an absolute path)."""
    return database + LOCK_SUFFIX


def _offset(id: str) -> int:
    digest = hashlib.blake2b(id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % _OFFSETS


def _request(kind: int, offset: int) -> bytes:
    return _FLOCK.pack(kind, os.SEEK_SET, offset, 1, 0)


class WriterLocks:
    """The sessions one storage instance holds the writer lock of. Not thread-safe: the
    storage calls it from its one worker thread."""

    def __init__(self, database: str) -> None:
        self.path = lock_path(database)
        self._fd: int | None = None
        self._held: set[str] = set()

    def holds(self, id: str) -> bool:
        """Whether this instance holds ``id``'s lock."""
        return id in self._held

    def take(self, id: str) -> bool:
        """Take ``id``'s lock; ``True`` when this call took it, ``False`` when it was held.

        Raises:
            SessionCollisionError: Another writer holds it (nothing is taken).
            OSError: The lock file cannot be opened or created.
        """
        if id in self._held:
            return False
        fd = self._open()
        try:
            fcntl.fcntl(fd, _F_OFD_SETLK, _request(fcntl.F_WRLCK, _offset(id)))
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            raise SessionCollisionError(
                f'session "{id}" is being written by another writer (another process, or '
                f'another store opened on the same database); its lock is in "{self.path}"'
            ) from None
        self._held.add(id)
        return True

    def give(self, id: str) -> None:
        """Release ``id``'s lock if held."""
        if id in self._held and self._fd is not None:
            fcntl.fcntl(self._fd, _F_OFD_SETLK, _request(fcntl.F_UNLCK, _offset(id)))
        self._held.discard(id)

    def held_elsewhere(self, id: str) -> bool:
        """Whether a writer other than this instance holds ``id``'s lock now; ``False`` when
        no lock file exists. Takes no lock and creates nothing."""
        if id in self._held:
            return False
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return False
        try:
            _check_regular(fd, self.path)
            answer = fcntl.fcntl(fd, _F_OFD_GETLK, _request(fcntl.F_WRLCK, _offset(id)))
        finally:
            os.close(fd)
        kind: int = _FLOCK.unpack(answer)[0]
        return kind != fcntl.F_UNLCK

    def close(self) -> None:
        """Release every lock (closing the descriptor drops them all)."""
        self._held.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        if self._fd is None:
            flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
            fd = os.open(self.path, flags, 0o600)
            try:
                _check_regular(fd, self.path)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
        return self._fd


def _check_regular(fd: int, path: str) -> None:
    """Refuse a lock file that is not a regular file (a planted FIFO or device)."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise OSError(errno.EINVAL, f'the writer lock file "{path}" is not a regular file')
