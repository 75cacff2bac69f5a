"""Finding, reading and listing the logs of a JSONL store root, plain or compressed, for the
storage and for operator tools. Nothing here writes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

from pydantic import ValidationError

from agent_session.persistence_jsonl.encoding import (
    FLAT_SUFFIXES,
    PLAIN,
    ZSTD,
    Compression,
    encoding_of,
    logs_in,
)
from agent_session.persistence_jsonl.fileio import FileOps, Stat
from agent_session.persistence_jsonl.layout import (
    MAX_SEGMENT,
    encode_segment,
    iter_entries,
    parse_header,
    session_dir,
)
from agent_session.session import (
    SessionChangedError,
    SessionError,
    SessionFormatUnsupportedError,
    SessionHeader,
    SessionLogTooLargeError,
    SessionPersistenceCorruptionError,
    SessionStoreEntryError,
)
from agent_session.session.persistence.kit import RawArtifact, SessionSnapshot, StoredLog

__all__ = ["DEFAULT_MAX_LOG_BYTES", "Cut", "LogReader", "flat_artifact", "too_large"]

DEFAULT_MAX_LOG_BYTES: Final = 1 << 30
"""The largest log a backend reads into memory by default (1 GiB): a load holds every event,
so a larger (or runaway, or planted) file is refused with a clear error instead of
exhausting memory. Listing a store streams and has no such limit."""

_STABLE_READ_ATTEMPTS = 100


def flat_artifact(path: str) -> SessionFormatUnsupportedError:
    """The reference's refusal of a ``<project>/<id>.jsonl[.zstd]`` file."""
    return SessionFormatUnsupportedError(
        f'session artifact "{path}" uses the unsupported flat-file layout; use a separate '
        "root or move it into a project/session directory before loading"
    )


def other_encoding(path: str, mode: str) -> SessionFormatUnsupportedError:
    """The reference's refusal of a log in the encoding a backend is not configured for."""
    return SessionFormatUnsupportedError(
        f'session artifact "{path}" uses {encoding_of(path).suffix}, but this backend is '
        f'configured for compression "{mode}"; use a separate root or select the matching '
        "compression mode"
    )


def both_encodings(directory: str) -> SessionFormatUnsupportedError:
    """The refusal of a session directory holding a plain and a compressed log."""
    return SessionFormatUnsupportedError(
        f'session directory "{directory}" holds both {PLAIN.filename} and {ZSTD.filename}: '
        "which one is the session's is unknown (an interrupted `agent-session convert`? run "
        "it again); otherwise move one of them away"
    )


@dataclass(frozen=True, slots=True)
class Cut:
    """Where a repair cuts a torn log, and the plaintext lines it appends again first (a
    torn zstd frame's recovered lines; nothing for a plain log)."""

    offset: int
    restore: bytes = b""


class LogReader:
    """The read side of one store root through one :class:`FileOps`."""

    def __init__(
        self,
        root: str,
        ops: FileOps,
        max_log_bytes: int = DEFAULT_MAX_LOG_BYTES,
        compression: Compression = "auto",
    ) -> None:
        self.root = root
        self.ops = ops
        self.max_log_bytes = max_log_bytes
        """The largest log read into memory, and the most plaintext a compressed log may
        expand to; a larger file is refused before any read."""
        self.compression: Compression = compression
        """Which encodings are read: both (``auto``), or only one, as the reference."""

    def _is_dir(self, path: str) -> bool:
        found = self.ops.stat(path)
        return found is not None and found.is_dir

    def find(self, id: str) -> str | None:
        """The one transcript of ``id`` across project directories, or ``None``.

        Only what could be ``id``'s is looked at, so a foreign or unreadable entry elsewhere
        in the root never affects this id (the reference refuses the whole root once it
        sees one). Refused for this id, with the reference's messages: a flat
        ``<project>/<id>.jsonl[.zstd]`` file; a log in the encoding the reader is not
        configured for; both encodings in one directory (``auto``). A session directory
        this process cannot enter raises the real ``PermissionError`` naming that
        directory; a project directory it cannot enter raises only when ``id`` is found
        nowhere else (it might be there)."""
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
        for suffix in FLAT_SUFFIXES:
            if len(os.fsencode(segment + suffix)) > MAX_SEGMENT:
                continue  # a name no file system entry can have: no such artifact
            flat = os.path.join(project, segment + suffix)
            entry = self._stat_in(flat, project)
            if entry is not None and not entry.is_dir:
                raise flat_artifact(flat)
        directory = os.path.join(project, segment)
        if self._stat_in(directory, project) is None:
            return None
        found = [path for path, _ in logs_in(directory, lambda p: self._stat_in(p, directory))]
        for path in found:
            if self.compression not in ("auto", encoding_of(path).name):
                raise other_encoding(path, self.compression)
        if len(found) > 1:
            raise both_encodings(directory)
        return found[0] if found else None

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
                scanned = encoding_of(path).scan(data, path, self.max_log_bytes)
                break
            except SessionPersistenceCorruptionError:
                # A repair that cut a torn tail and appended while we read can splice a
                # line; a damage that is really stored is still there when nothing moved.
                if attempt + 1 == _STABLE_READ_ATTEMPTS or self._unchanged(path, revision):
                    raise
        self.check_identity(path, scanned.header, id)
        cut_at = Cut(scanned.committed_bytes, scanned.recovered) if scanned.torn else None
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
                raise too_large(path, before.size, self.max_log_bytes)
            data = self.ops.read_prefix(path, before.size)
            after = self.ops.stat(path)
            if data is None or after is None:
                return None
            same_file = (before.dev, before.ino) == (after.dev, after.ino)
            if same_file and len(data) == before.size <= after.size:
                return data, before.revision
        raise SessionChangedError(
            f'"{path}" kept shrinking or being replaced while it was being read'
        )

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
            expected = os.path.join(session_dir(self.root, header), os.path.basename(path))
        except ValueError:
            raise SessionPersistenceCorruptionError(
                f'corrupt session log "{path}": header id cannot name a storage path'
            ) from None
        if expected != path and self.ops.realpath(expected) != self.ops.realpath(path):
            raise SessionPersistenceCorruptionError(
                f'corrupt session log "{path}": header id "{header.id}" and cwd identify '
                f'"{expected}"'
            )

    def log_in(self, directory: str) -> str | None:
        """The one log of a session directory this reader reads, or ``None`` (none, both
        encodings, or only the other one)."""
        found = [
            path
            for path, _ in logs_in(directory, self.ops.stat)
            if self.compression in ("auto", encoding_of(path).name)
        ]
        return found[0] if len(found) == 1 else None

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
            try:
                path = self.log_in(entry_path)
                line = None if path is None else self._first_line(path)
            except (SessionError, PermissionError):
                continue  # a FIFO or link where the log belongs, no access, a bad frame
            if path is None or line is None:
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

    def _first_line(self, path: str) -> bytes | None:
        return encoding_of(path).first_line(self.ops, path, self.max_log_bytes)

    def raw(self, id: str) -> RawArtifact | None:
        """The stored plaintext of ``id``'s log, as the reference's raw artifact holds it (a
        plain log's torn tail included; a torn zstd frame left out)."""
        path = self.find(id)
        read = None if path is None else self.stable_read(path)
        if path is None or read is None:
            return None
        encoding = encoding_of(path)
        data = encoding.raw(read[0], path, self.max_log_bytes)
        end = data.find(b"\n")
        invalid = f'corrupt session log: invalid header line in "{path}"'
        if end < 0:
            raise SessionPersistenceCorruptionError(invalid)
        try:
            header = parse_header(data[:end], path, check_version=False)
        except (SessionError, ValidationError) as e:
            raise SessionPersistenceCorruptionError(invalid) from e
        self.check_identity(path, header, id)
        return RawArtifact(header, encoding.filename, data)


def too_large(path: str, size: int, limit: int) -> SessionLogTooLargeError:
    """The refusal of a log over ``max_log_bytes``, before anything is read."""
    return SessionLogTooLargeError(
        f'session log "{path}" has {size:,} bytes, more than max_log_bytes ({limit:,}); '
        "nothing was read: open it with a larger max_log_bytes"
    )
