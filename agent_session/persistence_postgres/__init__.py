"""The PostgreSQL backend: one session store for a fleet of agent hosts (an optional extra:
``agent-session-runtime[postgres]``)."""

from agent_session.persistence_postgres.backend import PostgresPersistence
from agent_session.persistence_postgres.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "PostgresPersistence"]
