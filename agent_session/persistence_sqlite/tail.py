"""Reading the last events of a session from a SQLite store by the ``(session_id, seq)``
index, so that the cost of a short read does not grow with the log.

Guarantees: what is returned is exactly what a whole read would return as the log's last
events, from one snapshot; whenever the last rows are not plainly that (a row that does not
parse: a torn tail; a seq gap), ``None`` asks for the whole read instead, whose rules say
what they are. Never writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from agent_session.persistence_sqlite.rows import (
    EVENT_COLUMNS,
    HEADER_COLUMNS,
    header_of,
    parsed_row,
)
from agent_session.persistence_sqlite.runs import with_lazy_runs
from agent_session.persistence_sqlite.schema import transaction
from agent_session.session.persistence.kit import StoredTail

__all__ = ["read_from_last", "read_tail"]


def read_tail(db: sqlite3.Connection, id: str, count: int, where: str) -> StoredTail | None:
    """The last ``count`` events of ``id``'s log, or ``None``: read it whole (it may not be
    stored). ``where`` names the database in errors."""
    asked, count = count, max(count, 1)  # (the seq past the last event is the last's + 1)
    with transaction(db, "DEFERRED"):  # (one snapshot)
        row = db.execute(f"SELECT {HEADER_COLUMNS} FROM sessions WHERE id = ?", (id,)).fetchone()
        rows = db.execute(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
            (id, count),
        ).fetchall()
    if row is None:
        return None
    start = rows[-1][0] if rows else 0
    if len(rows) < count and start != 0:
        return None  # (rows are missing)
    events = _contiguous(rows[::-1], start)
    if events is None:
        return None
    return StoredTail(header_of(row, where), start, events, False).last(asked)


def read_from_last(db: sqlite3.Connection, id: str, type: str, where: str) -> StoredTail | None:
    """The events of ``id``'s log from its last event of ``type`` on, from one snapshot, that
    event found by the ``(session_id, seq)`` index read backwards (no other row's data is
    parsed); ``None`` when there is none, or the rows after it are not plainly the log's
    end (the whole read's rules judge them)."""
    with transaction(db, "DEFERRED"):  # (one snapshot)
        row = db.execute(f"SELECT {HEADER_COLUMNS} FROM sessions WHERE id = ?", (id,)).fetchone()
        found = db.execute(
            "SELECT seq FROM events WHERE session_id = ? AND type = ? ORDER BY seq DESC LIMIT 1",
            (id, type),
        ).fetchone()
        if row is None or found is None:
            return None
        rows = db.execute(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq",
            (id, found[0]),
        ).fetchall()
    events = _contiguous(rows, found[0])
    return None if events is None else StoredTail(header_of(row, where), found[0], events, False)


def _contiguous(rows: list[Any], start: int) -> Sequence[Any] | None:
    """The events of ``rows`` (in seq order, from ``start``), delta runs unbuilt; ``None``
    when a row does not parse (a torn tail) or a seq is missing."""
    events = []
    for offset, one in enumerate(rows):
        event = parsed_row(one)
        if event is None or event["seq"] != start + offset:
            return None
        events.append(event)
    return with_lazy_runs(events)
