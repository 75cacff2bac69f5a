"""What is in a store root, entry by entry, for operator tools (``ls``, ``verify``):
sessions of either encoding and anything planted beside them, read one at a time without
writing, following a link, opening a FIFO or taking any lock."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from agent_session.persistence_jsonl.encoding import (
    FLAT_SUFFIXES,
    PLAIN,
    ZSTD,
    encoding_of,
    logs_in,
)
from agent_session.persistence_jsonl.fileio import FileOps
from agent_session.persistence_jsonl.layout import iter_entries
from agent_session.persistence_jsonl.locks import held_locks, writer_active
from agent_session.persistence_jsonl.reader import (
    DEFAULT_MAX_LOG_BYTES,
    LogReader,
    both_encodings,
    flat_artifact,
    too_large,
)
from agent_session.persistence_jsonl.scan import LogSummary
from agent_session.session import SessionError, SessionStoreEntryError

__all__ = ["Surveyed", "survey"]


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
    compression: str = "none"
    """The log's encoding: ``none`` (``session.jsonl``) or ``zstd``."""
    updated: int | None = None
    """When the log was last written (its modification time, ms since the epoch)."""


def survey(
    root: str, ops: FileOps | None = None, max_log_bytes: int = DEFAULT_MAX_LOG_BYTES
) -> Iterator[Surveyed]:
    """Every session directory under ``root`` and anything planted beside them, one at a
    time, in memory bounded by :data:`~persistence_jsonl.scan.MAX_SUMMARY_LINE` whatever the
    logs' sizes, without writing, following a link, opening a FIFO or taking any lock.

    Nothing is skipped silently: an entry that is not a session (a flat log the reference
    refuses, a directory with both a plain and a compressed log, a file, a link, a log that
    is not a regular file, a log whose header names another directory, as a copied session
    directory's does), one this process cannot read, and a log over ``max_log_bytes``
    (which a load would refuse; it is not read) are each reported with the reason, not
    raised. A directory without any log
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
    in_session_dir = path.endswith((PLAIN.filename, ZSTD.filename))
    fallback = os.path.basename(os.path.dirname(path) if in_session_dir else path)
    return Surveyed(path, fallback, size, None, error, False, encoding_of(path).name)


def _survey_entry(
    reader: LogReader, entry: str, held: set[tuple[int, int, int]] | None
) -> Surveyed | None:
    """What ``entry`` (a path in a project directory) is; permission errors propagate."""
    ops = reader.ops
    found = ops.stat(entry)
    if found is None:
        return None  # removed while listing
    if not found.is_dir:
        if entry.endswith(FLAT_SUFFIXES):
            return _refused(entry, found.size, flat_artifact(entry))
        problem = f'"{entry}" is {found.kind_name}, not a session directory'
        return _refused(entry, found.size, SessionStoreEntryError(problem))
    logs = logs_in(entry, ops.stat)
    if len(logs) > 1:
        return _refused(entry, sum(s.size for _, s in logs), both_encodings(entry))
    if not logs:
        return None
    ((path, log),) = logs
    encoding = encoding_of(path)
    if not log.is_file:
        refused = SessionStoreEntryError(f'"{path}" is {log.kind_name}, not a regular file')
        return _refused(path, log.size, refused)
    try:
        if log.size > reader.max_log_bytes:
            raise too_large(path, log.size, reader.max_log_bytes)
        summary = encoding.summarize(ops, path, log.size, reader.max_log_bytes)
        reader.check_identity(path, summary.header, None)
    except (SessionError, OSError) as e:
        return _refused(path, log.size, e)
    active = writer_active(ops, entry, held)
    name = os.path.basename(entry)
    updated = log.mtime_ns // 1_000_000
    return Surveyed(path, name, summary.size, summary, None, active, encoding.name, updated)
