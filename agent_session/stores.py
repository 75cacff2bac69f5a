"""Where a command's sessions live: a store named on the command line, parsed once.

``STORE`` is a directory of JSONL logs (a path), a SQLAlchemy-style URL of a SQLite database
(``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``), or a PostgreSQL URL
(``postgresql://user@host:port/dbname``, ``postgres://`` too). Every command takes one,
positionally or as ``--store``, or from the environment (:data:`STORE_ENV`).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from agent_session.exits import NotFound, UserError
from session.persistence.redaction import mask_store, remember_store

if TYPE_CHECKING:
    from session.persistence.coordinator import PersistenceCoordinator

__all__ = [
    "POSTGRES_SCHEMES",
    "SQLITE_PREFIX",
    "STORE_ENV",
    "StoreSpec",
    "parse_store",
    "require_postgres",
]

SQLITE_PREFIX = "sqlite:///"
"""The scheme of a SQLite store URL; what follows is the path (``/`` first when absolute)."""
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""The schemes of a PostgreSQL store URL (libpq's)."""
STORE_ENV = "AGENT_SESSION_STORE"
"""Environment variable: the store of a command that names none."""


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """A parsed ``STORE``: its kind and the absolute path it names."""

    kind: Literal["jsonl", "sqlite", "postgres"]
    path: str
    """The absolute store root (JSONL), database file (SQLite), or the connection URL
    (PostgreSQL)."""

    @property
    def url(self) -> str:
        """The store as an absolute ``STORE`` (a path, ``sqlite:////abs/path.db``, or the
        PostgreSQL URL)."""
        return SQLITE_PREFIX + self.path if self.kind == "sqlite" else self.path

    @property
    def named(self) -> str:
        """:attr:`url` without any password it carries: how output names the store."""
        return mask_store(self.url)

    @property
    def shown(self) -> str:
        """The store as a user types it again from the current directory (relative when
        that is shorter; a PostgreSQL URL without its password)."""
        if self.kind == "postgres":
            return mask_store(self.path)
        relative = os.path.relpath(self.path)
        path = self.path if relative.startswith("..") else relative
        return path if self.kind == "jsonl" else SQLITE_PREFIX + path

    def check_exists(self) -> None:
        """Refuse a store that is not there (read commands never create a directory or a
        database file; a PostgreSQL database is asked when the command connects)."""
        if self.kind == "postgres":
            return
        what = "store root" if self.kind == "jsonl" else "session database"
        if not os.path.exists(self.path):
            raise NotFound(f'{what} "{self.path}" does not exist')
        if self.kind == "jsonl" and not os.path.isdir(self.path):
            raise UserError(f'store root "{self.path}" is not a directory')
        if self.kind == "sqlite" and os.path.isdir(self.path):
            raise UserError(f'session database "{self.path}" is a directory, not a file')
        if self.kind == "sqlite" and not stat.S_ISREG(os.stat(self.path).st_mode):
            raise UserError(f'session database "{self.path}" is not a regular file')

    def open(
        self,
        *,
        max_log_bytes: int | None = None,
        compression: str = "none",
        read_only: bool = False,
    ) -> PersistenceCoordinator:
        """A backend on this store (created on its first write if it does not exist).
        ``max_log_bytes`` and ``compression`` (of new sessions) apply to JSONL; a SQLite
        database keeps the journal mode it has, and ``read_only`` opens it for reading only
        (a read command never creates, writes or checkpoints it, nor waits for a writer)."""
        if self.kind == "sqlite":
            from persistence_sqlite import SqlitePersistence

            return SqlitePersistence(self.path, journal_mode=None, read_only=read_only)
        if self.kind == "postgres":
            require_postgres()
            from persistence_postgres import PostgresPersistence

            return PostgresPersistence(self.path)
        from persistence_jsonl import JsonlPersistence
        from persistence_jsonl.reader import DEFAULT_MAX_LOG_BYTES

        return JsonlPersistence(
            self.path,
            max_log_bytes=max_log_bytes or DEFAULT_MAX_LOG_BYTES,
            new_session_compression=compression,
        )


def require_postgres() -> None:
    """Refuse, with the install hint, a PostgreSQL store in a build without the driver.

    Raises:
        UserError: The postgres extra is not installed.
    """
    try:
        import persistence_postgres  # noqa: F401
    except ImportError as e:
        raise UserError(
            "a PostgreSQL store needs the postgres extra: pip install "
            f"'agent-session-runtime[postgres]' ({e})"
        ) from None


def parse_store(text: str) -> StoreSpec:
    """``text`` as a store: a ``sqlite:///`` URL, or else a directory path.

    Raises:
        UserError: An empty store, a URL of a scheme this build does not serve, or a SQLite
            URL without a path.
    """
    if not text:
        raise UserError("the store must not be empty")
    remember_store(text)  # whatever prints or logs later never shows its password
    if text.startswith(POSTGRES_SCHEMES):
        return StoreSpec("postgres", text)
    if text.startswith(SQLITE_PREFIX):
        path = text[len(SQLITE_PREFIX) :]
        if not path or path.endswith("/"):
            raise UserError(
                f"{mask_store(text)!r} names no database file (sqlite:///path/to/file.db)"
            )
        return StoreSpec("sqlite", os.path.abspath(path))
    scheme, separator, _ = text.partition("://")
    if separator and scheme.isidentifier():
        raise UserError(
            f"unsupported store {mask_store(text)!r}: give a directory of JSONL logs, a "
            "sqlite:///path/to/file.db URL or a postgresql:// URL"
        )
    return StoreSpec("jsonl", os.path.abspath(text))
