"""Every system call the JSONL backend makes, in one narrow, replaceable seam.

The backend makes no system call of its own (only path arithmetic): it calls the methods of a
:class:`FileOps`. Tests (and the crash-state enumerator) substitute a subclass that fails,
records or blocks the k-th call, so fault injection exercises the real code paths without
mocking the filesystem.

Nothing here follows a symbolic link or opens anything but a regular file where a file
belongs: a link, FIFO, device or directory planted in a store is refused with
:class:`SessionStoreEntryError` (only the store root itself, which its user names, may be a
link). Opens never block (a FIFO is refused, not waited on), and a failure after a descriptor
was opened closes it.

Every method is synchronous and blocking. The backend runs reads, repairs and most writes in a
worker thread; on the event loop stay cheap calls (the root check at construction, closing
descriptors, releasing locks) and, while a single session is live and the disk is fast, its
checkpoint's ``write`` and ``fsync`` (where and why: ``persistence_jsonl.storage``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat as stat_module
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final, Literal

from agent_session.session.errors import SessionStoreEntryError

__all__ = ["FileOps", "Stat"]

FILE_MODE = 0o600
"""Mode of every file the backend creates."""
DIR_MODE = 0o700
"""Mode of every directory the backend creates."""


@dataclass(frozen=True, slots=True)
class Stat:
    """The parts of ``os.stat`` the backend uses."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    kind: Literal["file", "dir", "symlink", "other"]
    """What the entry itself is (a link is never followed)."""

    @property
    def is_dir(self) -> bool:
        """A real directory (not a link to one)."""
        return self.kind == "dir"

    @property
    def is_file(self) -> bool:
        """A regular file (not a link to one)."""
        return self.kind == "file"

    @property
    def kind_name(self) -> str:
        """``a regular file``, ``a directory``, ``a symbolic link`` or ``a FIFO, socket or
        device``: for messages."""
        return _KIND_NAMES[self.kind]

    @property
    def revision(self) -> str:
        """``dev:ino:size:mtime_ns:ctime_ns``: changes whenever the file's bytes may have."""
        return f"{self.dev}:{self.ino}:{self.size}:{self.mtime_ns}:{self.ctime_ns}"


DSYNC_WRITES: Final = hasattr(os, "pwritev") and hasattr(os, "RWF_DSYNC")
"""Whether the platform has one call that writes and makes the bytes durable (Linux)."""

_DSYNC_BY_CLASS: dict[type, bool] = {}


class FileOps:
    """The real system calls. Subclass and override to inject faults.

    An append is written and made durable by one :meth:`write_dsync` call where the platform
    has it, else by :meth:`write` calls and an :meth:`fsync`. A subclass that overrides
    ``write``, ``write_all`` or ``fsync`` but not ``write_dsync`` (a fault injector written
    for the two calls) gets the two calls; one that overrides ``write_dsync`` gets it."""

    def stat(self, path: str, *, follow: bool = False) -> Stat | None:
        """Stat the entry ``path`` names, without following a final link unless ``follow``
        (for the store root its user names); ``None`` when it does not exist, including when
        a component of it is not a directory (other errors propagate)."""
        try:
            st = os.stat(path) if follow else os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return Stat(
            st.st_dev,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
            _kind(st.st_mode),
        )

    def read(self, path: str) -> bytes | None:
        """The whole regular file; ``None`` when it does not exist."""
        try:
            fd = self._open_regular(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        with open(fd, "rb") as f:
            return f.read()

    def read_prefix(self, path: str, limit: int) -> bytes | None:
        """Up to ``limit`` bytes from the start of a regular file; ``None`` when it does not
        exist."""
        try:
            fd = self._open_regular(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        with open(fd, "rb") as f:
            return f.read(limit)

    def read_range(self, path: str, offset: int, size: int) -> bytes | None:
        """Up to ``size`` bytes of a regular file from ``offset`` (fewer past its end);
        ``None`` when it does not exist."""
        try:
            fd = self._open_regular(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        with open(fd, "rb") as f:
            f.seek(offset)
            return f.read(size)

    def read_chunks(self, path: str, limit: int, chunk: int = 1 << 20) -> Iterator[bytes]:
        """The first ``limit`` bytes of a regular file, ``chunk`` bytes at a time (fewer if it
        is shorter); nothing when it does not exist. The file is closed when the iteration
        ends or is abandoned."""
        try:
            fd = self._open_regular(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        with open(fd, "rb") as f:
            while limit > 0:
                data = f.read(min(chunk, limit))
                if not data:
                    return
                limit -= len(data)
                yield data

    def listdir(self, path: str) -> list[str]:
        """Entry names of a directory; ``[]`` when it does not exist."""
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []

    def mkdir(self, path: str) -> bool:
        """Create a 0700 directory; ``False`` if a real directory is already there. Any other
        existing entry (a link to a directory too) is refused."""
        try:
            os.mkdir(path, DIR_MODE)
        except FileExistsError:
            st = os.lstat(path)
            if not stat_module.S_ISDIR(st.st_mode):
                raise SessionStoreEntryError(
                    f'"{path}" is {_KIND_NAMES[_kind(st.st_mode)]}, not a directory: refusing '
                    "to use it"
                ) from None
            return False
        return True

    def open_exclusive(self, path: str) -> int:
        """Create a new 0600 file for writing; fails if anything (a link too) is there."""
        return os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE
        )

    def open_append(self, path: str) -> int:
        """Open an existing regular file for appending."""
        return self._open_regular(path, os.O_WRONLY | os.O_APPEND)

    def open_readwrite(self, path: str) -> int:
        """Open an existing regular file for reading and writing (used by truncation)."""
        return self._open_regular(path, os.O_RDWR)

    def _open_regular(self, path: str, flags: int, mode: int = 0) -> int:
        """Open ``path`` only if it is a regular file: never through a final link, never
        waiting on a FIFO. Raises :class:`SessionStoreEntryError` for anything else."""
        try:
            fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
        except OSError as e:
            if e.errno not in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                raise
            found = self.stat(path)
            kind = _KIND_NAMES[found.kind if found is not None else "other"]
            raise SessionStoreEntryError(
                f'"{path}" is {kind}, not a regular file: refusing to open it'
            ) from None
        try:
            mode_now = os.fstat(fd).st_mode
            if not stat_module.S_ISREG(mode_now):
                raise SessionStoreEntryError(
                    f'"{path}" is {_KIND_NAMES[_kind(mode_now)]}, not a regular file: '
                    "refusing to open it"
                )
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def write(self, fd: int, data: bytes | memoryview) -> int:
        """One ``write`` call; returns how many bytes were written (may be short)."""
        return os.write(fd, data)

    def write_all(self, fd: int, data: bytes) -> None:
        """Write every byte, looping over short writes; a write that makes no progress is an
        ``EIO`` error."""
        _all_of(self.write, fd, data)

    def write_all_dsync(self, fd: int, data: bytes) -> None:
        """:meth:`write_all` through :meth:`write_dsync` (each call's bytes are durable when
        it returns)."""
        _all_of(self.write_dsync, fd, data)

    def fsync(self, fd: int) -> None:
        """Flush a file's data and metadata to stable storage."""
        os.fsync(fd)

    def write_dsync(self, fd: int, data: bytes | memoryview) -> int:
        """One ``pwritev`` with ``RWF_DSYNC`` at the file's position (its end, for a file
        opened to append): returns once the bytes written, and the size that reads them
        back, are on stable storage. Returns how many bytes were written (may be short).
        Only where :attr:`dsync_writes` says so."""
        return os.pwritev(fd, [data], -1, os.RWF_DSYNC)

    @property
    def dsync_writes(self) -> bool:
        """Whether durable writes go through :meth:`write_dsync` (see the class docstring)."""
        cls = type(self)
        known = _DSYNC_BY_CLASS.get(cls)
        if known is None:
            own = cls.write_dsync is not FileOps.write_dsync
            pair = (
                cls.write is not FileOps.write
                or cls.write_all is not FileOps.write_all
                or cls.fsync is not FileOps.fsync
            )
            known = _DSYNC_BY_CLASS[cls] = DSYNC_WRITES and (own or not pair)
        return known

    def fsync_dir(self, path: str) -> None:
        """Make a directory's entries (created, linked, removed names) durable."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def truncate(self, fd: int, length: int) -> None:
        """Cut a file to ``length`` bytes."""
        os.ftruncate(fd, length)

    def size(self, fd: int) -> int:
        """The current size of an open file."""
        return os.fstat(fd).st_size

    def close(self, fd: int) -> None:
        """Close a descriptor."""
        os.close(fd)

    def link(self, source: str, target: str) -> None:
        """Hard-link ``source`` to ``target``; fails if ``target`` exists (never replaces)."""
        os.link(source, target)

    def unlink(self, path: str) -> None:
        """Remove a file; a missing file is not an error."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def rmdir(self, path: str) -> None:
        """Remove an empty directory; a missing or non-empty one is left as it is."""
        with contextlib.suppress(FileNotFoundError, OSError):
            os.rmdir(path)

    def lock(self, path: str, *, new: bool = False) -> int | None:
        """Take an exclusive advisory lock on ``path`` (created 0600 if missing) without
        waiting; return its descriptor, or ``None`` if another process holds it. The lock
        is released by :meth:`unlock`, by closing, or by the OS when the process dies.

        ``new``: the caller made the directory just now, so ``path`` is most likely absent;
        it is then created exclusively (nothing planted can be opened, and an empty new file
        needs no checks and no truncation), falling back to the general way if it is there.
        """
        fd = self._create_lock(path) if new else None
        fresh = fd is not None
        if fd is None:
            fd = self._open_regular(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:  # the holder's pid, for the collision message of the next writer
            if not fresh:
                self.truncate(fd, 0)
            self.write_all(fd, _PID.line)
        except BaseException:  # a full disk: give the lock back, never leak it
            os.close(fd)
            raise
        return fd

    def _create_lock(self, path: str) -> int | None:
        """A new, empty lock file at ``path``; ``None`` if an entry is there already."""
        try:
            return os.open(
                path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE
            )
        except FileExistsError:
            return None

    def unlock(self, fd: int) -> None:
        """Release a lock taken by :meth:`lock`."""
        os.close(fd)

    def file_id(self, path: str) -> tuple[int, int, int] | None:
        """``(major, minor, inode)`` of the file at ``path`` (as ``/proc/locks`` names files),
        or ``None`` when it cannot be stat'ed."""
        try:
            info = os.lstat(path)
        except OSError:
            return None
        return os.major(info.st_dev), os.minor(info.st_dev), info.st_ino

    def realpath(self, path: str) -> str:
        """Canonical path (symlinks resolved)."""
        return os.path.realpath(path)


class _Pid:
    """This process's pid as a lock file's line, asked for once per process (``getpid`` is a
    system call, and every new session's lock writes it)."""

    def __init__(self) -> None:
        self.line = b""
        self.reset()

    def reset(self) -> None:
        self.line = f"{os.getpid()}\n".encode()


_PID: Final = _Pid()
os.register_at_fork(after_in_child=_PID.reset)


def _kind(mode: int) -> Literal["file", "dir", "symlink", "other"]:
    if stat_module.S_ISREG(mode):
        return "file"
    if stat_module.S_ISDIR(mode):
        return "dir"
    if stat_module.S_ISLNK(mode):
        return "symlink"
    return "other"


_KIND_NAMES: Final = {
    "file": "a regular file",
    "dir": "a directory",
    "symlink": "a symbolic link",
    "other": "a FIFO, socket or device",
}


def _all_of(write: Callable[[int, memoryview], int], fd: int, data: bytes) -> None:
    """Every byte of ``data`` through ``write``, looping over short writes; a write that makes
    no progress is an ``EIO`` error."""
    view = memoryview(data)
    offset = 0
    while offset < len(data):
        written = write(fd, view[offset:])
        if written <= 0:
            raise OSError(errno.EIO, "write made no progress")
        offset += written
