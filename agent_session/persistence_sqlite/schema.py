"""The reference's SQLite database format (``dsh-session-persistence-sqlite``): its schema, its
identity pragmas and its opening checks, with this build's stricter connection settings.

Opening a database either returns a connection that is safe to write this format into, or
raises :class:`session.SessionFormatUnsupportedError` with the reference's message (a newer or
older schema version, a foreign application id, an unversioned database that already holds
other tables, a file that is not a SQLite database), having changed nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import stat
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal

from agent_session.session import SessionFormatUnsupportedError

__all__ = [
    "APPLICATION_ID",
    "JOURNAL_MODES",
    "SCHEMA_VERSION",
    "JournalMode",
    "OpenDatabase",
    "check_format",
    "check_regular",
    "check_tables",
    "open_database",
    "open_read_only",
    "transaction",
]

SCHEMA_VERSION: Final = 14
"""``PRAGMA user_version`` of the format (the reference's ``SCHEMA_VERSION``)."""
APPLICATION_ID: Final = 1146308688
"""``PRAGMA application_id`` of the format: 0x44534850, "DSHP"."""

JournalMode = Literal["wal", "delete", "truncate", "persist"]
JOURNAL_MODES: Final = ("wal", "delete", "truncate", "persist")

_DDL: Final = """
CREATE TABLE IF NOT EXISTS persistence_state (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  store_id  TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS sessions (
  id               TEXT PRIMARY KEY,
  version          INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  cwd              TEXT,
  parent_session   TEXT,
  seed_length      INTEGER,
  origin           TEXT,
  delegation_depth INTEGER,
  agent_preset    TEXT,
  incarnation      TEXT NOT NULL,
  revision         INTEGER NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS events (
  session_id        TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               INTEGER NOT NULL,
  type              TEXT NOT NULL,
  time              INTEGER NOT NULL,
  data              TEXT NOT NULL,
  source_event_seqs TEXT,
  surface_op        TEXT,
  PRIMARY KEY (session_id, seq)
) STRICT;
"""

_STRICT_TABLES: Final = (3, 37, 0)
_SQLITE_BUSY: Final = 5  # the first SQLite that knows STRICT tables


@dataclass(frozen=True, slots=True)
class OpenDatabase:
    """A configured connection and the identity of the store it opened."""

    connection: sqlite3.Connection
    identity: str
    """``file:<dev>:<ino>:store:<store_id>`` (``memory:store:<store_id>`` in memory): a new
    file at the same path, or another store, never shares a revision with this one."""


def open_database(
    path: str, journal_mode: JournalMode | None, busy_timeout_ms: int
) -> OpenDatabase:
    """Open (creating if missing) the session database at ``path`` (absolute, or
    ``":memory:"``), check its format and apply the schema, in the reference's order.

    A missing file is created exclusively with mode 0600, and missing parent directories
    0700, before SQLite opens it. ``journal_mode`` ``None`` keeps the mode an existing
    database has (a new one gets WAL). Every connection runs with ``foreign_keys = ON``,
    ``synchronous = FULL`` (a commit is on stable storage when it returns, whatever SQLite's
    build default is) and a finite ``busy_timeout`` (another process's write transaction is
    waited for that long, then the call fails with ``database is locked``).

    Raises:
        SessionFormatUnsupportedError: Not this format (the message names the path).
        OSError: The file or its directories cannot be created or opened.
    """
    if sqlite3.sqlite_version_info < _STRICT_TABLES:
        raise SessionFormatUnsupportedError(
            f"the session database format needs SQLite 3.37 or newer (STRICT tables); this "
            f"Python links SQLite {sqlite3.sqlite_version}"
        )
    if path != ":memory:":
        check_regular(path)
        _create_file(path)
    connection = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
    )
    try:
        _configure(connection, path, journal_mode, busy_timeout_ms)
        (store_id,) = connection.execute(
            "SELECT store_id FROM persistence_state WHERE singleton = 1"
        ).fetchone()
        if not isinstance(store_id, str) or not store_id:
            raise SessionFormatUnsupportedError(
                f'session database at "{path}" has no valid store identity'
            )
        if path == ":memory:":
            identity = f"memory:store:{store_id}"
        else:
            found = os.stat(path)
            identity = f"file:{found.st_dev}:{found.st_ino}:store:{store_id}"
    except BaseException as e:
        connection.close()
        _refuse_unreadable(path, e)
        raise
    return OpenDatabase(connection, identity)


def open_read_only(path: str, busy_timeout_ms: int) -> OpenDatabase:
    """Open the existing session database at ``path`` for reading only: nothing is created,
    written, checkpointed or locked for writing (another process's write transaction does not
    block it; a crash's ``-wal`` is read, and left as it is). A file on a read-only file
    system is read as it is when no ``-wal`` holds commits beside it. A database with no
    schema yet (an empty file) reads as one without sessions.

    Raises:
        SessionFormatUnsupportedError: Not this format, or this format's identity over
            tables of another layout.
        OSError: Not a regular file, or it cannot be opened.
    """
    check_regular(path)
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, f'session database "{path}" does not exist')
    uri = "file:" + urllib.parse.quote(path) + "?mode=ro"
    try:
        try:
            connection = _read_only(uri, busy_timeout_ms)
        except sqlite3.OperationalError:
            wal = path + "-wal"
            if os.path.exists(wal) and os.path.getsize(wal) > 0:
                raise
            # a read-only file system (no -shm can be made) and nothing beside the file: the
            # file is all there is, and nothing can change it
            connection = _read_only(uri + "&immutable=1", busy_timeout_ms)
    except BaseException as e:
        _refuse_unreadable(path, e)
        raise
    try:
        on_disk = _checked_identity(connection, path)
        if on_disk == 0:  # no schema yet: read an empty one in memory
            connection.close()
            connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            for statement in _DDL.split(";")[:-1]:
                connection.execute(statement)
            connection.execute("PRAGMA query_only = 1")
            found = os.stat(path)
            return OpenDatabase(connection, f"file:{found.st_dev}:{found.st_ino}:store:none")
        row = connection.execute(
            "SELECT store_id FROM persistence_state WHERE singleton = 1"
        ).fetchone()
        found = os.stat(path)
        store_id = row[0] if row else "none"
        return OpenDatabase(connection, f"file:{found.st_dev}:{found.st_ino}:store:{store_id}")
    except BaseException as e:
        connection.close()
        _refuse_unreadable(path, e)
        raise


def _refuse_unreadable(path: str, error: BaseException) -> None:
    """Raise :class:`SessionFormatUnsupportedError` when an opening failed with ``error``
    because SQLite cannot read the file as a database; return for anything else (busy and
    I/O errors are not a verdict on the format), which the caller raises as it is."""
    if isinstance(error, sqlite3.DatabaseError) and not isinstance(error, sqlite3.OperationalError):
        raise SessionFormatUnsupportedError(
            f'session database at "{path}" cannot be read as a SQLite database: {error}'
        ) from error


def _read_only(uri: str, busy_timeout_ms: int) -> sqlite3.Connection:
    connection = sqlite3.connect(
        uri, uri=True, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
    )
    try:
        connection.execute("PRAGMA query_only = 1")
        connection.execute("PRAGMA user_version").fetchone()  # (opens the file now)
    except BaseException:
        connection.close()
        raise
    return connection


def check_regular(path: str) -> None:
    """Refuse, at once, a path that is there but not a regular file (a FIFO would block the
    open forever; a device or a socket is no database).

    Raises:
        OSError: ``path`` names something other than a regular file.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise OSError(errno.EINVAL, f'session database "{path}" is {kind}; refusing to open it')


_COLUMNS: Final = {
    "sessions": (
        "id",
        "version",
        "created_at",
        "cwd",
        "parent_session",
        "seed_length",
        "origin",
        "delegation_depth",
        "agent_preset",
        "incarnation",
        "revision",
    ),
    "events": (
        "session_id",
        "seq",
        "type",
        "time",
        "data",
        "source_event_seqs",
        "surface_op",
    ),
}
"""The columns of the format's tables, in order."""


def _checked_identity(connection: sqlite3.Connection, path: str) -> int:
    """The database's schema version, after the reference's verdict on its identity pragmas
    and, for this format's version, on its tables' layout (writes nothing).

    Raises:
        SessionFormatUnsupportedError: Not this format.
    """
    (on_disk,) = connection.execute("PRAGMA user_version").fetchone()
    (application_id,) = connection.execute("PRAGMA application_id").fetchone()
    (objects,) = connection.execute(
        "SELECT COUNT(*) FROM sqlite_schema WHERE name NOT GLOB 'sqlite_*'"
    ).fetchone()
    check_format(path, on_disk, application_id, objects)
    if on_disk == SCHEMA_VERSION:
        check_tables(connection, path)
    return int(on_disk)


def check_tables(connection: sqlite3.Connection, path: str) -> None:
    """Refuse a database with this format's identity whose tables have another layout.

    Raises:
        SessionFormatUnsupportedError: A table is missing or has other columns.
    """
    for table, columns in _COLUMNS.items():
        found = tuple(
            row[1] if isinstance(row[1], str) else row[1].decode()
            for row in connection.execute(f"PRAGMA table_info({table})").fetchall()
        )
        if found != columns:
            raise SessionFormatUnsupportedError(
                f'session database at "{path}" has the format\'s identity but its {table} '
                f"table has another layout (columns {', '.join(found) or 'none'})"
            )


def check_format(path: str, user_version: int, application_id: int, objects: int) -> None:
    """The reference's verdict on a database's identity pragmas (``objects``: how many
    schema objects it has that are not SQLite's own).

    Raises:
        SessionFormatUnsupportedError: With the reference's message naming ``path``.
    """
    where = f'session database at "{path}"'
    if user_version == 0 and (application_id != 0 or objects > 0):
        raise SessionFormatUnsupportedError(
            f"{where} has an unversioned schema or application identity"
        )
    if user_version not in (0, SCHEMA_VERSION):
        raise SessionFormatUnsupportedError(
            f"{where} has schema version {user_version}, incompatible with this build "
            f"({SCHEMA_VERSION})"
        )
    if user_version == SCHEMA_VERSION and application_id != APPLICATION_ID:
        raise SessionFormatUnsupportedError(
            f"{where} has application id {application_id}, expected {APPLICATION_ID}"
        )


def _create_file(path: str) -> None:
    """Create the missing parents (0700) and the file (0600, exclusively); an existing file
    keeps its mode."""
    missing = []
    parent = os.path.dirname(path)
    while not os.path.exists(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    for directory in reversed(missing):  # every one 0700, as Node's recursive mkdir does
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as e:
        if e.errno != errno.EEXIST:
            raise
        return
    os.close(fd)


def _configure(
    connection: sqlite3.Connection,
    path: str,
    journal_mode: JournalMode | None,
    busy_timeout_ms: int,
) -> None:
    """The reference's checks and schema in one ``BEGIN IMMEDIATE`` transaction, then the
    journal mode (``None``: the one the database has, or WAL for a new one); plus this
    build's durability and busy-timeout settings."""
    connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    connection.execute("PRAGMA foreign_keys = ON")
    # A deleted row's bytes are overwritten with zeros, in its page and in the free pages
    # (a deleted session leaves no trace in the file: ``SqliteStorage.delete``).
    connection.execute("PRAGMA secure_delete = ON")
    connection.execute("BEGIN IMMEDIATE")
    try:
        on_disk = _checked_identity(connection, path)
        for statement in _DDL.split(";")[:-1]:
            connection.execute(statement)
        connection.execute(
            "INSERT OR IGNORE INTO persistence_state (singleton, store_id) VALUES (1, ?)",
            (str(uuid.uuid4()),),
        )
        if on_disk == 0:
            connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise
    if journal_mode is None and on_disk == 0:
        journal_mode = "wal"
    if journal_mode is not None:
        _set_journal_mode(connection, journal_mode, busy_timeout_ms)
    connection.execute("PRAGMA synchronous = FULL")


def _set_journal_mode(
    connection: sqlite3.Connection, journal_mode: JournalMode, busy_timeout_ms: int
) -> None:
    """Switch the journal mode, trying again while another connection's transaction keeps
    the lock it needs (SQLite answers that at once, without its busy handler, when two
    connections open a new database together), for at most ``busy_timeout_ms``."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    pause = 0.001
    while True:
        try:
            connection.execute(f"PRAGMA journal_mode = {journal_mode.upper()}")
            return
        except sqlite3.OperationalError as e:
            busy = (getattr(e, "sqlite_errorcode", 0) & 0xFF) == _SQLITE_BUSY
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(pause)  # (a lock held by another connection: nothing to wait on but time)
        pause = min(pause * 2, 0.05)


@contextlib.contextmanager
def transaction(db: sqlite3.Connection, kind: str) -> Iterator[None]:
    """``BEGIN <kind>`` … ``COMMIT``; any failure (the commit's too) rolls back."""
    db.execute(f"BEGIN {kind}")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
        raise
