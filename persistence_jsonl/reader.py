"""Finding, reading and listing the logs of a JSONL store root, for the storage and for
operator tools. Nothing here writes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

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
from persistence_jsonl.scan import ScannedLog, scan_log
from session import (
    SessionError,
    SessionFormatUnsupportedError,
    SessionHeader,
    SessionPersistenceCorruptionError,
    SessionStoreEntryError,
)
from session.persistence.api import RawArtifact, SessionSnapshot, StoredLog

__all__ = ["LogReader", "Surveyed", "survey"]

_STABLE_READ_ATTEMPTS = 100
_FIRST_READ = 1 << 16


class LogReader:
    """The read side of one store root through one :class:`FileOps`."""

    def __init__(self, root: str, ops: FileOps) -> None:
        self.root = root
        self.ops = ops
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
    """One session log under a root, as found on disk, for operator tools."""

    path: str
    """The log file."""
    fallback_id: str
    """The id its directory names (what to show when the header cannot be read)."""
    size: int
    """Its length in bytes."""
    scanned: ScannedLog | None
    """The header and committed events (a header of any version), or ``None`` when unreadable."""
    error: SessionError | None
    """Why it is unreadable: a corruption or an unsupported format."""
    writer_active: bool
    """Whether a live writer (any process) holds its writer lock now."""


def survey(root: str, ops: FileOps | None = None) -> Iterator[Surveyed]:
    """Every session log under ``root``, scanned one at a time (never the whole store in
    memory), without writing or taking any lock. One unreadable log is reported, not raised."""
    ops = ops or FileOps()
    held = held_locks(ops)
    for entry in iter_entries(ops, root):
        path = os.path.join(entry, LOG_NAME)
        found = ops.stat(path)
        data = ops.read(path) if found is not None and not found.is_dir else None
        if data is None:
            continue
        scanned: ScannedLog | None = None
        error: SessionError | None = None
        try:
            scanned = scan_log(data, path, check_version=False)
        except SessionError as e:
            error = e
        active = scanned is not None and writer_active(ops, entry, held)
        yield Surveyed(path, os.path.basename(entry), len(data), scanned, error, active)
