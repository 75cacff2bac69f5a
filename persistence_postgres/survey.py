"""What a PostgreSQL session store holds, session by session, for operator tools (``ls``):
one query over the session rows and an index seek per session for its last turn bracket; no
line is read or parsed."""

from __future__ import annotations

from typing import Literal

import psycopg

from persistence_jsonl.layout import parse_header
from persistence_postgres.schema import migrate
from persistence_postgres.storage import PostgresStorage
from session import SessionError
from session.persistence.api import ListedSession

__all__ = ["survey"]

_QUERY = """
SELECT s.id, s.header, s.next_seq,
  (SELECT e.type FROM agent_session_event e WHERE e.session_id = s.id
   AND e.type IN ('turn/start', 'turn/end') ORDER BY e.seq DESC LIMIT 1)
FROM agent_session s ORDER BY s.id
"""


def survey(dsn: str) -> list[ListedSession]:
    """Every session of the store at ``dsn`` (the schema is created if missing).

    Raises:
        OSError: The server cannot be reached.
    """
    storage = PostgresStorage(dsn, pool_size=1)
    try:
        with psycopg.connect(dsn, **storage.settings) as db:
            migrate(db)
            rows = db.execute(_QUERY).fetchall()
    except psycopg.OperationalError as e:
        raise OSError(f"cannot list the sessions of PostgreSQL at {storage.shown}: {e}") from e
    out = []
    for id, header, next_seq, bracket in rows:
        last: Literal["start", "end"] | None = None
        if bracket is not None:
            last = "start" if bracket == "turn/start" else "end"
        try:
            parsed = parse_header(header.encode(), f'session "{id}" in PostgreSQL')
        except SessionError as e:
            out.append(ListedSession(id, None, e, int(next_seq), last))
            continue
        out.append(ListedSession(id, parsed, None, int(next_seq), last))
    return out
