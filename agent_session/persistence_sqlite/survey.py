"""What a session database holds, session by session, for operator tools (``ls``): answered
by index queries over the rows (counts and the last turn bracket) and, for its number of
turns, the number its last ``turn/start`` names (one small row per session), on a read-only
connection that writes nothing."""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Literal

from agent_session.persistence_sqlite.rows import HEADER_COLUMNS, header_of
from agent_session.persistence_sqlite.schema import open_read_only
from agent_session.session import SessionError, SessionFormatUnsupportedError
from agent_session.session.persistence.kit import ListedSession

__all__ = ["survey"]


_QUERY = f"""
SELECT {HEADER_COLUMNS},
  (SELECT seq FROM events e WHERE e.session_id = s.id ORDER BY e.seq DESC LIMIT 1),
  (SELECT time FROM events e WHERE e.session_id = s.id ORDER BY e.seq DESC LIMIT 1),
  (SELECT type FROM events e WHERE e.session_id = s.id AND e.type IN ('turn/start', 'turn/end')
   ORDER BY e.seq DESC LIMIT 1),
  (SELECT CASE WHEN json_valid(data) THEN json_extract(data, '$.turn') END FROM events e
   WHERE e.session_id = s.id AND e.type = 'turn/start' ORDER BY e.seq DESC LIMIT 1)
FROM sessions s ORDER BY s.id
"""


def survey(path: str) -> list[ListedSession]:
    """Every session of the database at ``path``, read-only.

    Raises:
        SessionFormatUnsupportedError: The file is not a session database of this format.
        OSError: It cannot be opened.
    """
    try:
        opened = open_read_only(path, 5000)
    except sqlite3.OperationalError as e:
        raise OSError(f'cannot open session database "{path}": {e}') from e
    db = opened.connection
    db.text_factory = bytes
    with contextlib.closing(db):
        try:
            rows = db.execute(_QUERY).fetchall()
        except sqlite3.OperationalError as e:
            raise OSError(f'cannot read session database "{path}": {e}') from e
        except sqlite3.DatabaseError as e:
            raise SessionFormatUnsupportedError(
                f'session database at "{path}" cannot be read as a SQLite database: {e}'
            ) from e
    return [_summary(row, path) for row in rows]


def _summary(row: tuple[object, ...], path: str) -> ListedSession:
    last_seq, updated, bracket, turns = row[9:]
    count = last_seq + 1 if isinstance(last_seq, int) else 0
    last: Literal["start", "end"] | None = None
    if bracket is not None:
        last = "start" if bracket == b"turn/start" else "end"
    raw_id = row[0]
    id = raw_id.decode("utf-8", "replace") if isinstance(raw_id, bytes) else str(raw_id)
    try:
        header = header_of(row, f'database "{path}"')
    except SessionError as e:
        return ListedSession(id, None, e, count, last, turns=_int(turns))
    when = updated if isinstance(updated, int) else None  # the last event's time
    return ListedSession(id, header, None, count, last, updated=when, turns=_int(turns))


def _int(value: object) -> int | None:
    """A turn number read from a stored row (``None`` when there is none, or it is odd or
    damaged: one bad row never fails the listing of the store)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
