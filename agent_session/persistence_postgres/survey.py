"""What a PostgreSQL session store holds, session by session, for operator tools (``ls``):
one query over the session rows, an index seek per session for its last turn bracket and a
look at ``pg_locks`` for a live writer; no line is read or parsed, nothing is written (a
database whose schema is current is only read)."""

from __future__ import annotations

from typing import Literal

import orjson
import psycopg

from agent_session.persistence_jsonl.layout import parse_header
from agent_session.persistence_postgres.locks import HELD, KEY
from agent_session.persistence_postgres.schema import migrate
from agent_session.persistence_postgres.storage import PostgresStorage
from agent_session.persistence_postgres.unreachable import unreachable
from agent_session.session import SessionError
from agent_session.session.persistence.kit import ListedSession

__all__ = ["survey"]

_QUERY = f"""
SELECT s.id, s.header, s.next_seq, (extract(epoch FROM s.updated_at) * 1000)::bigint,
  (SELECT e.type FROM agent_session_event e WHERE e.session_id = s.id
   AND e.type IN ('turn/start', 'turn/end') ORDER BY e.seq DESC LIMIT 1),
  (SELECT e.line FROM agent_session_event e
   WHERE e.session_id = s.id AND e.type = 'turn/start' ORDER BY e.seq DESC LIMIT 1),
  (SELECT k FROM (SELECT {KEY % "s.id"} AS k) AS key WHERE EXISTS (
     SELECT 1 FROM pg_locks l WHERE {HELD})) IS NOT NULL
FROM agent_session s ORDER BY s.id
"""


def survey(dsn: str) -> list[ListedSession]:
    """Every session of the store at ``dsn`` (the schema is created if missing).

    Raises:
        OSError: The server cannot be reached.
    """
    storage = PostgresStorage(dsn, pool_size=1)
    try:
        with storage.connect() as db:
            migrate(db)
            rows = db.execute(_QUERY).fetchall()
    except psycopg.Error as e:
        raise unreachable(storage.shown, e, "cannot list the sessions") from None
    out = []
    for id, header, next_seq, updated, bracket, turns, writing in rows:
        last: Literal["start", "end"] | None = None
        if bracket is not None:
            last = "start" if bracket == "turn/start" else "end"
        try:
            parsed = parse_header(header.encode(), f'session "{id}" in PostgreSQL')
        except SessionError as e:
            out.append(
                ListedSession(id, None, e, int(next_seq), last, bool(writing), turns=_int(turns))
            )
            continue
        listed = ListedSession(
            id, parsed, None, int(next_seq), last, bool(writing), int(updated), _int(turns)
        )
        out.append(listed)
    return out


def _int(line: object) -> int | None:
    """The turn number of a stored ``turn/start`` line (``None`` when there is none, or it
    is damaged: one bad row never fails the listing of the store)."""
    try:
        turn = orjson.loads(str(line))["data"]["turn"] if line is not None else None
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return turn if type(turn) is int else None
