"""The PostgreSQL schema, created and upgraded by numbered migrations, and the connection
settings every connection of this backend runs with.

One row per stored JSONL line (``agent_session_event``: a plain event, or a packed run of
streamed deltas with its first seq and its member count), the line kept as ``text``, never
``jsonb`` (which reorders keys and rewrites numbers: the line must come back byte for byte);
one row per session (``agent_session``) with its header line, the next seq, the revision and
the incarnation.
"""

from __future__ import annotations

from typing import Final

import psycopg

from agent_session.session import SessionDurabilityError, SessionFormatUnsupportedError

__all__ = [
    "DURABILITY_QUERY",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "check_durability",
    "migrate",
    "refuse_undurable",
    "schema_version",
]

MIGRATIONS: Final = (
    # 1: sessions and their lines.
    """
    CREATE TABLE agent_session (
      id          text PRIMARY KEY,
      header      text   NOT NULL,
      created_at  bigint NOT NULL,
      next_seq    bigint NOT NULL,
      revision    bigint NOT NULL,
      incarnation uuid   NOT NULL,
      updated_at  timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE agent_session_event (
      session_id text   NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
      seq        bigint NOT NULL,
      n          int    NOT NULL CHECK (n >= 1),
      type       text   NOT NULL,
      line       text   NOT NULL,
      PRIMARY KEY (session_id, seq)
    );
    """,
    # 2: no foreign key from a line to its session row. Its check ran for every inserted
    # line (a sixth of a checkpoint's statement); a line is only ever inserted by the
    # statement that moves its session row (or by a repair holding that row), and a delete
    # removes the row before its lines, in one transaction.
    """
    ALTER TABLE agent_session_event
      DROP CONSTRAINT IF EXISTS agent_session_event_session_id_fkey;
    """,
)
"""The migrations, in order; migration ``k`` (1-based) brings the schema to version ``k``."""
SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The schema version this build writes and reads."""

_LOCK: Final = 0x4147_5345_5353_4E31  # "AGSESSN1": serializes migrations across processes


def schema_version(connection: psycopg.Connection[tuple[object, ...]]) -> int:
    """The database's schema version (0: none), read without writing or locking anything."""
    row = connection.execute("SELECT to_regclass('agent_session_schema') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return 0
    found = connection.execute("SELECT version FROM agent_session_schema").fetchone()
    return 0 if found is None else int(str(found[0]))


def migrate(connection: psycopg.Connection[tuple[object, ...]]) -> None:
    """Bring the schema to :data:`SCHEMA_VERSION` (idempotent; concurrent callers in several
    processes serialize on a transaction-level advisory lock). A database already at this
    version is only read, so a read-only server (a standby) serves every read.

    Raises:
        SessionFormatUnsupportedError: The database holds a newer schema version.
    """
    if schema_version(connection) == SCHEMA_VERSION:
        return
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        connection.execute(
            "CREATE TABLE IF NOT EXISTS agent_session_schema ("
            " singleton int PRIMARY KEY CHECK (singleton = 1), version int NOT NULL)"
        )
        row = connection.execute("SELECT version FROM agent_session_schema").fetchone()
        version = 0 if row is None else int(str(row[0]))
        if version > SCHEMA_VERSION:
            raise SessionFormatUnsupportedError(
                f"the session database has schema version {version}, newer than this build's "
                f"({SCHEMA_VERSION}): upgrade agent-session-runtime"
            )
        for number in range(version + 1, SCHEMA_VERSION + 1):
            connection.execute(MIGRATIONS[number - 1].encode())
        connection.execute(
            "INSERT INTO agent_session_schema (singleton, version) VALUES (1, %s) "
            "ON CONFLICT (singleton) DO UPDATE SET version = excluded.version",
            (SCHEMA_VERSION,),
        )


DURABILITY_QUERY: Final = "SELECT current_setting('fsync'), current_setting('synchronous_commit')"
"""What :func:`check_durability` reads (for a connection of either kind)."""


def check_durability(connection: psycopg.Connection[tuple[object, ...]]) -> None:
    """Refuse a server that would acknowledge commits it has not flushed.

    Raises:
        SessionDurabilityError: ``fsync`` is off on the server, or ``synchronous_commit`` is
            not on for this connection (it is set on every connection, so a role or database
            setting that still wins is refused too).
    """
    refuse_undurable(connection.execute(DURABILITY_QUERY).fetchone())


def refuse_undurable(settings: tuple[object, ...] | None) -> None:
    """Raise :class:`SessionDurabilityError` for the row of :data:`DURABILITY_QUERY` when it
    says commits may be acknowledged unflushed (see :func:`check_durability`)."""
    fsync, synchronous = settings or ("", "")
    if fsync != "on":
        raise SessionDurabilityError(
            "the PostgreSQL server runs with fsync=off: it acknowledges commits a crash can "
            "lose; refusing to store sessions there"
        )
    if synchronous not in ("on", "remote_write", "remote_apply"):
        raise SessionDurabilityError(
            f"synchronous_commit is {synchronous!r} for this connection: commits would be "
            "acknowledged before they are durable; refusing to store sessions there"
        )
