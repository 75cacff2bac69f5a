"""Single-writer leases for the ADK sessions of a SQLite store, whose format has no writer
locks (its appends are checked optimistically, which keeps the log whole but tells a second
runner nothing until its first write): one ``flock``-ed file per session in the directory
``<database>.adk-leases``, naming its holder. The kernel frees the lock of a process that
dies, so a crashed holder never blocks the next one.

(A JSONL store's writer lock and PostgreSQL's advisory lock already are such leases.)
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket

from session.errors import SessionCollisionError

__all__ = ["FileLeases"]


class FileLeases:
    """The leases this process holds in one directory."""

    def __init__(self, directory: str) -> None:
        self._directory = directory
        self._held: dict[str, int] = {}

    def take(self, key: str, name: str) -> None:
        """Hold the lease of ``key`` (a log id; ``name`` says which session in the error).

        Raises:
            SessionCollisionError: Another process holds it (naming its host and pid).
        """
        if key in self._held:
            return
        os.makedirs(self._directory, mode=0o700, exist_ok=True)
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        path = os.path.join(self._directory, digest + ".lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "?"
            os.close(fd)
            raise SessionCollisionError(
                f'{name} is being written by another process ({holder}); its lease is "{path}"'
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"host={socket.gethostname()} pid={os.getpid()}\n".encode(), 0)
        self._held[key] = fd

    def release(self, key: str) -> None:
        """Give the lease of ``key`` back (nothing when it is not held)."""
        fd = self._held.pop(key, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        """Give every lease back."""
        for key in list(self._held):
            self.release(key)
