"""Finding, reading and listing the logs of a JSONL store root, for the storage and for
operator tools. Nothing here writes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from pydantic import ValidationError

from persistence_jsonl.fileio import FileOps
from persistence_jsonl.layout import (
    LOG_NAME,
    ZSTD_LOG_NAME,
    encode_segment,
    iter_entries,
    parse_header,
    session_dir,
)
from persistence_jsonl.locks import held_locks, writer_active
from persistence_jsonl.scan import LogSummary, scan_log, summarize_log
from session import (
    SessionError,
    SessionFormatUnsupportedError,
    SessionHeader,
    SessionLogTooLargeError,
    SessionPersistenceCorruptionError,
    SessionStoreEntryError,
)
from session.persistence.api import RawArtifact, SessionSnapshot, StoredLog

__all__ = ["DEFAULT_MAX_LOG_BYTES", "LogReader", "Surveyed", "survey"]

DEFAULT_MAX_LOG_BYTES: Final = 1 << 30
"""The largest log a backend reads into memory by default (1 GiB): a load holds every event,
so a larger (or runaway, or planted) file is refused with a clear error instead of
exhausting memory. Listing a store streams and has no such limit."""

_STABLE_READ_ATTEMPTS = 100
_FIRST_READ = 1 << 16


class LogReader:
    """The read side of one store root through one :class:`FileOps`."""

    def __init__(self, root: str, ops: FileOps, max_log_bytes: int = DEFAULT_MAX_LOG_BYTES) -> None:
        self.root = root
        self.ops = ops
        self.max_log_bytes = max_log_bytes
        """The largest log read into memory; a larger one is refused before any read."""
        self._swept = False

    def sweep(self) -> None:
        """Refuse layouts this storage does not read (flat files, compressed logs), once per
        instance."""
        if self._swept:
            return
        for entry_path in iter_entries(self.ops, self.root):
            if entry_path.endswith((".jsonl", ".jsonl.zstd")) and not self._is_dir(entry_path):
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

    def find(self, id: str) -> str | None:
        """The one transcript of ``id`` across project directories, or ``None``."""
        self.sweep()
        segment = encode_segment(id)
        found: list[str] = []
        for project in self.ops.listdir(self.root):
            candidate = os.path.join(self.root, project, segment, LOG_NAME)
            if self.ops.stat(candidate) is not None:
                self._check_confined(candidate)
                found.append(candidate)
        if len(found) > 1:
            raise SessionPersistenceCorruptionError(
                f'duplicate JSONL session id "{id}" appears in multiple project directories: '
                + ", ".join(found)
            )
        return found[0] if found else None

    def _check_confined(self, path: str) -> None:
        """Refuse a log reached through a planted link: every directory between the root and
        ``path`` must be a real directory (the log itself is opened without following)."""
        directory = os.path.dirname(path)
        while directory != self.root and directory.startswith(self.root):
            found = self.ops.stat(directory)
            if found is None or not found.is_dir:
                raise SessionStoreEntryError(
                    f'"{directory}" is not a real directory (a symbolic link?): refusing to '
                    f'follow it to "{path}"'
                )
            directory = os.path.dirname(directory)

    def load(self, id: str) -> StoredLog | None:
        """The valid stored prefix of ``id``'s log (see ``Storage.load``)."""
        path = self.find(id)
        if path is None:
            return None
        for attempt in range(_STABLE_READ_ATTEMPTS):
            read = self.stable_read(path)
            if read is None:
                return None
            data, revision = read
            try:
                scanned = scan_log(data, path)
                break
            except SessionPersistenceCorruptionError:
                # A repair that cut a torn tail and appended while we read can splice a
                # line; a damage that is really stored is still there when nothing moved.
                if attempt + 1 == _STABLE_READ_ATTEMPTS or self._unchanged(path, revision):
                    raise
        self.check_identity(path, scanned.header, id)
        cut_at = scanned.committed_bytes if scanned.torn else None
        return StoredLog(scanned.header, scanned.events, revision, cut_at, len(data))

    def revision(self, id: str) -> str | None:
        """The revision of ``id``'s log now (a ``stat``), or ``None``."""
        path = self.find(id)
        found = None if path is None else self.ops.stat(path)
        return None if found is None else found.revision

    def stable_read(self, path: str) -> tuple[bytes, str] | None:
        """The file's first ``size`` bytes for the size a ``stat`` saw, and that stat's
        revision. A log only grows while it is written (committed bytes are never rewritten),
        so a writer appending meanwhile does not disturb the read: the bytes past that size
        are simply not read. Only a file that shrank or was replaced meanwhile is read again.
        """
        for _ in range(_STABLE_READ_ATTEMPTS):
            before = self.ops.stat(path)
            if before is None:
                return None
            if before.size > self.max_log_bytes:
                raise _too_large(path, before.size, self.max_log_bytes)
            data = self.ops.read_prefix(path, before.size)
            after = self.ops.stat(path)
            if data is None or after is None:
                return None
            same_file = (before.dev, before.ino) == (after.dev, after.ino)
            if same_file and len(data) == before.size <= after.size:
                return data, before.revision
        raise SessionError(f'"{path}" kept shrinking or being replaced while it was being read')

    def _unchanged(self, path: str, revision: str) -> bool:
        found = self.ops.stat(path)
        return found is not None and found.revision == revision

    def check_identity(self, path: str, header: SessionHeader, id: str | None) -> None:
        """Refuse a log whose header names another session or belongs at another path."""
        if id is not None and header.id != id:
            raise SessionPersistenceCorruptionError(
                f'corrupt session log "{path}": requested id "{id}" does not match header id '
                f'"{header.id}"'
            )
        try:
            expected = os.path.join(session_dir(self.root, header), LOG_NAME)
        except ValueError:
            raise SessionPersistenceCorruptionError(
                f'corrupt session log "{path}": header id cannot name a storage path'
            ) from None
        if expected != path and self.ops.realpath(expected) != self.ops.realpath(path):
            raise SessionPersistenceCorruptionError(
                f'corrupt session log "{path}": header id "{header.id}" and cwd identify '
                f'"{expected}"'
            )

    def first_line(self, path: str) -> bytes | None:
        """The header line of the log at ``path`` (without newline); ``None`` when the file
        is missing or has no complete first line."""
        first = self.ops.read_prefix(path, _FIRST_READ)
        while first is not None and b"\n" not in first:
            longer = self.ops.read_prefix(path, len(first) * 4)
            if longer is None or len(longer) == len(first):
                return None
            first = longer
        return None if not first else first[: first.index(b"\n")]

    def snapshots(self) -> list[SessionSnapshot]:
        """Every materialized session's header and revision (unreadable headers skipped)."""
        self.sweep()
        snapshots: list[SessionSnapshot] = []
        seen: dict[str, str] = {}
        for entry_path in iter_entries(self.ops, self.root):
            if not self._is_dir(entry_path):
                continue  # a file or a link planted beside the sessions: not one
            path = os.path.join(entry_path, LOG_NAME)
            try:
                line = self.first_line(path)
            except SessionStoreEntryError:
                continue  # a FIFO or link where the log belongs: unreadable, like a bad header
            if line is None:
                continue
            try:
                header = parse_header(line, path, check_version=False)
            except (SessionError, ValidationError):
                continue
            self.check_identity(path, header, None)
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

    def raw(self, id: str) -> RawArtifact | None:
        """The stored bytes of ``id``'s log, torn tail included."""
        path = self.find(id)
        read = None if path is None else self.stable_read(path)
        if path is None or read is None:
            return None
        data = read[0]
        end = data.find(b"\n")
        invalid = f'corrupt session log: invalid header line in "{path}"'
        if end < 0:
            raise SessionPersistenceCorruptionError(invalid)
        try:
            header = parse_header(data[:end], path, check_version=False)
        except (SessionError, ValidationError) as e:
            raise SessionPersistenceCorruptionError(invalid) from e
        self.check_identity(path, header, id)
        return RawArtifact(header, LOG_NAME, data)


@dataclass(frozen=True, slots=True)
class Surveyed:
    """One entry of a project directory, as found on disk, for operator tools: a session's
    log, or whatever else was planted where a session directory belongs."""

    path: str
    """The log file (or the entry itself, when it is not a session directory)."""
    fallback_id: str
    """The id its directory names (what to show when the header cannot be read)."""
    size: int
    """Its length in bytes."""
    summary: LogSummary | None
    """The header, event count, last turn bracket and torn tail (a header of any version),
    or ``None`` when unreadable."""
    error: SessionError | None
    """Why it is unreadable: a corruption, an unsupported format, or an entry that is not a
    directory or not a regular file."""
    writer_active: bool
    """Whether a live writer (any process) holds its writer lock now."""


def _too_large(path: str, size: int, limit: int) -> SessionLogTooLargeError:
    return SessionLogTooLargeError(
        f'session log "{path}" has {size:,} bytes, more than max_log_bytes ({limit:,}); '
        "nothing was read: open it with a larger max_log_bytes"
    )


def survey(
    root: str, ops: FileOps | None = None, max_log_bytes: int = DEFAULT_MAX_LOG_BYTES
) -> Iterator[Surveyed]:
    """Every session directory under ``root`` and anything planted beside them, one at a
    time, in memory bounded by :data:`~persistence_jsonl.scan.MAX_SUMMARY_LINE` whatever the
    logs' sizes, without writing, following a link, opening a FIFO or taking any lock. An
    unreadable entry is reported, not raised; so is a log over ``max_log_bytes``, which a
    load would refuse (it is not read). A directory without a log (a session that never
    wrote) is not listed."""
    ops = ops or FileOps()
    held = held_locks(ops)
    for entry in iter_entries(ops, root):
        fallback = os.path.basename(entry)
        found = ops.stat(entry)
        if found is None:
            continue  # removed while listing
        if not found.is_dir:
            problem = f'"{entry}" is {found.kind_name}, not a session directory'
            yield Surveyed(
                entry, fallback, found.size, None, SessionStoreEntryError(problem), False
            )
            continue
        path = os.path.join(entry, LOG_NAME)
        log = ops.stat(path)
        if log is None:
            continue
        if not log.is_file:
            refused = SessionStoreEntryError(f'"{path}" is {log.kind_name}, not a regular file')
            yield Surveyed(path, fallback, log.size, None, refused, False)
            continue
        summary: LogSummary | None = None
        error: SessionError | None = None
        try:
            if log.size > max_log_bytes:
                raise _too_large(path, log.size, max_log_bytes)
            summary = summarize_log(ops.read_chunks(path, log.size), path)
        except SessionError as e:
            error = e
        active = summary is not None and writer_active(ops, entry, held)
        size = summary.size if summary is not None else log.size
        yield Surveyed(path, fallback, size, summary, error, active)
