"""The durable-write protocol of the JSONL storage: plain functions over the
:class:`persistence_jsonl.fileio.FileOps` seam, each stating what a crash at any instant
leaves on disk.

These are the only places the storage writes a log. Named failpoints mark the instants the
crash tests kill the process at.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time

from agent_session.persistence_jsonl.fileio import FileOps
from agent_session.session.persistence.kit import armed, failpoint

__all__ = [
    "RollbackFailed",
    "append_synced",
    "create_by_link",
    "truncate_synced",
    "write_synced",
]


class RollbackFailed(Exception):
    """An append failed and cutting the file back failed too: the file's tail is unknown.
    ``error`` is the append's failure, ``rollback_error`` the cut's."""

    def __init__(self, error: Exception, rollback_error: Exception) -> None:
        super().__init__(f"{error}; rollback: {rollback_error}")
        self.error = error
        self.rollback_error = rollback_error


def create_by_link(
    ops: FileOps, directory: str, final: str, content: bytes, *, fresh: bool = False
) -> float | None:
    """Create ``final`` (in ``directory``) holding exactly ``content``.

    Protocol: write and fsync a fresh temp file, ``link`` it to ``final`` (which fails if a
    file is there), fsync the directory, unlink the temp. Temp files a crash left beside
    ``final`` are removed first; with ``fresh`` (the caller made ``directory`` just now, so
    neither an earlier attempt's log nor a crash's temp file can be in it) none is looked for.
    The caller makes ``directory``'s own name durable.

    Crash guarantee: at any instant ``final`` is absent or holds all of ``content``; when this
    returns, the name and the bytes are on stable storage. If the directory fsync fails the
    name is withdrawn again, so a retry creates it anew instead of trusting an unconfirmed one.

    Returns how long writing and syncing the content took (ms) once created, ``0.0`` when
    ``final`` already holds exactly ``content`` (an earlier attempt of this very creation
    linked it but failed before confirming it: it is confirmed now), and ``None`` (nothing
    written) when ``final`` exists with other content, or was created by another writer
    meanwhile.
    """
    if not fresh and ops.stat(final) is not None:
        if ops.read(final) == content:
            ops.fsync_dir(directory)
            return 0.0
        return None
    prefix = os.path.basename(final) + "."
    for name in () if fresh else ops.listdir(directory):  # temp files left by a crash
        if name.startswith(prefix) and name.endswith(".tmp"):
            ops.unlink(os.path.join(directory, name))
    temp = f"{final}.{secrets.token_hex(6)}.tmp"
    fd = ops.open_exclusive(temp)
    try:
        elapsed = write_synced(ops, fd, content, "materialize:after-temp-write")
    except BaseException:
        ops.close(fd)
        with contextlib.suppress(OSError):
            ops.unlink(temp)
        raise
    ops.close(fd)
    try:
        ops.link(temp, final)
    except BaseException as e:
        with contextlib.suppress(OSError):
            ops.unlink(temp)
        if isinstance(e, FileExistsError):
            return None  # another writer created it meanwhile
        raise
    failpoint("materialize:after-link")
    try:
        ops.fsync_dir(directory)
    except BaseException:
        for path in (final, temp):  # the name is not known to be durable: withdraw it
            with contextlib.suppress(OSError):
                ops.unlink(path)
        raise
    failpoint("materialize:after-dir-fsync")
    with contextlib.suppress(OSError):  # the log is durable; a stale temp is cleaned later
        ops.unlink(temp)
    return elapsed


def write_synced(ops: FileOps, fd: int, data: bytes, point: str) -> float:
    """Write all of ``data`` at ``fd``'s position and fsync; return how long that took (ms).

    Crash guarantee: none by itself (a prefix of ``data`` may reach the disk); callers make it
    atomic by rolling back (:func:`append_synced`) or by writing a temp file first.
    """
    start = time.perf_counter()
    if ops.dsync_writes and not armed(point):
        ops.write_all_dsync(fd, data)  # one call: no instant between write and sync
    else:  # (a kill at ``point`` needs that instant: two calls)
        ops.write_all(fd, data)
        failpoint(point)
        ops.fsync(fd)
    return (time.perf_counter() - start) * 1000


def append_synced(
    ops: FileOps, fd: int, data: bytes, point: str = "append:after-write", size: int | None = None
) -> float:
    """Append ``data`` to the file open at ``fd`` (``O_APPEND``) and fsync; return how long
    the write and fsync took (ms).

    Crash guarantee: a crash leaves the old bytes followed by a prefix of ``data`` (a torn
    tail that a load cuts); when this returns, all of ``data`` is on stable storage. On
    failure the file is cut back to its old size and that is fsync'd, so nothing of ``data``
    remains; if even that fails, :class:`RollbackFailed` is raised and the tail is unknown.
    ``size`` is the file's size when the caller knows it (else it is asked for).
    """
    if size is None:
        size = ops.size(fd)
    try:
        return write_synced(ops, fd, data, point)
    except Exception as error:
        try:
            ops.truncate(fd, size)
            ops.fsync(fd)
        except Exception as rollback_error:
            raise RollbackFailed(error, rollback_error) from rollback_error
        raise


def truncate_synced(ops: FileOps, path: str, size: int) -> None:
    """Cut the file at ``path`` to ``size`` bytes and fsync.

    Crash guarantee: a crash leaves the file at its old length or at ``size`` (only bytes past
    ``size`` ever go); when this returns, the cut is on stable storage.
    """
    fd = ops.open_readwrite(path)
    try:
        ops.truncate(fd, size)
        failpoint("repair:after-truncate")
        ops.fsync(fd)
    finally:
        ops.close(fd)
