"""Reading the last events of a session from a SQLite store by the ``(session_id, seq)``
index, so that the cost of a short read does not grow with the log.

Guarantees: what is returned is exactly what a whole read would return as the log's last
events, from one snapshot; whenever the last rows are not plainly that (a row that does not
parse: a torn tail; a seq gap), ``None`` asks for the whole read instead, whose rules say
what they are. Never writes.
"""

from __future__ import annotations

import sqlite3

from agent_session.persistence_sqlite.rows import (
    EVENT_COLUMNS,
    HEADER_COLUMNS,
    header_of,
    parsed_row,
)
from agent_session.persistence_sqlite.runs import with_lazy_runs
from agent_session.persistence_sqlite.schema import transaction
from agent_session.session.persistence.kit import StoredTail

__all__ = ["last_of_type", "read_tail"]


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
    events = []
    start = rows[-1][0] if rows else 0
    if len(rows) < count and start != 0:
        return None  # (rows are missing)
    for offset, one in enumerate(reversed(rows)):
        event = parsed_row(one)
        if event is None or event["seq"] != start + offset:
            return None
        events.append(event)
    return StoredTail(header_of(row, where), start, with_lazy_runs(events), False).last(asked)


def last_of_type(db: sqlite3.Connection, id: str, type: str) -> int | None:
    """The seq of the last event of ``type`` in ``id``'s log, by the ``(session_id, seq)``
    index read backwards (no row's data is parsed); ``None`` when there is none."""
    row = db.execute(
        "SELECT seq FROM events WHERE session_id = ? AND type = ? ORDER BY seq DESC LIMIT 1",
        (id, type),
    ).fetchone()
    return None if row is None else int(row[0])
