"""The SQLite backend: every session in one database file, in the TypeScript reference's
SQLite format (``dsh-session-persistence-sqlite``)."""

from agent_session.persistence_sqlite.backend import SqlitePersistence
from agent_session.persistence_sqlite.schema import APPLICATION_ID, SCHEMA_VERSION

__all__ = ["APPLICATION_ID", "SCHEMA_VERSION", "SqlitePersistence"]
