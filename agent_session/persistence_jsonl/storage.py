"""``JsonlStorage``: one append-only, fsync'd JSONL log per session, byte-compatible with the
reference's ``session-persistence-jsonl`` in both of its encodings (plain ``session.jsonl``
and its default ``session.jsonl.zstd``, see :mod:`persistence_jsonl.encoding`), as a
:class:`session.persistence.storage.Storage`.

Guarantees: an append that returned is on stable storage (the first one creates the file
atomically with its header, :func:`persistence_jsonl.durable.create_by_link`); a failed append
leaves the file as it was, or, if even the rollback failed, raises
:class:`SessionDurabilityError` and refuses further appends to that session from this
instance; committed bytes are never rewritten (repair only cuts a torn tail and appends
closers). Files are created 0600, directories 0700.

Where the I/O runs (said here once): off the event loop, so fsyncs of different sessions
overlap and the loop keeps running. Appends, and a new session's first write, run on the
storage's own I/O threads (a checkpoint hands its batch there without a task, and the thread
encodes it too, ``start_append``); reads and repairs on the loop's default worker threads.
One exception: while exactly one session is live (``sole_writer``), a flush barrier (a
checkpoint) that appends to its already created log encodes, writes and fsyncs on the
event-loop thread: a thread round trip costs about as much as a fast fsync, and the agent is
waiting for that checkpoint anyway. Background (batching-window) writes stay on the I/O
threads. Inline checkpoints stop as soon as the latest write-and-fsync took longer than
``inline_fsync_budget_ms`` (a slow disk) and resume when one is fast again, so a slow disk
blocks the loop at most once; ``0`` keeps all I/O off the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence

from agent_session.persistence_jsonl.durable import (
    RollbackFailed,
    append_synced,
    create_by_link,
    truncate_synced,
)
from agent_session.persistence_jsonl.encoder import encode_batch
from agent_session.persistence_jsonl.encoding import (
    ENCODINGS,
    Compression,
    LogEncoding,
    encoding_of,
)
from agent_session.persistence_jsonl.fileio import FileOps
from agent_session.persistence_jsonl.layout import LOCK_NAME, check_storable_id, session_dir
from agent_session.persistence_jsonl.locks import WriterLocks, held_locks, writer_active
from agent_session.persistence_jsonl.reader import DEFAULT_MAX_LOG_BYTES, Cut, LogReader
from agent_session.persistence_jsonl.tail import read_from_last, read_tail
from agent_session.session import (
    SessionCollisionError,
    SessionDurabilityError,
    SessionError,
    SessionEvent,
    SessionHeader,
    SessionNotHeldError,
)
from agent_session.session.events.header import header_line
from agent_session.session.json.lossless import is_safe_int
from agent_session.session.persistence.kit import (
    IOThreads,
    RawArtifact,
    SessionSnapshot,
    Storage,
    StoredLog,
    StoredTail,
)

__all__ = ["IO_THREADS", "JsonlStorage"]

IO_THREADS = 32
"""Most appends (checkpoints, and new sessions' first writes) of one storage in flight at
once: their fsyncs overlap (the filesystem commits them in one journal transaction where it
can)."""


def _collision(id: str) -> SessionCollisionError:
    """The reference's refusal to create a second log for ``id``."""
    return SessionCollisionError(
        f'refusing to materialize "{id}": a log already exists on disk (load/resume it instead)'
    )


class JsonlStorage(Storage):
    """Sessions as ``<root>/<project dir>/<encoded id>/session.jsonl[.zstd]`` (see the module
    docstring for the guarantees and where the I/O runs).

    ``compression="auto"`` reads and appends each stored log in the encoding its file has,
    and creates new ones as ``new_session_compression`` (plain by default: ``grep`` reads
    it); ``"none"`` and ``"zstd"`` accept only that encoding (the reference's refusal)."""

    name = "session-persistence-jsonl"
    reads_from_last = True

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        pack_chunks: bool = True,
        ops: FileOps | None = None,
        inline_fsync_budget_ms: float = 2.0,
        max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
        compression: Compression = "auto",
        new_session_compression: str | None = None,
    ) -> None:
        if compression not in ("auto", "none", "zstd"):
            raise ValueError(f'compression must be "auto", "none" or "zstd", not {compression!r}')
        new = new_session_compression or ("none" if compression == "auto" else compression)
        if new not in ENCODINGS or compression not in ("auto", new):
            raise ValueError(
                f'new_session_compression must be "none" or "zstd" (and, unless compression '
                f'is "auto", the same as it), not {new_session_compression!r}'
            )
        if not isinstance(inline_fsync_budget_ms, int | float) or not (
            0 <= inline_fsync_budget_ms < float("inf")
        ):
            raise TypeError("inline_fsync_budget_ms must be a finite number >= 0")
        if not is_safe_int(max_log_bytes) or max_log_bytes < 1:
            raise TypeError("max_log_bytes must be a positive safe integer")
        self.root = os.path.abspath(os.fspath(root))
        """The absolute store root."""
        self.ops = ops or FileOps()
        """The system-call seam (replace it to inject faults)."""
        existing = self.ops.stat(self.root, follow=True)
        if existing is not None and not existing.is_dir:
            raise NotADirectoryError(f'session store root "{self.root}" is not a directory')
        self.reader = LogReader(self.root, self.ops, max_log_bytes, compression)
        """Finds, reads and lists the logs of the root."""
        self.new_encoding: LogEncoding = ENCODINGS[new]
        """The encoding new sessions are created in."""
        self._encodings: dict[str, LogEncoding] = {}  # id -> its file's, once locked
        self.inline_fsync_budget_ms = float(inline_fsync_budget_ms)
        """Longest latest write-and-fsync (ms) for which a single live session's checkpoint
        still runs on the event-loop thread; ``0`` never does."""
        self._locks = WriterLocks(self.ops)
        self._poisoned: dict[str, SessionDurabilityError] = {}
        self._fds: dict[str, tuple[int, str, int]] = {}
        """id -> its append descriptor, the log's path and size (only this writer appends)."""
        self.pack = pack_chunks
        """Whether appends pack runs of streamed deltas into rows."""
        self._append_ms = 0.0  # how long the latest write-and-fsync took; 0 = not measured
        self._writers: IOThreads | None = None  # appends' I/O threads (_io)
        self._unsynced_dirs: dict[str, list[str]] = {}
        """id -> the directories whose new entries (made for its log) are not yet synced."""
        self._projects: set[str] = set()
        """Project directories this instance made or found real (a new session's directory
        is made in one of them with one ``mkdir``)."""

    # --- reads ------------------------------------------------------------------------------

    def check_id(self, id: str) -> None:
        check_storable_id(id)

    def locate(self, header: SessionHeader) -> str:
        """The transcript path of a session: its stored log's, or where a new one would be
        created."""
        encoding = self._encodings.get(header.id)
        if encoding is None:
            with contextlib.suppress(SessionError, OSError):
                stored = self.reader.find(header.id)
                encoding = None if stored is None else encoding_of(stored)
        filename = (encoding or self.new_encoding).filename
        return os.path.join(session_dir(self.root, header), filename)

    async def load(self, id: str) -> StoredLog | None:
        return await asyncio.to_thread(self.reader.load, id)

    def stored_now(self, id: str) -> bool | None:
        return self.reader.find(id) is not None  # a few stats, on the calling thread

    async def revision(self, id: str) -> str | None:
        return await asyncio.to_thread(self.reader.revision, id)

    async def list_snapshots(self) -> list[SessionSnapshot]:
        return await asyncio.to_thread(self.reader.snapshots)

    async def read_raw(self, id: str) -> RawArtifact | None:
        return await asyncio.to_thread(self.reader.raw, id)

    async def read_tail(self, id: str, count: int) -> StoredTail | None:
        return await asyncio.to_thread(read_tail, self.reader, id, count)

    async def read_from_last(self, id: str, type: str) -> StoredTail | None:
        return await asyncio.to_thread(read_from_last, self.reader, id, type)

    # --- the writer lock --------------------------------------------------------------------

    async def acquire(self, id: str) -> bool:
        """Take the writer lock of a stored session before adopting, repairing or appending
        to it (a new session is locked when it materializes)."""
        if self._locks.holds(id):
            return False
        return await asyncio.to_thread(self._acquire, id)

    def _acquire(self, id: str) -> bool:
        path = self.reader.find(id)
        if path is None:
            return False
        self._locks.take(id, os.path.dirname(path))
        self._encodings[id] = encoding_of(path)
        return True

    def _own(self, header: SessionHeader) -> bool:
        """Hold the session's writer lock from the first write or repair until the session
        is released or the storage closes, creating its directories first (their names are
        made durable by :meth:`_sync_new_dirs`). Returns whether it made the session's
        directory just now."""
        if self._locks.holds(header.id):
            return False
        directory = session_dir(self.root, header)
        project = os.path.dirname(directory)
        made: bool | None = None
        if project in self._projects:
            try:
                made = self.ops.mkdir(directory)
            except FileNotFoundError:  # the project directory went away: make it again
                self._projects.discard(project)
        if made is None:
            made = self._make_dirs(header.id, directory)
            self._projects.add(project)
        elif made:
            self._unsynced_dirs.setdefault(header.id, []).append(project)
        self._locks.take(header.id, directory, new=made)
        self._encodings[header.id] = self.new_encoding
        return made

    def _make_dirs(self, id: str, directory: str) -> bool:
        """Make the session directory, its project directory, and the root with its missing
        ancestors, like the reference (the root may be a user's link; a link planted below
        it is refused). Returns whether the session directory was made."""
        paths = [os.path.dirname(directory), directory]
        ancestor = self.root
        while self.ops.stat(ancestor, follow=True) is None:
            paths.insert(0, ancestor)
            ancestor = os.path.dirname(ancestor)
        parent = os.path.dirname(paths[0])
        made = False
        for path in paths:
            made = self.ops.mkdir(path)
            if made:
                self._unsynced_dirs.setdefault(id, []).append(parent)
            parent = path
        return made

    def _sync_new_dirs(self, id: str) -> None:
        """Make the names of the directories :meth:`_own` created for ``id`` durable. Done
        after the log is linked and its directory synced, not after each ``mkdir``: nothing
        is acknowledged before this returns, and on ext4-like journals the log's own syncs
        have committed these names already, so a new session's first write waits for two
        journal commits, not three. A failure keeps them owed, for the next attempt."""
        owed = self._unsynced_dirs.get(id, [])
        while owed:
            self.ops.fsync_dir(owed[-1])  # the deepest first
            owed.pop()
        self._unsynced_dirs.pop(id, None)

    async def writer_elsewhere(self, id: str) -> bool:
        """Whether another process or instance holds ``id``'s writer lock (read from
        ``/proc/locks``; no lock is taken)."""
        if self._locks.holds(id):
            return False
        path = await asyncio.to_thread(self.reader.find, id)
        if path is None:
            return False
        directory = os.path.dirname(path)
        return await asyncio.to_thread(
            lambda: writer_active(self.ops, directory, held_locks(self.ops))
        )

    def _require_lock(self, id: str) -> None:
        """Refuse to change a stored log without holding its writer lock: the lock is taken by
        ``acquire`` (which lets the caller check what it knows) or by materializing, never
        silently on the way to a write."""
        if not self._locks.holds(id):
            raise SessionNotHeldError(
                f'session "{id}" is not held by this writer (acquire it first, or load/resume '
                "it again): refusing to write"
            )

    async def release(self, id: str) -> None:
        """Release the writer lock of ``id`` and close its append descriptor."""
        self._drop_fd(id)
        self._locks.release(id)
        self._encodings.pop(id, None)

    async def delete(self, id: str) -> bool:
        """Take the session's writer lock (refused while another process holds it), remove
        its log and sync the directory, then remove the lock file and the directory."""
        return await asyncio.to_thread(self._delete, id)

    def _delete(self, id: str) -> bool:
        path = self.reader.find(id)
        if path is None:
            return False
        directory = os.path.dirname(path)
        self._locks.take(id, directory)
        try:
            self._drop_fd(id)
            self.ops.unlink(path)  # the session is gone once this is on disk
            self.ops.fsync_dir(directory)
            self.ops.unlink(os.path.join(directory, LOCK_NAME))
        finally:
            self._locks.release(id)
            self._encodings.pop(id, None)
        self.ops.rmdir(directory)  # a leftover empty directory is not a session
        self.ops.fsync_dir(os.path.dirname(directory))
        return True

    # --- writes -----------------------------------------------------------------------------

    async def append(
        self, header: SessionHeader, events: Sequence[SessionEvent], *, materialized: bool
    ) -> None:
        if materialized:
            await self.start_append(header, events)
            return
        self._refuse_if_poisoned(header.id)
        await self._io().submit(self._materialize, header, encode_batch(events, self.pack))

    def append_inline(
        self, header: SessionHeader, events: Sequence[SessionEvent], *, sole_writer: bool
    ) -> bool:
        """Append on the calling thread when ``sole_writer`` and recent appends fit the
        inline budget (see the module docstring); otherwise decline."""
        if not sole_writer or not 0 < self._append_ms <= self.inline_fsync_budget_ms:
            return False
        self._refuse_if_poisoned(header.id)
        self._append(header, encode_batch(events, self.pack))
        return True

    def start_append(
        self, header: SessionHeader, events: Sequence[SessionEvent]
    ) -> asyncio.Future[None]:
        """Hand the batch's encoding, write and fsync to an I/O thread of this storage's own
        (up to :data:`IO_THREADS`, so many sessions' fsyncs overlap): the event loop spends
        nothing on the bytes of a checkpoint it does not write inline. The batch's events are
        immutable and its runs of deltas sealed, so the thread reads what the loop left."""
        self._refuse_if_poisoned(header.id)
        return self._io().submit(self._encode_append, header, events)

    def _encode_append(self, header: SessionHeader, events: Sequence[SessionEvent]) -> None:
        """Encode and append a batch (on an I/O thread, see :meth:`start_append`)."""
        self._append(header, encode_batch(events, self.pack))

    def _io(self) -> IOThreads:
        """The storage's own I/O threads, for appends (started on first use)."""
        if self._writers is None:
            self._writers = IOThreads(IO_THREADS, "session-jsonl")
        return self._writers

    async def commit_repair(
        self, header: SessionHeader, cut_at: object | None, closers: Sequence[SessionEvent]
    ) -> None:
        await asyncio.to_thread(self._commit_repair, header, cut_at, list(closers))

    async def close(self) -> None:
        if self._writers is not None:  # idle by now: the service drained every id
            self._writers.shutdown()
            self._writers = None
        for id in {**dict.fromkeys(self._locks.ids()), **dict.fromkeys(self._fds)}:
            await self.release(id)

    def _refuse_if_poisoned(self, id: str) -> None:
        poisoned = self._poisoned.get(id)
        if poisoned is not None:
            raise SessionDurabilityError(
                f'session "{id}" refuses appends after an unrecoverable write failure; '
                f"reopen it: {poisoned}"
            ) from poisoned

    def _materialize(self, header: SessionHeader, data: bytes) -> None:
        directory = session_dir(self.root, header)
        encoding = self.new_encoding
        final = os.path.join(directory, encoding.filename)
        # Any log of this id elsewhere (another cwd's project directory, or the other
        # encoding beside it), or a foreign artifact of it (which find refuses), must not be
        # shadowed by a second log; one at ``final`` is create_by_link's to judge (an earlier
        # attempt of this creation?).
        elsewhere = self.reader.find(header.id)
        if elsewhere is not None and elsewhere != final:
            raise _collision(header.id)
        fresh = self._own(header)  # creates the directories
        content = encoding.wrap(header_line(header) + b"\n") + encoding.wrap(data)
        elapsed = create_by_link(self.ops, directory, final, content, fresh=fresh)
        if elapsed is None:
            raise _collision(header.id)
        try:
            self._sync_new_dirs(header.id)
        except BaseException:  # the log's name is not known to be durable: withdraw it
            with contextlib.suppress(OSError):
                self.ops.unlink(final)
            raise
        if elapsed:  # 0.0: an earlier attempt's log was confirmed, nothing was written
            self._append_ms = elapsed

    def _append(
        self, header: SessionHeader, data: bytes, point: str = "append:after-write"
    ) -> None:
        """Append to the session's log under its writer lock. The append descriptor stays
        open while this instance owns the session (saves an open and a close per checkpoint);
        it is closed on failure, release and close."""
        self._require_lock(header.id)
        cached = self._fds.get(header.id)
        path = cached[1] if cached else self.locate(header)
        data = self._encodings[header.id].wrap(data)
        fd = cached[0] if cached else self.ops.open_append(path)
        try:
            size = cached[2] if cached else self.ops.size(fd)  # (only this writer appends)
            self._append_ms = append_synced(self.ops, fd, data, point, size)
        except RollbackFailed as failed:
            self._drop_fd(header.id, fd)
            error = SessionDurabilityError(
                f'failed to roll back append to "{path}": {failed}',
                (failed.error, failed.rollback_error),
            )
            self._poisoned[header.id] = error
            raise error from ExceptionGroup(
                "append and rollback failed", [failed.error, failed.rollback_error]
            )
        except BaseException:
            self._drop_fd(header.id, fd)
            raise
        self._fds[header.id] = (fd, path, size + len(data))

    def _drop_fd(self, id: str, fd: int | None = None) -> None:
        """Forget and close ``id``'s append descriptor (and ``fd``, if another)."""
        cached = self._fds.pop(id, None)
        stale = {fd} if fd is not None else set()
        if cached is not None:
            stale.add(cached[0])
        for each in stale:
            with contextlib.suppress(OSError):
                self.ops.close(each)

    def _commit_repair(
        self, header: SessionHeader, cut_at: object | None, closers: list[SessionEvent]
    ) -> None:
        """Cut a torn tail, then append (in one write, one zstd frame) the lines recovered
        from a torn frame and the closers."""
        self._require_lock(header.id)
        restore = b""
        if cut_at is not None:
            assert isinstance(cut_at, Cut)
            self._drop_fd(header.id)  # its known size is about to change
            truncate_synced(self.ops, self.locate(header), cut_at.offset)
            restore = cut_at.restore
        payload = restore + (encode_batch(closers, self.pack) if closers else b"")
        if payload:
            self._append(header, payload, "repair:after-closer-write")
