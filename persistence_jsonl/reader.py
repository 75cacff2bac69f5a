"""Finding, reading and listing the logs of a JSONL store root, for the storage and for
operator tools. Nothing here writes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from pydantic import ValidationError

from persistence_jsonl.fileio import FileOps, Stat
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


def flat_artifact(path: str) -> SessionFormatUnsupportedError:
    """The reference's refusal of a ``<project>/<id>.jsonl[.zstd]`` file."""
    return SessionFormatUnsupportedError(
        f'session artifact "{path}" uses the unsupported flat-file layout; use a separate '
        "root or move it into a project/session directory before loading"
    )


def other_encoding(path: str) -> SessionFormatUnsupportedError:
    """The reference's refusal of a compressed log where this backend writes plain ones."""
    return SessionFormatUnsupportedError(
        f'session artifact "{path}" uses .jsonl.zstd, but this backend is configured for '
        'compression "none"; use a separate root or select the matching compression mode'
    )


class LogReader:
    """The read side of one store root through one :class:`FileOps`."""

    def __init__(self, root: str, ops: FileOps, max_log_bytes: int = DEFAULT_MAX_LOG_BYTES) -> None:
        self.root = root
        self.ops = ops
        self.max_log_bytes = max_log_bytes
        """The largest log read into memory; a larger one is refused before any read."""

    def _is_dir(self, path: str) -> bool:
        found = self.ops.stat(path)
        return found is not None and found.is_dir

    def find(self, id: str) -> str | None:
        """The one transcript of ``id`` across project directories, or ``None``.

        Only what could be ``id``'s is looked at, so a foreign or unreadable entry elsewhere
        in the root never affects this id (the reference refuses the whole root once it
        sees one). Refused for this id, with the reference's messages: a flat
        ``<project>/<id>.jsonl[.zstd]`` file, a compressed ``session.jsonl.zstd`` in its
        directory. A session directory this process cannot enter raises the real
        ``PermissionError`` naming that directory; a project directory it cannot enter
        raises only when ``id`` is found nowhere else (it might be there)."""
        segment = encode_segment(id)
        found: list[str] = []
        hidden: OSError | None = None
        for project in self.ops.listdir(self.root):
            project_path = os.path.join(self.root, project)
            try:
                candidate = self._candidate(project_path, segment)
            except PermissionError as e:
                if e.filename != project_path:
                    raise  # this id's own directory
                hidden = hidden or e
                continue
            if candidate is not None:
                self._check_confined(candidate)
                found.append(candidate)
        if not found and hidden is not None:
            raise hidden
        if len(found) > 1:
            raise SessionPersistenceCorruptionError(
                f'duplicate JSONL session id "{id}" appears in multiple project directories: '
                + ", ".join(found)
            )
        return found[0] if found else None

    def _candidate(self, project: str, segment: str) -> str | None:
        """The log of the session directory ``segment`` in ``project`` if there is one;
        refuses the foreign artifacts the reference refuses for that id."""
        for suffix in (".jsonl", ".jsonl.zstd"):
            flat = os.path.join(project, segment + suffix)
            entry = self._stat_in(flat, project)
            if entry is not None and not entry.is_dir:
                raise flat_artifact(flat)
        directory = os.path.join(project, segment)
        if self._stat_in(directory, project) is None:
            return None
        zstd = os.path.join(directory, ZSTD_LOG_NAME)
        if self._stat_in(zstd, directory) is not None:
            raise other_encoding(zstd)
        log = os.path.join(directory, LOG_NAME)
        return log if self._stat_in(log, directory) is not None else None

    def _stat_in(self, path: str, directory: str) -> Stat | None:
        """``ops.stat(path)``; a permission error names ``directory``, the one that cannot be
        entered (not a file beneath it that may not exist)."""
        try:
            return self.ops.stat(path)
        except PermissionError as e:
            raise PermissionError(e.errno, e.strerror, directory) from None

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
        """Every materialized session's header and revision. What is not a session is
        skipped, as the reference skips unreadable headers: a file or link planted beside
        the session directories, a directory this process cannot enter, a log that is not a
        regular file. Operator tools see those through :func:`survey`."""
        snapshots: list[SessionSnapshot] = []
        seen: dict[str, str] = {}
        for entry_path in iter_entries(self.ops, self.root):
            if not self._is_dir(entry_path):
                continue  # a file or a link planted beside the sessions: not one
            path = os.path.join(entry_path, LOG_NAME)
            try:
                line = self.first_line(path)
            except (SessionStoreEntryError, PermissionError):
                continue  # a FIFO or link where the log belongs, or no access: unreadable
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
    error: SessionError | OSError | None
    """Why it is not a readable session: a corruption, an unsupported format, an entry that
    is not a directory or not a regular file, or the operating system's refusal to read it
    (a ``PermissionError`` naming the entry)."""
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
    logs' sizes, without writing, following a link, opening a FIFO or taking any lock.

    Nothing is skipped silently: an entry that is not a session (a flat or compressed log
    the reference refuses, a file, a link, a log that is not a regular file, a log whose
    header names another directory, as a copied session directory's does), one this
    process cannot read, and a log over ``max_log_bytes`` (which a load would refuse; it is
    not read) are each reported with the reason, not raised. A directory without any log
    (a session that never wrote) is not listed."""
    reader = LogReader(root, ops or FileOps(), max_log_bytes)
    held = held_locks(reader.ops)
    for entry in iter_entries(reader.ops, root):
        try:
            found = _survey_entry(reader, entry, held)
        except PermissionError as e:
            found = _refused(entry, 0, PermissionError(e.errno, e.strerror, entry))
        if found is not None:
            yield found


def _refused(path: str, size: int, error: SessionError | OSError) -> Surveyed:
    fallback = os.path.basename(os.path.dirname(path) if path.endswith(LOG_NAME) else path)
    return Surveyed(path, fallback, size, None, error, False)


def _survey_entry(
    reader: LogReader, entry: str, held: set[tuple[int, int, int]] | None
) -> Surveyed | None:
    """What ``entry`` (a path in a project directory) is; permission errors propagate."""
    ops = reader.ops
    found = ops.stat(entry)
    if found is None:
        return None  # removed while listing
    if not found.is_dir:
        if entry.endswith((".jsonl", ".jsonl.zstd")):
            return _refused(entry, found.size, flat_artifact(entry))
        problem = f'"{entry}" is {found.kind_name}, not a session directory'
        return _refused(entry, found.size, SessionStoreEntryError(problem))
    zstd = os.path.join(entry, ZSTD_LOG_NAME)
    compressed = ops.stat(zstd)
    if compressed is not None:
        return _refused(zstd, compressed.size, other_encoding(zstd))
    path = os.path.join(entry, LOG_NAME)
    log = ops.stat(path)
    if log is None:
        return None
    if not log.is_file:
        refused = SessionStoreEntryError(f'"{path}" is {log.kind_name}, not a regular file')
        return _refused(path, log.size, refused)
    try:
        if log.size > reader.max_log_bytes:
            raise _too_large(path, log.size, reader.max_log_bytes)
        summary = summarize_log(ops.read_chunks(path, log.size), path)
        reader.check_identity(path, summary.header, None)
    except (SessionError, OSError) as e:
        return _refused(path, log.size, e)
    active = writer_active(ops, entry, held)
    return Surveyed(path, os.path.basename(entry), summary.size, summary, None, active)
