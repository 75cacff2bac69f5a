"""The reads of :class:`persistence_postgres.storage.PostgresStorage`: a session's log in one
snapshot, its stored bytes, the listing's headers, and the revision strings they carry."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_session.persistence_jsonl.layout import parse_header
from agent_session.persistence_jsonl.tail import line_events
from agent_session.persistence_postgres.lines import scan_rows
from agent_session.persistence_postgres.locks import Connection
from agent_session.session.persistence.kit import (
    RawArtifact,
    SessionSnapshot,
    StoredLog,
    StoredTail,
)

__all__ = [
    "RowCut",
    "read_from_last",
    "read_log",
    "read_raw",
    "read_tail",
    "revision_of",
    "snapshots_of",
]

_PAGE = 10_000
"""Rows per keyset page of a load (bounds the driver's buffers, whatever the log's size)."""


@dataclass(frozen=True, slots=True)
class RowCut:
    """Where a torn tail starts, and the revision of the rows it was found in."""

    seq: int
    revision: str


def revision_of(incarnation: object, revision: object) -> str:
    """The revision string of a session row (its incarnation and revision counter)."""
    return f"postgres:incarnation:{incarnation}:revision:{revision}"


def read_log(db: Connection, id: str) -> StoredLog | None:
    """Session ``id``'s stored log, read in one repeatable-read snapshot by keyset pages;
    ``None`` when there is no such session."""
    with db.transaction(), db.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        found = cursor.execute(
            "SELECT header, incarnation, revision FROM agent_session WHERE id = %s", (id,)
        ).fetchone()
        if found is None:
            return None
        rows: list[tuple[int, str]] = []
        while True:  # keyset pages, in the transaction's one snapshot
            after = rows[-1][0] if rows else -1
            page = cursor.execute(
                "SELECT seq, line FROM agent_session_event WHERE session_id = %s "
                "AND seq > %s ORDER BY seq LIMIT %s",
                (id, after, _PAGE),
            ).fetchall()
            rows.extend(page)
            if len(page) < _PAGE:
                break
    revision = revision_of(found[1], found[2])
    scanned = scan_rows(found[0], rows, f'session "{id}" in PostgreSQL')
    cut = None if scanned.cut_seq is None else RowCut(scanned.cut_seq, revision)
    log = scanned.log
    return StoredLog(log.header, log.events, revision, cut, log.size)


def read_tail(db: Connection, id: str, count: int) -> StoredTail | None:
    """The last ``count`` (or more) events of ``id``'s log by the ``(session_id, seq)``
    index, from one snapshot, or ``None``: read it whole (it may not be stored; its last rows
    may be a torn tail or have a gap, which the whole read's rules judge)."""
    asked, count = count, max(count, 1)  # (the seq past the last event is the last's + 1)
    with db.transaction(), db.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        found = cursor.execute("SELECT header FROM agent_session WHERE id = %s", (id,)).fetchone()
        rows = cursor.execute(
            "SELECT line FROM agent_session_event WHERE session_id = %s ORDER BY seq DESC LIMIT %s",
            (id, count),
        ).fetchall()
    if found is None:
        return None
    lines = [row[0].encode() for row in reversed(rows)]
    read = line_events(lines, at_start=len(rows) < count)
    if read is None:
        return None
    header = parse_header(found[0].encode(), f'session "{id}" in PostgreSQL')
    return StoredTail(header, *read, False).last(asked)


def read_from_last(db: Connection, id: str, type: str) -> StoredTail | None:
    """The events of ``id``'s log from its last event of ``type`` on, from one snapshot, that
    event found by the ``(session_id, seq)`` index read backwards (no other line is
    parsed); ``None`` when there is none, or the lines after it are not plainly the log's
    end (the whole read's rules judge them)."""
    with db.transaction(), db.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        found = cursor.execute("SELECT header FROM agent_session WHERE id = %s", (id,)).fetchone()
        last = cursor.execute(
            "SELECT seq FROM agent_session_event WHERE session_id = %s AND type = %s "
            "ORDER BY seq DESC LIMIT 1",
            (id, type),
        ).fetchone()
        if found is None or last is None:
            return None
        rows = cursor.execute(
            "SELECT line FROM agent_session_event WHERE session_id = %s AND seq >= %s ORDER BY seq",
            (id, last[0]),
        ).fetchall()
    read = line_events([row[0].encode() for row in rows], at_start=False)
    if read is None or read[0] != last[0]:
        return None
    header = parse_header(found[0].encode(), f'session "{id}" in PostgreSQL')
    return StoredTail(header, *read, False)


def read_raw(db: Connection, id: str) -> RawArtifact | None:
    """Session ``id``'s stored lines as the JSONL file they are, verbatim."""
    with db.transaction():
        found = db.execute("SELECT header FROM agent_session WHERE id = %s", (id,)).fetchone()
        if found is None:
            return None
        lines = db.execute(
            "SELECT line FROM agent_session_event WHERE session_id = %s ORDER BY seq",
            (id,),
        ).fetchall()
    header = parse_header(found[0].encode(), f'session "{id}" in PostgreSQL')
    text = "".join(line + "\n" for line in [found[0], *(row[0] for row in lines)])
    return RawArtifact(header, "session.jsonl", text.encode())


def snapshots_of(rows: Sequence[tuple[Any, ...]]) -> list[SessionSnapshot]:
    """The listing's snapshots of ``(id, header, incarnation, revision)`` rows; a damaged
    header is left out (``verify`` reports it)."""
    snapshots = []
    for id, header, incarnation, revision in rows:
        with contextlib.suppress(Exception):
            parsed = parse_header(header.encode(), f'session "{id}" in PostgreSQL')
            snapshots.append(SessionSnapshot(parsed, revision_of(incarnation, revision)))
    return snapshots
