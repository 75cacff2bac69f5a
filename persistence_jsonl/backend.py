"""``JsonlPersistence``: one append-only, fsync'd JSONL log per session, byte-compatible with
the reference's ``session-persistence-jsonl`` (compression ``none``)."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from persistence_jsonl.fileio import FileOps, failpoint
from persistence_jsonl.layout import (
    LOCK_NAME,
    LOG_NAME,
    ZSTD_LOG_NAME,
    check_storable_id,
    encode_header,
    encode_segment,
    parse_header,
    project_dir,
    session_dir,
)
from persistence_jsonl.rows import BatchEncoder, encode_batch
from persistence_jsonl.scan import scan_log
from recovery import closers as default_repair
from session import (
    SessionCollisionError,
    SessionDurabilityError,
    SessionError,
    SessionEvent,
    SessionFormatUnsupportedError,
    SessionHeader,
    SessionPersistenceCorruptionError,
)
from session.persistence.api import RawArtifact, SessionSnapshot, StoredLog
from session.persistence.coordinator import PersistenceCoordinator, Repair
from session.persistence.write_behind import Scheduler

__all__ = ["JsonlPersistence"]

_STABLE_READ_ATTEMPTS = 100


class JsonlPersistence(PersistenceCoordinator):
    """Sessions as ``<root>/<project dir>/<encoded id>/session.jsonl``.

    Guarantees: an ``append`` that returned is on stable storage (written and fsync'd; the
    first one creates the file atomically with its header via a temp file, ``link`` and a
    directory fsync); a failed append leaves the file as it was, or, if even the rollback
    failed, raises :class:`SessionDurabilityError` and refuses further appends to that session
    from this instance; committed bytes are never rewritten (repair only cuts a torn tail and
    appends closers). Files are created 0600, directories 0700.

    Where the I/O runs: in a worker thread, so fsyncs of different sessions overlap and the
    event loop keeps running, with one exception. While exactly one session is live, a flush
    barrier (a checkpoint) that appends to its already created log writes and fsyncs on the
    event-loop thread: a thread round trip costs about as much as a fast fsync, and the agent
    is waiting for that checkpoint anyway. Background (batching-window) writes stay in the
    worker thread. Inline checkpoints stop as soon as the latest write-and-fsync took longer
    than ``inline_fsync_budget_ms`` (a slow disk) and resume when one is fast again, so a slow
    disk blocks the loop at most once; ``0`` keeps all I/O off the loop.
    """

    name = "session-persistence-jsonl"

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        write_batch_max_delay_ms: int = 200,
        prepared_session_cache_size: int = 5,
        pack_chunks: bool = True,
        repair: Repair = default_repair,
        ops: FileOps | None = None,
        scheduler: Scheduler | None = None,
        inline_fsync_budget_ms: float = 2.0,
    ) -> None:
        if not isinstance(inline_fsync_budget_ms, int | float) or not (
            0 <= inline_fsync_budget_ms < float("inf")
        ):
            raise TypeError("inline_fsync_budget_ms must be a finite number >= 0")
        super().__init__(
            repair=repair,
            write_batch_max_delay_ms=write_batch_max_delay_ms,
            prepared_session_cache_size=prepared_session_cache_size,
            scheduler=scheduler,
        )
        self.root = os.path.abspath(os.fspath(root))
        """The absolute store root."""
        self.pack_chunks = pack_chunks
        """Whether appends pack runs of streaming deltas into rows (reading always unpacks)."""
        self.ops = ops or FileOps()
        """The system-call seam (replace it to inject faults)."""
        existing = self.ops.stat(self.root)
        if existing is not None and not existing.is_dir:
            raise NotADirectoryError(f'session store root "{self.root}" is not a directory')
        self._swept = False
        self._poisoned: dict[str, SessionDurabilityError] = {}
        self._locks: dict[str, int] = {}
        self._fds: dict[str, tuple[int, str]] = {}
        self._encoders: dict[str, BatchEncoder] = {}
        self.inline_fsync_budget_ms = float(inline_fsync_budget_ms)
        """Longest latest write-and-fsync (ms) for which a single live session's checkpoint
        still runs on the event-loop thread; ``0`` never does."""
        self._append_ms = 0.0  # how long the latest write-and-fsync took; 0 = not measured

    # --- layout -----------------------------------------------------------------------------

    def locate(self, header: SessionHeader) -> str:
        """The transcript path of a session (it may not exist yet)."""
        return os.path.join(session_dir(self.root, header), LOG_NAME)

    def _sweep(self) -> None:
        """Refuse layouts this backend does not read, once per instance."""
        if self._swept:
            return
        for project in self.ops.listdir(self.root):
            project_path = os.path.join(self.root, project)
            for entry in self.ops.listdir(project_path) if self._is_dir(project_path) else ():
                entry_path = os.path.join(project_path, entry)
                if entry.endswith((".jsonl", ".jsonl.zstd")) and not self._is_dir(entry_path):
                    raise SessionFormatUnsupportedError(
                        f'session artifact "{entry_path}" uses the unsupported flat-file layout; '
                        "use a separate root or move it into a project/session directory "
                        "before loading"
                    )
                zstd = os.path.join(entry_path, ZSTD_LOG_NAME)
                if self.ops.stat(zstd) is not None:
                    raise SessionFormatUnsupportedError(
                        f'session artifact "{zstd}" uses .jsonl.zstd, but this backend is '
                        'configured for compression "none"; use a separate root or select the '
                        "matching compression mode"
                    )
        self._swept = True

    def _is_dir(self, path: str) -> bool:
        found = self.ops.stat(path)
        return found is not None and found.is_dir

    def _find(self, id: str) -> str | None:
        """The one transcript of ``id`` across project directories, or ``None``."""
        self._sweep()
        segment = encode_segment(id)
        found: list[str] = []
        for project in self.ops.listdir(self.root):
            candidate = os.path.join(self.root, project, segment, LOG_NAME)
            if self.ops.stat(candidate) is not None:
                found.append(candidate)
        if len(found) > 1:
            raise SessionPersistenceCorruptionError(
                f'duplicate JSONL session id "{id}" appears in multiple project directories: '
                + ", ".join(found)
            )
        return found[0] if found else None

    def _check_identity(self, path: str, header: SessionHeader, id: str | None) -> None:
        if id is not None and header.id != id:
            raise SessionPersistenceCorruptionError(
                f'corrupt session log "{path}": requested id "{id}" does not match header id '
                f'"{header.id}"'
            )
        try:
            expected = self.locate(header)
        except ValueError:
            raise SessionPersistenceCorruptionError(
                f'corrupt session log "{path}": header id cannot name a storage path'
            ) from None
        if expected != path and self.ops.realpath(expected) != self.ops.realpath(path):
            raise SessionPersistenceCorruptionError(
                f'corrupt session log "{path}": header id "{header.id}" and cwd identify '
                f'"{expected}"'
            )

    def _stable_read(self, path: str) -> tuple[bytes, str] | None:
        """The file's bytes and the revision of exactly those bytes (stat, read, stat until
        the two stats agree)."""
        for _ in range(_STABLE_READ_ATTEMPTS):
            before = self.ops.stat(path)
            if before is None:
                return None
            data = self.ops.read(path)
            after = self.ops.stat(path)
            if data is None or after is None:
                return None
            if before.revision == after.revision and len(data) == after.size:
                return data, after.revision
        raise SessionError(f'"{path}" kept changing while it was being read')

    async def create(self, header: SessionHeader | Mapping[str, Any]) -> None:
        """As :meth:`PersistenceCoordinator.create`, and first refuse, with a ``ValueError``
        that says why, an id this layout cannot store (empty, too long, a lone surrogate)."""
        raw_id = header.id if isinstance(header, SessionHeader) else header.get("id")
        if isinstance(raw_id, str):
            check_storable_id(raw_id)
        await super().create(header)

    # --- single writer across processes ----------------------------------------------------

    def _own(self, header: SessionHeader) -> None:
        """Hold the session's writer lock (``session.lock`` beside its log) from the first
        write or repair until the session is released or the backend closes. Raises
        :class:`SessionCollisionError` naming the pid of the process that holds it."""
        if header.id in self._locks:
            return
        directory = session_dir(self.root, header)
        parent = os.path.dirname(self.root)
        for path in (self.root, os.path.join(self.root, project_dir(header.cwd)), directory):
            if self.ops.mkdir(path):
                self.ops.fsync_dir(parent)
            parent = path
        self._lock_dir(header.id, directory)

    def _lock_dir(self, id: str, directory: str) -> None:
        lock_path = os.path.join(directory, LOCK_NAME)
        fd = self.ops.lock(lock_path)
        if fd is None:
            holder = (self.ops.read(lock_path) or b"?").decode("ascii", "replace").strip()
            raise SessionCollisionError(
                f'session "{id}" is being written by another writer (pid {holder or "?"}); '
                f'its lock is "{lock_path}"'
            )
        self._locks[id] = fd

    async def acquire(self, id: str) -> None:
        """Take the writer lock of a stored session before adopting, repairing or appending
        to it (a new session is locked when it materializes)."""
        if id not in self._locks:
            await asyncio.to_thread(self._acquire, id)

    def _acquire(self, id: str) -> None:
        path = self._find(id)
        if path is not None:
            self._lock_dir(id, os.path.dirname(path))

    async def release(self, id: str) -> None:
        """Release the writer lock of ``id`` (its live session left the store) and close its
        append descriptor."""
        self._encoders.pop(id, None)
        cached = self._fds.pop(id, None)
        if cached is not None:
            with contextlib.suppress(OSError):
                self.ops.close(cached[0])
        fd = self._locks.pop(id, None)
        if fd is not None:
            self.ops.unlock(fd)

    # --- storage hooks (blocking work in one worker-thread hop, except inline checkpoints) ---

    async def load_stored(self, id: str) -> StoredLog | None:
        return await asyncio.to_thread(self._load_stored, id)

    def _load_stored(self, id: str) -> StoredLog | None:
        path = self._find(id)
        if path is None:
            return None
        read = self._stable_read(path)
        if read is None:
            return None
        data, revision = read
        scanned = scan_log(data, path)
        self._check_identity(path, scanned.header, id)
        torn = scanned.committed_bytes if scanned.torn else None
        return StoredLog(scanned.header, scanned.events, revision, torn)

    async def read_stored_revision(self, id: str) -> str | None:
        return await asyncio.to_thread(self._read_revision, id)

    def _read_revision(self, id: str) -> str | None:
        path = self._find(id)
        found = None if path is None else self.ops.stat(path)
        return None if found is None else found.revision

    async def append_batch(
        self, header: SessionHeader, events: Sequence[SessionEvent], materialized: bool
    ) -> None:
        self._refuse_if_poisoned(header.id)
        data = self._encode(header.id, events)
        if materialized:
            await asyncio.to_thread(self._owned_append, header, data)
        else:
            await asyncio.to_thread(self._materialize, header, data)

    def append_batch_now(self, header: SessionHeader, events: Sequence[SessionEvent]) -> bool:
        """Append on the calling thread while exactly one session is live and recent appends
        fit the inline budget (see the class docstring); otherwise decline."""
        if len(self._live) != 1 or not 0 < self._append_ms <= self.inline_fsync_budget_ms:
            return False
        self._refuse_if_poisoned(header.id)
        self._owned_append(header, self._encode(header.id, events))
        return True

    def _refuse_if_poisoned(self, id: str) -> None:
        poisoned = self._poisoned.get(id)
        if poisoned is not None:
            raise SessionDurabilityError(
                f'session "{id}" refuses appends after an unrecoverable write failure; '
                f"reopen it: {poisoned}"
            ) from poisoned

    def prepare_event(self, id: str, event: SessionEvent) -> None:
        """Encode a live session's event as it is committed (the checkpoint then only joins
        lines and packs runs)."""
        encoder = self._encoders.get(id)
        if encoder is None:
            encoder = self._encoders[id] = BatchEncoder(self.pack_chunks)
        encoder.prepare(event)

    def _encode(self, id: str, events: Sequence[SessionEvent]) -> bytes:
        encoder = self._encoders.get(id)
        if encoder is None:
            return encode_batch(events, self.pack_chunks)
        return encoder.encode(events)

    def _owned_append(self, header: SessionHeader, data: bytes) -> None:
        self._own(header)
        cached = self._fds.get(header.id)  # its path was located when it was opened
        self._append_bytes(header, cached[1] if cached else self.locate(header), data)

    def _materialize(self, header: SessionHeader, data: bytes) -> None:
        self._sweep()
        directory = session_dir(self.root, header)
        final = os.path.join(directory, LOG_NAME)
        self._own(header)  # creates the directories, durably
        content = encode_header(header) + b"\n" + data
        if self.ops.stat(final) is not None:
            if self.ops.read(final) == content:
                # An earlier attempt of this very materialization linked the log but failed
                # before confirming it: finish it instead of refusing our own bytes.
                self.ops.fsync_dir(directory)
                return
            raise SessionCollisionError(
                f'refusing to materialize "{header.id}": a log already exists on disk '
                "(load/resume it instead)"
            )
        for name in self.ops.listdir(directory):  # temp files left by a crash
            if name.startswith(LOG_NAME + ".") and name.endswith(".tmp"):
                self.ops.unlink(os.path.join(directory, name))
        temp = f"{final}.{secrets.token_hex(6)}.tmp"
        fd = self.ops.open_exclusive(temp)
        try:
            self._write_and_sync(fd, content, "materialize:after-temp-write")
        except BaseException:
            self.ops.close(fd)
            with contextlib.suppress(OSError):
                self.ops.unlink(temp)
            raise
        self.ops.close(fd)
        try:
            self.ops.link(temp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                self.ops.unlink(temp)
            raise
        failpoint("materialize:after-link")
        try:
            self.ops.fsync_dir(directory)
        except BaseException:
            # The name is not known to be durable: withdraw it, so the caller's retry
            # materializes again instead of finding a log it was told was not written.
            with contextlib.suppress(OSError):
                self.ops.unlink(final)
            with contextlib.suppress(OSError):
                self.ops.unlink(temp)
            raise
        failpoint("materialize:after-dir-fsync")
        with contextlib.suppress(OSError):  # the log is durable; a stale temp is cleaned later
            self.ops.unlink(temp)

    def _append_bytes(
        self, header: SessionHeader, path: str, data: bytes, point: str = "append:after-write"
    ) -> None:
        # The append descriptor stays open while this instance owns the session (saves an
        # open and a close per checkpoint); it is closed on failure, release and close.
        cached = self._fds.get(header.id)
        fd = cached[0] if cached is not None and cached[1] == path else None
        if fd is None:
            fd = self.ops.open_append(path)
        try:
            size = self.ops.size(fd)
            try:
                self._write_and_sync(fd, data, point)
            except Exception as error:
                self._roll_back(header, path, fd, size, error)
                raise
        except BaseException:
            self._fds.pop(header.id, None)
            with contextlib.suppress(OSError):
                self.ops.close(fd)
            raise
        if cached is None or cached[0] != fd:
            if cached is not None:
                with contextlib.suppress(OSError):
                    self.ops.close(cached[0])
            self._fds[header.id] = (fd, path)

    def _write_and_sync(self, fd: int, data: bytes, point: str) -> None:
        """Write all of ``data`` and fsync, noting how long that took (the latest time decides
        whether the next checkpoint may run inline)."""
        start = time.perf_counter()
        self.ops.write_all(fd, data)
        failpoint(point)
        self.ops.fsync(fd)
        self._append_ms = (time.perf_counter() - start) * 1000

    def _roll_back(
        self, header: SessionHeader, path: str, fd: int, size: int, error: Exception
    ) -> None:
        """Cut a failed append back to ``size`` and make that durable; if that fails too, the
        file's state is unknown: poison the session and raise both errors."""
        try:
            self.ops.truncate(fd, size)
            self.ops.fsync(fd)
        except Exception as rollback_error:
            failure = SessionDurabilityError(
                f'failed to roll back append to "{path}": {error}; rollback: {rollback_error}',
                (error, rollback_error),
            )
            self._poisoned[header.id] = failure
            raise failure from ExceptionGroup("append and rollback failed", [error, rollback_error])

    async def commit_repair(
        self, header: SessionHeader, torn_marker: object | None, closers: Sequence[SessionEvent]
    ) -> None:
        await asyncio.to_thread(self._commit_repair, header, torn_marker, list(closers))

    def _commit_repair(
        self,
        header: SessionHeader,
        torn_marker: object | None,
        closers: builtins.list[SessionEvent],
    ) -> None:
        path = self.locate(header)
        self._own(header)
        if torn_marker is not None:
            assert isinstance(torn_marker, int)
            fd = self.ops.open_readwrite(path)
            try:
                self.ops.truncate(fd, torn_marker)
                failpoint("repair:after-truncate")
                self.ops.fsync(fd)
            finally:
                self.ops.close(fd)
        if closers:
            data = encode_batch(closers, self.pack_chunks)
            self._append_bytes(header, path, data, "repair:after-closer-write")

    async def list_stored(self) -> builtins.list[SessionSnapshot]:
        return await asyncio.to_thread(self._list_stored)

    def _list_stored(self) -> builtins.list[SessionSnapshot]:
        self._sweep()
        snapshots: builtins.list[SessionSnapshot] = []
        seen: dict[str, str] = {}
        for project in self.ops.listdir(self.root):
            project_path = os.path.join(self.root, project)
            if not self._is_dir(project_path):
                continue
            for entry in self.ops.listdir(project_path):
                path = os.path.join(project_path, entry, LOG_NAME)
                first = self.ops.read_prefix(path, 1 << 16)
                if first is None:
                    continue
                while b"\n" not in first:
                    longer = self.ops.read_prefix(path, len(first) * 4)
                    if longer is None or len(longer) == len(first):
                        first = b""
                        break
                    first = longer
                if not first:
                    continue
                try:
                    header = parse_header(first[: first.index(b"\n")], path, check_version=False)
                except (SessionError, ValidationError):
                    continue
                self._check_identity(path, header, None)
                if header.id in seen:
                    raise SessionPersistenceCorruptionError(
                        f'duplicate JSONL session id "{header.id}" appears in multiple project '
                        f"directories: {seen[header.id]}, {path}"
                    )
                seen[header.id] = path
                found = self.ops.stat(path)
                if found is not None:
                    snapshots.append(SessionSnapshot(header, found.revision))
        return snapshots

    async def read_raw(self, id: str) -> RawArtifact | None:
        return await asyncio.to_thread(self._read_raw, id)

    def _read_raw(self, id: str) -> RawArtifact | None:
        path = self._find(id)
        read = None if path is None else self._stable_read(path)
        if path is None or read is None:
            return None
        data = read[0]
        end = data.find(b"\n")
        if end < 0:
            raise SessionPersistenceCorruptionError(
                f'corrupt session log: invalid header line in "{path}"'
            )
        try:
            header = parse_header(data[:end], path, check_version=False)
        except (SessionError, ValidationError) as e:
            raise SessionPersistenceCorruptionError(
                f'corrupt session log: invalid header line in "{path}"'
            ) from e
        self._check_identity(path, header, id)
        return RawArtifact(header, LOG_NAME, data)

    async def close(self) -> None:
        self._encoders.clear()
        for id in {**dict.fromkeys(self._locks), **dict.fromkeys(self._fds)}:
            await self.release(id)
