"""Replacing a small file beside a store's logs (an export cursor, the ADK catalog, the
current branches) atomically and durably, and taking turns with other processes that change
one."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Iterator

__all__ = ["exclusively", "replace_durably", "sync_directory"]


@contextlib.contextmanager
def exclusively(lock: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` of the file ``lock`` (made ``0600`` when missing, its
    directory ``0700``) for the block: processes that read, change and replace one file
    beside the logs take turns, so none writes back a copy that misses another's change."""
    os.makedirs(os.path.dirname(lock) or ".", mode=0o700, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (releases the lock)


def replace_durably(path: str, data: bytes) -> None:
    """Make ``path`` hold ``data``: written to a temporary file beside it, synced, renamed
    over it, and the directory synced. When it returns, the new content is durable; a crash
    before leaves the old content (and at most a stray ``*.tmp``)."""
    directory = os.path.dirname(path) or "."
    temp = f"{path}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    sync_directory(directory)


def sync_directory(directory: str) -> None:
    """Make the names in ``directory`` (a file created, renamed or unlinked there) durable."""
    handle = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
