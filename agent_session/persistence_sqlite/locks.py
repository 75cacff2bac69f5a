"""The writer locks of the sessions of one SQLite database: a file per session being written,
in the directory ``<database>-writers``, locked with an open-file-description lock (Linux
``F_OFD_SETLK``) and holding its writer's pid.

Guarantees:

- While a :class:`WriterLocks` holds a session's lock, no other holder of this protocol (in
  another process, or another storage instance of this process) can take it: taking it is
  refused at once, never waited for, naming the holder's pid.
- The kernel drops every lock of a process that dies (SIGKILL included): a crashed writer
  never leaves a session locked (its file stays, unlocked, until the next writer takes it).
- Telling whether another writer holds a session (:meth:`WriterLocks.held_elsewhere`) takes no
  lock and creates nothing, so a read-only command never blocks a writer and never writes.

A released lock's file is removed while it is still locked, and a taker checks that the
file it locked is still the one at its path, so two writers can never both hold a session
through an old and a new file of one name. A session's file is named by a 128-bit BLAKE2b
digest of its id. SQLite's own ``-wal``, ``-shm`` and ``-journal`` files sit beside the
directory.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import struct
from typing import Final

from agent_session.session import SessionCollisionError

__all__ = ["LOCK_SUFFIX", "WriterLocks", "lock_directory"]

LOCK_SUFFIX: Final = "-writers"
"""What the lock directory's name adds to the database's."""

_F_OFD_GETLK: Final = getattr(fcntl, "F_OFD_GETLK", 36)
_F_OFD_SETLK: Final = getattr(fcntl, "F_OFD_SETLK", 37)
_FLOCK: Final = struct.Struct("@hhqqi4x")
"""``struct flock``: type, whence, start, length (0: the whole file), pid (0 for OFD)."""
_WHOLE: Final = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
_TAKE_TRIES: Final = 8
"""How often a taker retries when the file it locked was released and removed meanwhile."""


def lock_directory(database: str) -> str:
    """The lock directory of the database at ``database`` (an absolute path)."""
    return database + LOCK_SUFFIX


class WriterLocks:
    """The sessions one storage instance holds the writer lock of. Not thread-safe: the
    storage calls it from its one worker thread."""

    def __init__(self, database: str) -> None:
        self.directory = lock_directory(database)
        self._held: dict[str, int] = {}

    def holds(self, id: str) -> bool:
        """Whether this instance holds ``id``'s lock."""
        return id in self._held

    def path(self, id: str) -> str:
        """The lock file of ``id``."""
        digest = hashlib.blake2b(id.encode("utf-8"), digest_size=16).hexdigest()
        return os.path.join(self.directory, digest + ".lock")

    def take(self, id: str) -> bool:
        """Take ``id``'s lock; ``True`` when this call took it, ``False`` when it was held.

        Raises:
            SessionCollisionError: Another writer holds it (nothing is taken).
            OSError: The lock file cannot be made.
        """
        if id in self._held:
            return False
        path = self.path(id)
        with contextlib.suppress(FileExistsError):
            os.mkdir(self.directory, 0o700)
        for _ in range(_TAKE_TRIES):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            try:
                _check_regular(fd, path)
                try:
                    fcntl.fcntl(fd, _F_OFD_SETLK, _WHOLE)
                except OSError as e:
                    if e.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    raise SessionCollisionError(
                        f'session "{id}" is being written by another writer '
                        f'(pid {_holder(fd)}); its lock is "{path}"'
                    ) from None
                if _same_file(fd, path):
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                    self._held[id] = fd
                    return True
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # released and removed meanwhile: take the new one
        raise SessionCollisionError(f'session "{id}" kept changing writers; its lock is "{path}"')

    def give(self, id: str) -> None:
        """Release ``id``'s lock if held (its file is removed first, still locked)."""
        fd = self._held.pop(id, None)
        if fd is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path(id))
            os.close(fd)

    def held_elsewhere(self, id: str) -> bool:
        """Whether a writer other than this instance holds ``id``'s lock now. Takes no lock
        and creates nothing."""
        if id in self._held:
            return False
        try:
            fd = os.open(self.path(id), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            return False
        try:
            _check_regular(fd, self.path(id))
            kind: int = _FLOCK.unpack(fcntl.fcntl(fd, _F_OFD_GETLK, _WHOLE))[0]
        finally:
            os.close(fd)
        return kind != fcntl.F_UNLCK

    def close(self) -> None:
        """Release every lock."""
        for id in list(self._held):
            self.give(id)


def _holder(fd: int) -> str:
    """The pid the lock file holds ("?" when it holds none yet)."""
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return text if text.isdigit() else "?"


def _same_file(fd: int, path: str) -> bool:
    """Whether ``path`` still names the file open at ``fd`` (a released lock's file is
    removed: locking it then holds nothing)."""
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def _check_regular(fd: int, path: str) -> None:
    """Refuse a lock file that is not a regular file (a planted FIFO or device)."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise OSError(errno.EINVAL, f'the writer lock file "{path}" is not a regular file')
