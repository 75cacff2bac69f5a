"""The SQLite backend: every session in one database file, in the TypeScript reference's
SQLite format (``dsh-session-persistence-sqlite``)."""

from persistence_sqlite.backend import SqlitePersistence
from persistence_sqlite.schema import APPLICATION_ID, SCHEMA_VERSION

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "SqlitePersistence"]
