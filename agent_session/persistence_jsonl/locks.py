"""The writer lock of a JSONL session: ``session.lock`` beside its log, an exclusive ``flock``
holding the owner's pid. Taking it, releasing it, and telling from outside whether a live
process holds it all live here."""

from __future__ import annotations

import os

from agent_session.persistence_jsonl.fileio import FileOps
from agent_session.persistence_jsonl.layout import LOCK_NAME
from agent_session.session import SessionCollisionError

__all__ = ["WriterLocks", "held_locks", "writer_active"]

_PROC_LOCKS = "/proc/locks"


class WriterLocks:
    """The writer locks one storage instance holds, by session id.

    Guarantee: while this instance holds ``id``'s lock, no other process holding the lock
    protocol writes that session; the OS releases the lock when the process dies.
    """

    def __init__(self, ops: FileOps) -> None:
        self._ops = ops
        self._held: dict[str, int] = {}

    def holds(self, id: str) -> bool:
        """Whether this instance holds ``id``'s lock."""
        return id in self._held

    def take(self, id: str, directory: str, *, new: bool = False) -> None:
        """Take the lock of the session whose directory is ``directory`` (no-op if held);
        ``new``: the caller made that directory just now.

        Raises :class:`SessionCollisionError` naming the pid of the process that holds it.
        """
        if id in self._held:
            return
        path = os.path.join(directory, LOCK_NAME)
        fd = self._ops.lock(path, new=new)
        if fd is None:
            holder = (self._ops.read(path) or b"?").decode("ascii", "replace").strip()
            raise SessionCollisionError(
                f'session "{id}" is being written by another writer (pid {holder or "?"}); '
                f'its lock is "{path}"'
            )
        self._held[id] = fd

    def release(self, id: str) -> None:
        """Release ``id``'s lock if held."""
        fd = self._held.pop(id, None)
        if fd is not None:
            self._ops.unlock(fd)

    def ids(self) -> list[str]:
        """The ids whose locks are held."""
        return list(self._held)


def held_locks(ops: FileOps) -> set[tuple[int, int, int]] | None:
    """``(major, minor, inode)`` of every file lock held on this machine, from
    ``/proc/locks`` (Linux); ``None`` where that is not available. Reading it takes no lock,
    so it can never make a writer's lock attempt fail."""
    try:
        data = ops.read(_PROC_LOCKS)
    except OSError:
        return None
    if data is None:
        return None
    held: set[tuple[int, int, int]] = set()
    for line in data.decode("ascii", "replace").splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] != "->":
            try:
                major, minor, inode = fields[5].split(":")
                held.add((int(major, 16), int(minor, 16), int(inode)))
            except ValueError:
                continue
    return held


def writer_active(ops: FileOps, session_dir: str, held: set[tuple[int, int, int]] | None) -> bool:
    """Whether a live process holds the writer lock of the session in ``session_dir``
    (``held`` from :func:`held_locks`)."""
    if not held:
        return False
    return ops.file_id(os.path.join(session_dir, LOCK_NAME)) in held
