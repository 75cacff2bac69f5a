"""Checking the chain of a stored log, through any store."""

from __future__ import annotations

from agent_session.session import SessionNotFoundError
from agent_session.session.chain import IntegrityReport, check_chain, stored_units
from agent_session.session.persistence.service import SessionPersistence

__all__ = ["check_store_log"]


async def check_store_log(store: SessionPersistence, id: str) -> IntegrityReport:
    """The chain check of ``id``'s log as ``store`` keeps it (its cold tier's copy when it
    is archived). Never writes.

    Raises:
        SessionNotFoundError: No log of ``id``.
    """
    raw = await store.read_raw(id)
    if raw is None:
        raise SessionNotFoundError(f'session "{id}" not found')
    header, units = stored_units(raw.content)
    return check_chain(id, header, units)
